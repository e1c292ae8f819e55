"""The generation server: one continuous-batching ``Engine`` behind FastAPI + uvicorn, tokens streamed.

    rightsize serve gpt2 --generate --size small           # the CLI
    with running_generate_server(EngineConfig(size="tiny")) as url:    # tests
        httpx.post(f"{url}/v1/generate", json={"prompt_len": 32, "max_new_tokens": 16, "stream": False})

    POST /v1/generate   {"prompt": [ids]} or {"prompt_len": n} (n random ids, seeded per request: "seed"
                        or the request's number), "max_new_tokens": m, "stream": true (default)
                        stream: text/event-stream, ``data: {"t": id}`` per token, then ``data: {"done": true,
                        "tokens": n, "queue_ms", "ttft_ms", "tpot_ms"}``; else JSON {"tokens": [...], ...}
                        400 malformed JSON | 413 prompt too long | 422 wrong field | 503 queue full (Retry-After)
    GET  /v1/info       the engine's settings; /v1/iterations?since=N: {"next": M, "iterations": [{i, t_s,
                        kind, seqs, tokens, context_tokens, ms}]}, the engine's iterations one by one
    GET  /healthz /readyz /metrics (Prometheus: TTFT, TPOT and queue histograms, tokens, requests by code,
                        preemptions, running and waiting)

With a bearer token (``serve --generate --token T``) POST /v1/generate, /v1/iterations and /metrics answer 401
without ``Authorization: Bearer T``; /v1/info, /healthz and /readyz stay open (as the prediction server's do).

How a request flows:
1. The raw ASGI handler (below FastAPI's routing, as ``serve.endpoint`` does for /v1/predict) reads and
   checks the body, then ``Engine.submit`` queues it; the engine's callbacks run on the engine thread
   and hand each token to this request's asyncio.Queue with ``loop.call_soon_threadsafe``.
2. Tokens already queued are sent together, one SSE event each.
3. A watcher on ASGI ``receive`` (which returns only at disconnect once the body is read) cancels the
   request in the engine, which frees its blocks at the next iteration.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, MutableMapping
from contextlib import asynccontextmanager
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import Response
from starlette.routing import Route

from rightsize import __version__
from rightsize.llm.engine import Engine, EngineConfig, EngineStopped, GenStats, PromptTooLong, QueueFull
from rightsize.llm.protocol import Reject, event, final_event, parse_request
from rightsize.serve.config import READ_TIMEOUT_S, check_read_timeout
from rightsize.serve.endpoint import (
    CLIENT_GONE,
    ClientGone,
    bearer_ok,
    gone_status,
    method_not_allowed,
    read_body,
    since_number,
)
from rightsize.serve.metrics import Histogram
from rightsize.serve.server import (
    QuietStopServer,
    bind_socket,
    raise_start_error,
    run_blocking,
    run_in_thread,
    url_of,
    uvicorn_config,
)
from rightsize.wire import BodyError, dumps

__all__ = ["GenerateService", "create_generate_app", "running_generate_server", "serve_generate"]

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

PATH = "/v1/generate"
MAX_BODY_BYTES = 1 << 20  # a 512-token prompt is ~4 KB of JSON
LATENCY_BUCKETS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0)  # s
_JSON = [(b"content-type", b"application/json")]
_UNAUTHORIZED = {"detail": "missing or wrong bearer token"}
_CHALLENGE = (b"www-authenticate", b"Bearer")
STOPPING = "the server is stopping (its grace period ran out) before the request finished"


class GenerateService:
    """The engine, its metrics and the server's state; metrics change on the event loop only."""

    def __init__(self, cfg: EngineConfig, on_ready: Callable[[dict[str, Any]], None] | None = None) -> None:
        self.engine = Engine(cfg)
        self.on_ready = on_ready
        self.base_url = ""
        self.start_error: BaseException | None = None
        self.ttft_s, self.tpot_s, self.queue_s = (Histogram(LATENCY_BUCKETS) for _ in range(3))
        self.responses: dict[int, int] = defaultdict(int)
        self.requests = 0  # numbers the requests: the default seed of a prompt_len request

    async def start(self) -> None:
        try:
            await asyncio.to_thread(self.engine.start)
        except BaseException as exc:
            self.start_error = exc
            raise
        if self.on_ready is not None:
            self.on_ready(self.info())

    async def stop(self) -> None:
        await asyncio.to_thread(self.engine.stop)

    def info(self) -> dict[str, Any]:
        return self.engine.info() | {"url": self.base_url}

    def on_done(self, status: int, stats: GenStats | None) -> None:
        self.responses[status] += 1
        if stats is not None:
            self.queue_s.observe(stats.queue_ms / 1e3)
            self.ttft_s.observe(stats.ttft_ms / 1e3)
            if stats.tokens > 1:
                self.tpot_s.observe(stats.tpot_ms / 1e3)

    def render_metrics(self) -> str:
        c = self.engine.counters()
        out: list[str] = []

        def family(name: str, kind: str, help_: str, lines: list[str]) -> None:
            out.extend([f"# HELP {name} {help_}", f"# TYPE {name} {kind}", *lines])

        for name, hist, help_ in (
            ("rightsize_llm_ttft_seconds", self.ttft_s, "Submit to first token, per request."),
            ("rightsize_llm_tpot_seconds", self.tpot_s, "Time per output token after the first, per request."),
            ("rightsize_llm_queue_seconds", self.queue_s, "Submit to first admission, per request."),
        ):
            family(name, "histogram", help_, hist.lines(name, ""))
        for name, kind, help_, value in (
            ("rightsize_llm_tokens_total", "counter", "Tokens generated.", c["tokens_generated"]),
            ("rightsize_llm_preemptions_total", "counter", "Sequences preempted for KV blocks.", c["preemptions"]),
            ("rightsize_llm_running", "gauge", "Sequences in the decode batch.", c["running"]),
            ("rightsize_llm_waiting", "gauge", "Requests waiting for admission.", c["waiting"]),
        ):
            family(name, kind, help_, [f"{name} {value}"])
        codes = [f'rightsize_llm_requests_total{{code="{k}"}} {v}' for k, v in sorted(self.responses.items())]
        help_ = "Generate requests by HTTP status (499: the client left; 408: the server dropped it unread in time)."
        family("rightsize_llm_requests_total", "counter", help_, codes)
        return "\n".join(out) + "\n"  # fmt: skip


# --- POST /v1/generate ---------------------------------------------------------------------------------


class GenerateEndpoint:
    """The ASGI handler of POST /v1/generate."""

    def __init__(self, svc: GenerateService, token: str | None = None) -> None:
        self.svc = svc
        self.token = token.encode() if token else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        status = CLIENT_GONE
        stats: GenStats | None = None
        try:
            status, stats = await self._serve(scope, receive, send)
        finally:
            self.svc.on_done(status, stats)

    async def _reply(self, send: Send, status: int, obj: Any, extra: list[tuple[bytes, bytes]] | None = None) -> None:
        body = dumps(obj)
        headers = [*_JSON, (b"content-length", str(len(body)).encode()), *(extra or [])]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    async def _serve(self, scope: Scope, receive: Receive, send: Send) -> tuple[int, GenStats | None]:
        svc, engine = self.svc, self.svc.engine
        if (refusal := method_not_allowed(scope)) is not None:
            status, extra, body = refusal
            await send({"type": "http.response.start", "status": status,
                        "headers": [*extra, (b"content-length", str(len(body)).encode())]})  # fmt: skip
            await send({"type": "http.response.body", "body": body})
            return status, None
        headers = dict(scope["headers"])
        if not bearer_ok(self.token, headers.get(b"authorization")):
            await self._reply(send, 401, _UNAUTHORIZED, [_CHALLENGE])
            return 401, None
        ctype = headers.get(b"content-type", b"application/json").split(b";", 1)[0].strip().lower()
        if ctype != b"application/json":  # as the prediction server: a web page's form or text/plain POST is refused
            shown = ctype[:60].decode("latin-1")
            await self._reply(send, 415, {"detail": f"content type must be application/json, got {shown!r} (curl: "
                                          "-H 'content-type: application/json')"})  # fmt: skip
            return 415, None
        try:
            body = await _body(receive, headers.get(b"content-length"))
            svc.requests += 1
            prompt, new, stream = parse_request(body, engine.info(), svc.requests)
        except Reject as exc:
            await self._reply(send, exc.status, {"detail": exc.detail})
            return exc.status, None
        except ConnectionError:
            return gone_status(scope), None
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[int | GenStats | Exception | None] = asyncio.Queue()
        put = queue.put_nowait

        def on_token(token: int, _t: float) -> None:  # engine thread -> event loop
            loop.call_soon_threadsafe(put, token)

        def on_done(result: GenStats | Exception) -> None:
            loop.call_soon_threadsafe(put, result)

        try:
            rid = engine.submit(prompt, new, on_token, on_done)
        except (QueueFull, EngineStopped) as exc:
            await self._reply(send, 503, {"detail": str(exc)}, [(b"retry-after", b"1")])
            return 503, None
        except ValueError as exc:
            status = 413 if isinstance(exc, PromptTooLong) else 422
            await self._reply(send, status, {"detail": str(exc)})
            return status, None

        async def watch() -> None:  # after the body, receive() returns only at disconnect
            while (await receive())["type"] != "http.disconnect":
                pass
            engine.cancel(rid)
            put(None)

        watcher = asyncio.ensure_future(watch())
        try:
            if stream:
                return await self._stream(send, queue)
            return await self._collect(send, queue)
        except OSError:  # the client left while we were sending
            engine.cancel(rid)
            return CLIENT_GONE, None
        except asyncio.CancelledError:  # the shutdown's grace period is over: end the reply, not mid-chunk
            engine.cancel(rid)
            with contextlib.suppress(Exception):
                if stream:  # the stream's headers went out first: close it with an error event
                    await send({"type": "http.response.body", "body": event({"error": STOPPING}), "more_body": False})
                else:
                    await self._reply(send, 503, {"detail": STOPPING})
            return 503, None
        finally:
            watcher.cancel()

    async def _stream(self, send: Send, queue: asyncio.Queue[Any]) -> tuple[int, GenStats | None]:
        headers = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        while True:
            items = [await queue.get()]
            while not queue.empty():
                items.append(queue.get_nowait())
            chunk, end = [], None
            for item in items:
                if item is None:
                    return CLIENT_GONE, None
                if isinstance(item, int):
                    chunk.append(event({"t": item}))
                else:
                    end = item
                    chunk.append(event(final_event(item) if isinstance(item, GenStats) else {"error": str(item)}))
                    break
            await send({"type": "http.response.body", "body": b"".join(chunk), "more_body": end is None})
            if isinstance(end, GenStats):
                return 200, end
            if end is not None:
                return 503 if isinstance(end, EngineStopped) else 500, None

    async def _collect(self, send: Send, queue: asyncio.Queue[Any]) -> tuple[int, GenStats | None]:
        tokens: list[int] = []
        while isinstance(item := await queue.get(), int):
            tokens.append(item)
        if item is None:
            return CLIENT_GONE, None
        if isinstance(item, GenStats):
            final = final_event(item)
            await self._reply(
                send, 200, {"tokens": tokens, **{k: final[k] for k in ("queue_ms", "ttft_ms", "tpot_ms")}}
            )
            return 200, item
        status = 503 if isinstance(item, EngineStopped) else 500
        await self._reply(send, status, {"detail": str(item)})
        return status, None


async def _body(receive: Receive, declared: bytes | None) -> bytes:
    """The body, by the prediction server's reader (``read_body``: declared and read size limits) in this server's
    terms: Reject for a refused body, ConnectionError when the client left."""
    try:
        return await read_body(receive, declared, MAX_BODY_BYTES)
    except BodyError as exc:
        raise Reject(exc.status, exc.detail) from None
    except ClientGone:
        raise ConnectionError("client left") from None


# --- the app and uvicorn -------------------------------------------------------------------------------


def create_generate_app(svc: GenerateService, token: str | None = None) -> FastAPI:
    """The FastAPI app: the engine starts with the app (lifespan) and stops with it. ``token``: the bearer token
    POST /v1/generate, /v1/iterations and /metrics require (None: none)."""

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        await svc.start()
        try:
            yield
        finally:
            await svc.stop()

    cfg = svc.engine.cfg
    app = FastAPI(title="rightsize serve --generate", version=__version__, lifespan=lifespan,
                  description=f"Continuous-batching generation server for {cfg.model!r} ({cfg.size}).")  # fmt: skip
    endpoint = GenerateEndpoint(svc, token)
    # every method reaches the endpoint: its 405 is counted with its other answers (the router's was not)
    app.router.routes.append(Route(PATH, endpoint, include_in_schema=False))

    def json_reply(obj: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
        return Response(dumps(obj), status, headers, media_type="application/json")

    def refused(request: Request) -> Response | None:
        if bearer_ok(endpoint.token, request.headers.get("authorization", "").encode("latin-1")):
            return None
        return json_reply(_UNAUTHORIZED, 401, {"www-authenticate": "Bearer"})

    @app.get("/v1/info", summary="Engine settings")
    async def info() -> Response:
        return json_reply(svc.info())

    @app.get("/v1/iterations", summary="The engine's iterations one by one, from number `since`")
    async def iterations(request: Request, since: str = "0") -> Response:
        if (denied := refused(request)) is not None:
            return denied
        if isinstance(start := since_number(since), str):
            return json_reply({"detail": start}, 422)
        nxt, records = svc.engine.iterations(start)
        return json_reply({"next": nxt, "iterations": [r.to_json() for r in records]})

    @app.get("/healthz", summary="Liveness")
    @app.head("/healthz", include_in_schema=False)  # a load balancer's check (405 before)
    async def healthz() -> Response:
        return json_reply({"status": "ok"})

    @app.get("/readyz", summary="Readiness: the engine is warmed up")
    @app.head("/readyz", include_in_schema=False)
    async def readyz() -> Response:
        ok = svc.engine.ready
        return json_reply({"ready": ok}, 200 if ok else 503)

    @app.get("/metrics", summary="Prometheus metrics")
    async def metrics(request: Request) -> Response:
        return refused(request) or Response(svc.render_metrics(), media_type="text/plain; version=0.0.4")

    return app


def _build(cfg: EngineConfig, host: str, port: int, on_ready: Callable[[dict[str, Any]], None] | None,
           log_level: str, token: str | None, read_timeout_s: float
           ) -> tuple[uvicorn.Server, GenerateService]:  # fmt: skip
    """``read_timeout_s``: the prediction server's knob (``ServerConfig.read_timeout_s``, ``--read-timeout-s``), not
    a second constant: a long prompt from a slow client, or a busy 2-core host, could not be given more time."""
    check_read_timeout(read_timeout_s)
    svc = GenerateService(cfg, on_ready)
    config = uvicorn_config(create_generate_app(svc, token), host, port, log_level, read_timeout_s=read_timeout_s,
                            max_connections=1024, graceful_s=5,
                            on_refused=lambda code: svc.on_done(code, None))  # fmt: skip
    return QuietStopServer(config), svc


def _check(svc: GenerateService) -> Callable[[], None]:
    return lambda: raise_start_error(svc.start_error, "generation server")


def serve_generate(
    cfg: EngineConfig,
    host: str = "127.0.0.1",
    port: int = 8000,
    on_ready: Callable[[dict[str, Any]], None] | None = None,
    log_level: str = "warning",
    token: str | None = None,
    read_timeout_s: float = READ_TIMEOUT_S,
) -> None:
    """Serve until SIGINT/SIGTERM; ``on_ready(info)`` once the engine is warm. RightsizeError on a failed start.
    ``token``: the bearer token requests need (module docstring); ``read_timeout_s``: a request's headers and body
    must arrive within it (408 after), as the prediction server's."""
    server, svc = _build(cfg, host, port, on_ready, log_level, token, read_timeout_s)
    sock = bind_socket(host, port)
    svc.base_url = url_of(host, sock)
    run_blocking(server, sock, _check(svc))


@contextlib.contextmanager
def running_generate_server(
    cfg: EngineConfig,
    host: str = "127.0.0.1",
    start_timeout_s: float = 120.0,
    token: str | None = None,
    read_timeout_s: float = READ_TIMEOUT_S,
) -> Iterator[str]:
    """Serve ``cfg`` in a background thread on a free port; yields the base URL; stops on exit."""
    server, svc = _build(cfg, host, 0, None, "warning", token, read_timeout_s)
    sock = bind_socket(host, 0)
    svc.base_url = url_of(host, sock)
    with run_in_thread(server, sock, _check(svc), start_timeout_s=start_timeout_s, join_s=30,
                       name="rightsize-generate", what="generation server"):  # fmt: skip
        yield svc.base_url
