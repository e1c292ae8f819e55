"""Run the app under uvicorn: ``serve(config)`` blocks (the CLI), ``running_server(config)`` is for tests.

    with running_server(ServerConfig(model="simplenet", tiny=True, port=0)) as base_url:
        httpx.post(f"{base_url}/v1/predict", json={"inputs": [[0.0] * 100]})

uvicorn uses uvloop and httptools when installed. Shutdown is graceful: the server stops accepting,
flushes partial batches at once ("drain"), answers every queued request, then stops the workers.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import re
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import uvicorn

from rightsize.allocator import keep_freed_memory
from rightsize.errors import RightsizeError, RunFailedError, SpecError, print_stop
from rightsize.hosts import allowed_hosts, host_error
from rightsize.serve.app import create_app
from rightsize.serve.config import ServerConfig
from rightsize.serve.guard import HostCheck, protocol_class
from rightsize.serve.service import Service


class QuietStopServer(uvicorn.Server):
    """uvicorn.Server whose stop on SIGINT/SIGTERM ends without a traceback.

    uvicorn re-raises the signal it caught once it has shut down, still inside the event loop: the asyncio runner
    then raised KeyboardInterrupt beside starlette's lifespan task, which logged a CancelledError traceback on every
    Ctrl-C of `rightsize serve`. The signal is kept in ``stopped_by`` instead, and ``run_blocking`` raises it once
    the loop has ended (Ctrl-C: "interrupted", exit 130; SIGTERM: 143)."""

    stopped_by: list[int]

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        with super().capture_signals():
            try:
                yield
            finally:
                self.stopped_by = list(self._captured_signals)
                self._captured_signals.clear()


class _DrainingServer(QuietStopServer):
    """uvicorn.Server that starts draining the batch queues the moment shutdown begins."""

    def __init__(self, config: uvicorn.Config, service: Service) -> None:
        super().__init__(config)
        self.service = service

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        self.service.begin_drain()
        await super().shutdown(sockets=sockets)


ACCEPT_BACKLOG = 4096  # uvicorn_config's backlog: connections waiting to be accepted


def bind_socket(host: str, port: int) -> socket.socket:
    """A socket listening on (host, port) at once; port 0 picks a free one. Listening here, not at uvicorn's start:
    both servers announce ready from their lifespan startup, which runs before uvicorn listens, and a client that
    connected on the ready line had been refused (ECONNREFUSED); it now waits in the backlog to be accepted."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        # the host's fault or the port's (taken, privileged): the option to change, exit 2, as the dashboard says it
        if (error := host_error(exc, host)) is not None:
            raise error from None
        raise SpecError("--port", f"cannot listen on {host}:{port} ({exc.strerror}); pick another port") from None
    sock.listen(ACCEPT_BACKLOG)
    sock.set_inheritable(True)
    return sock


def url_of(host: str, sock: socket.socket) -> str:
    """The base URL of a server listening on ``sock``."""
    port = sock.getsockname()[1]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def uvicorn_config(
    app: Any,
    host: str,
    port: int,
    log_level: str,
    *,
    read_timeout_s: float,
    max_connections: int,
    graceful_s: float,
    on_refused: Callable[[int], None] | None = None,
) -> uvicorn.Config:
    """uvicorn settings every rightsize server shares: uvloop/httptools when installed (the guarded protocol
    when it loads), the Host check, no access log, lifespan on, a deep accept backlog. ``on_refused(code)`` counts
    what no app answered: the Host check's 421s and the guard's 408s for a request whose headers never arrived."""
    fast = {
        "loop": "uvloop" if importlib.util.find_spec("uvloop") else "asyncio",
        "http": "httptools" if importlib.util.find_spec("httptools") else "h11",
    }
    guarded = protocol_class(read_timeout_s, max_connections, on_refused)
    if guarded is not None:
        fast["http"] = guarded  # type: ignore[assignment]
    config = uvicorn.Config(
        HostCheck(app, allowed_hosts(host), on_refused),
        host=host,
        port=port,
        log_level=log_level,
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=int(graceful_s + 0.999),
        backlog=ACCEPT_BACKLOG,
        **fast,  # type: ignore[arg-type]
    )
    error_log = logging.getLogger("uvicorn.error")  # configured by uvicorn.Config above
    if not any(isinstance(f, _UserErrorAtStartup) for f in error_log.filters):
        error_log.addFilter(_UserErrorAtStartup())
    return config


class _UserErrorAtStartup(logging.Filter):
    """Drops what uvicorn logs when the app's startup raised one of rightsize's user-facing errors (the traceback, then
    "Application startup failed"): the CLI prints that error as one line (``raise_start_error``). A bug's traceback
    is kept."""

    def __init__(self) -> None:
        super().__init__()
        self.dropped = False

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        if text.startswith("Traceback (most recent call last)"):
            self.dropped = text.rstrip().splitlines()[-1].startswith("rightsize.errors.")
            return not self.dropped
        if self.dropped and text.startswith("Application startup failed"):
            self.dropped = False
            return False
        return True


def raise_start_error(exc: BaseException | None, what: str = "server") -> None:
    """Re-raise what a lifespan startup recorded: a RightsizeError as is, anything else as RunFailedError."""
    if exc is None:
        return
    if isinstance(exc, RightsizeError):
        raise exc
    raise RunFailedError(f"the {what} failed to start: {exc!r}"[:400]) from exc


class _CutOff(logging.Handler):
    """Counts what uvicorn cancelled when its graceful shutdown ran out of time ("Cancel 2 running task(s), timeout
    graceful shutdown exceeded")."""

    def __init__(self) -> None:
        super().__init__()
        self.cancelled = 0

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if "timeout graceful shutdown exceeded" in text:
            m = re.search(r"Cancel (\d+)", text)
            self.cancelled += int(m.group(1)) if m else 1


def run_blocking(server: uvicorn.Server, sock: socket.socket, check: Callable[[], None]) -> None:
    """Serve on ``sock`` until SIGINT/SIGTERM; ``check()`` raises the startup's error, if any."""
    cut = _CutOff()
    logging.getLogger("uvicorn.error").addHandler(cut)
    try:
        server.run(sockets=[sock])
    except SystemExit:  # uvicorn exits when the lifespan startup fails
        check()
        raise
    finally:
        sock.close()
        logging.getLogger("uvicorn.error").removeHandler(cut)
    check()
    stopped = getattr(server, "stopped_by", [])
    if stopped:  # outside the event loop now (QuietStopServer): the default handler, or rightsize's SIGTERM one
        grace = server.config.timeout_graceful_shutdown
        # "were answered" had been said after uvicorn cut two streams off at the end of the grace period
        print_stop(f"stopped: {cut.cancelled} request(s) still running when the {grace} s grace period ran out were "
                   "cut off" if cut.cancelled else "stopped: requests in flight were answered")  # fmt: skip
        signal.raise_signal(stopped[-1])


@contextlib.contextmanager
def run_in_thread(
    server: uvicorn.Server, sock: socket.socket, check: Callable[[], None], *, start_timeout_s: float, join_s: float,
    name: str, what: str = "server",
) -> Iterator[None]:  # fmt: skip
    """Serve on ``sock`` in a daemon thread until the block exits (then stop and join for ``join_s``)."""
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name=name, daemon=True)
    thread.start()
    deadline = time.monotonic() + start_timeout_s
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            thread.join(5)
            sock.close()
            check()
            raise RunFailedError(f"the {what} did not start within {start_timeout_s:g} s")
        time.sleep(0.01)
    try:
        yield
    finally:
        server.should_exit = True
        thread.join(join_s)
        sock.close()


def _build(config: ServerConfig, on_ready: Callable[[Service], None] | None) -> tuple[_DrainingServer, Service]:
    service = Service(config, on_ready)
    app = create_app(config, service)
    cfg = uvicorn_config(app, config.host, config.port, config.log_level, read_timeout_s=config.read_timeout_s,
                         max_connections=config.max_connections, graceful_s=config.drain_timeout_s,
                         on_refused=service.metrics.on_response)  # fmt: skip
    return _DrainingServer(cfg, service), service


def serve(config: ServerConfig, on_ready: Callable[[Service], None] | None = None) -> None:
    """Serve until SIGINT/SIGTERM, then drain. Raises RightsizeError for bad config or a failed start."""
    keep_freed_memory()  # before any thread: the model's worker threads share the main heap (rightsize.allocator)
    server, service = _build(config, on_ready)
    sock = bind_socket(config.host, config.port)
    service.base_url = url_of(config.host, sock)
    run_blocking(server, sock, lambda: raise_start_error(service.start_error))


@contextlib.contextmanager
def running_server(config: ServerConfig, start_timeout_s: float = 120.0) -> Iterator[str]:
    """Serve ``config`` in a background thread; yields the base URL (``http://127.0.0.1:PORT``).

    Use ``port=0`` for a free port: the socket is bound here and its real port goes in the URL. On exit
    the server drains (every queued request is answered) and the thread is joined.
    """
    keep_freed_memory()  # before the server's threads: see rightsize.allocator
    server, service = _build(config, None)
    sock = bind_socket(config.host, config.port)
    service.base_url = url_of(config.host, sock)
    with run_in_thread(server, sock, lambda: raise_start_error(service.start_error), start_timeout_s=start_timeout_s,
                       join_s=config.drain_timeout_s + 10, name="rightsize-serve"):  # fmt: skip
        yield service.base_url
