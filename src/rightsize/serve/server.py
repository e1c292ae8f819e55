"""Run the app under uvicorn: ``serve(config)`` blocks (the CLI), ``running_server(config)`` is for tests.

    with running_server(ServerConfig(model="simplenet", tiny=True, port=0)) as base_url:
        httpx.post(f"{base_url}/v1/predict", json={"inputs": [[0.0] * 100]})

uvicorn uses uvloop and httptools when installed. Shutdown is graceful: the server stops accepting,
flushes partial batches at once ("drain"), answers every queued request, then stops the workers.
"""

from __future__ import annotations

import contextlib
import importlib.util
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import uvicorn

from rightsize.errors import RightsizeError, RunFailedError
from rightsize.hosts import allowed_hosts
from rightsize.serve.app import create_app
from rightsize.serve.config import ServerConfig
from rightsize.serve.guard import HostCheck, protocol_class
from rightsize.serve.service import Service


class _DrainingServer(uvicorn.Server):
    """uvicorn.Server that starts draining the batch queues the moment shutdown begins."""

    def __init__(self, config: uvicorn.Config, service: Service) -> None:
        super().__init__(config)
        self.service = service

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        self.service.begin_drain()
        await super().shutdown(sockets=sockets)


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening-ready socket on (host, port); port 0 picks a free one."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise RunFailedError(f"cannot listen on {host}:{port} ({exc.strerror}); pick another --port") from None
    sock.set_inheritable(True)
    return sock


def _url(host: str, sock: socket.socket) -> str:
    port = sock.getsockname()[1]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def _uvicorn_config(app: Any, config: ServerConfig) -> uvicorn.Config:
    fast = {
        "loop": "uvloop" if importlib.util.find_spec("uvloop") else "asyncio",
        "http": "httptools" if importlib.util.find_spec("httptools") else "h11",
    }
    guarded = protocol_class(config.read_timeout_s, config.max_connections)
    if guarded is not None:
        fast["http"] = guarded  # type: ignore[assignment]
    return uvicorn.Config(
        HostCheck(app, allowed_hosts(config.host)),
        host=config.host,
        port=config.port,
        log_level=config.log_level,
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=int(config.drain_timeout_s + 0.999),
        backlog=4096,
        **fast,  # type: ignore[arg-type]
    )


def _build(config: ServerConfig, on_ready: Callable[[Service], None] | None) -> tuple[_DrainingServer, Service]:
    service = Service(config, on_ready)
    app = create_app(config, service)
    return _DrainingServer(_uvicorn_config(app, config), service), service


def serve(config: ServerConfig, on_ready: Callable[[Service], None] | None = None) -> None:
    """Serve until SIGINT/SIGTERM, then drain. Raises RightsizeError for bad config or a failed start."""
    server, service = _build(config, on_ready)
    sock = bind_socket(config.host, config.port)
    service.base_url = _url(config.host, sock)
    try:
        server.run(sockets=[sock])
    except SystemExit:  # uvicorn exits when the lifespan startup fails
        _raise_start_error(service)
        raise
    finally:
        sock.close()
    _raise_start_error(service)


def _raise_start_error(service: Service) -> None:
    exc = service.start_error
    if exc is None:
        return
    if isinstance(exc, RightsizeError):
        raise exc
    raise RunFailedError(f"the server failed to start: {exc!r}"[:400]) from exc


@contextlib.contextmanager
def running_server(config: ServerConfig, start_timeout_s: float = 120.0) -> Iterator[str]:
    """Serve ``config`` in a background thread; yields the base URL (``http://127.0.0.1:PORT``).

    Use ``port=0`` for a free port: the socket is bound here and its real port goes in the URL. On exit
    the server drains (every queued request is answered) and the thread is joined.
    """
    server, service = _build(config, None)
    sock = bind_socket(config.host, config.port)
    base_url = service.base_url = _url(config.host, sock)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="rightsize-serve", daemon=True)
    thread.start()
    deadline = time.monotonic() + start_timeout_s
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            thread.join(5)
            sock.close()
            _raise_start_error(service)
            raise RunFailedError(f"the server did not start within {start_timeout_s:g} s")
        time.sleep(0.01)
    try:
        yield base_url
    finally:
        server.should_exit = True
        thread.join(config.drain_timeout_s + 10)
        sock.close()
