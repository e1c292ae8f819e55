"""POST /v1/predict as a plain ASGI callable: the hot path, kept below FastAPI's routing.

FastAPI's request handling (routing, dependency solving, Request/Response objects) costs about three
times what uvicorn itself spends on a request (~0.19 vs ~0.05 ms CPU per request on a 2-vCPU VM), so
the app's outermost middleware hands POST /v1/predict straight to ``PredictEndpoint``. The FastAPI
route of the same path documents it in the OpenAPI schema and calls the same code.

While a request waits in the queue, a watcher on ASGI ``receive`` (which, once the body is read,
returns only when the client disconnects) cancels the request so it is dropped before the model runs.
"""

from __future__ import annotations

import asyncio
import hmac
import re
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from rightsize.serve.batcher import QueueFull, ServeError
from rightsize.serve.guard import read_timed_out
from rightsize.serve.service import Service
from rightsize.wire import (
    BINARY_TYPE,
    BodyError,
    dumps,
    encode_tensor,
    largest_body_bytes,
    parse_binary_request,
    parse_json_request,
)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
Headers = list[tuple[bytes, bytes]]
Reply = tuple[int, Headers, bytes]  # status, headers, body; 499 and 408 (gone_status): send nothing

JSON_TYPE = "application/json"
PATH = "/v1/predict"
PARSE_OFF_LOOP_BYTES = 256 * 1024  # bodies above this are parsed in a thread
CLIENT_GONE = 499  # nginx's "client closed request": never sent, only counted
READ_TIMEOUT = 408  # the connection guard dropped a request not read in time: it sent the 408 itself
_JSON = [(b"content-type", JSON_TYPE.encode())]
_BINARY = [(b"content-type", BINARY_TYPE.encode())]


class ClientGone(Exception):
    """The client disconnected before its request was answered."""


def error_reply(status: int, detail: str, extra: Headers | None = None) -> Reply:
    return status, _JSON + (extra or []), dumps({"detail": detail})


def method_not_allowed(scope: Scope) -> Reply | None:
    """The 405 for a method other than POST on a POST-only path (None for POST), answered by the path's own
    handler so its counter sees it: the framework's router had answered it before anything counted. Both servers
    (/v1/predict and /v1/generate) answer with it."""
    method = scope["method"]
    if method == "POST":
        return None
    return error_reply(405, f"{method[:20]} is not allowed on {scope['path']}; use POST", [(b"allow", b"POST")])


async def read_body(receive: Receive, declared: bytes | None, limit: int, why: str = "") -> bytes:
    """A request's body, whole: BodyError 400/413 past ``limit`` bytes (``why``: where the limit comes from and the
    fix, appended to the refusal); ClientGone when the client leaves (or the connection guard, serve/guard.py, closes
    a request unread ``read_timeout_s`` after it began). Both servers (/v1/predict and /v1/generate) read bodies
    with it."""
    if declared is not None and (not declared.isdigit() or int(declared) > limit):
        raise BodyError(413 if declared.isdigit() else 400, f"body must be at most {limit} bytes{why}")
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientGone
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise BodyError(413, f"body must be at most {limit} bytes{why}")
        chunks.append(chunk)
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def since_number(raw: str) -> int | str:
    """A log endpoint's ``?since=`` (/v1/batches, /v1/iterations) as a count, or the 422 detail naming the fix:
    a query string the framework checked as ``int`` answered pydantic's error list for ``since=abc``."""
    if re.fullmatch(r"\d{1,30}", raw.strip()):
        return int(raw)
    got = raw if len(raw) <= 40 else raw[:40] + "..."
    return f"since: must be a whole number >= 0 (the 'next' of a previous reply), got {got!r}"


def bearer_ok(expected: bytes | None, authorization: bytes | None) -> bool:
    """Whether an ``Authorization`` header value carries the bearer token ``expected`` (None: no token needed),
    compared in constant time. Both servers (/v1/predict and /v1/generate) check requests with it."""
    if expected is None:
        return True
    got = (authorization or b"").strip()
    return got[:7].lower() == b"bearer " and hmac.compare_digest(got[7:].strip(), expected)


def gone_status(scope: Scope) -> int:
    """The status to count for a request whose connection closed unanswered: 408 when the guard dropped it for its
    read timeout (serve/guard.py), 499 when the client left. Both servers count with it."""
    return READ_TIMEOUT if read_timed_out(scope) else CLIENT_GONE


async def _client_gone(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


class PredictEndpoint:
    """The ASGI handler of POST /v1/predict for one Service."""

    def __init__(self, service: Service, token: str | None, max_body_bytes: int) -> None:
        self.svc = service
        self.token = token.encode() if token else None
        spec = service.spec
        self.limit = min(max_body_bytes, largest_body_bytes(spec))  # no valid request is larger
        self.too_large = (
            f" (the largest valid request: --max-batch {spec.max_samples} samples of shape {list(spec.sample_shape)} "
            f"as JSON); split it into requests of at most {spec.max_samples} samples, raise --max-batch, or send the "
            f"binary format ({BINARY_TYPE})"
            if self.limit < max_body_bytes
            else " (ServerConfig.max_body_bytes); raise it or send the binary format"
        )

    def authorized(self, authorization: bytes | None) -> bool:
        return bearer_ok(self.token, authorization)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        t0 = time.perf_counter()
        try:
            status, headers, body = await self.reply(scope, receive)
        except ClientGone:
            status, headers, body = gone_status(scope), [], b""
        if status not in (CLIENT_GONE, READ_TIMEOUT):
            headers.append((b"content-length", str(len(body)).encode()))
            await send({"type": "http.response.start", "status": status, "headers": headers})
            await send({"type": "http.response.body", "body": body})
        self.svc.metrics.on_response(status, time.perf_counter() - t0)

    async def reply(self, scope: Scope, receive: Receive) -> Reply:
        """Parse, admit, wait, answer: every path returns one reply (ClientGone: nobody to answer)."""
        if (refusal := method_not_allowed(scope)) is not None:
            return refusal
        hdrs = dict(scope["headers"])
        if not self.authorized(hdrs.get(b"authorization")):
            return error_reply(401, "missing or wrong bearer token", [(b"www-authenticate", b"Bearer")])
        ctype = hdrs.get(b"content-type", b"application/json").split(b";", 1)[0].strip().lower().decode("latin-1")
        try:
            if ctype not in (JSON_TYPE, BINARY_TYPE):
                raise BodyError(415, f"content type must be {JSON_TYPE} or {BINARY_TYPE}, got {ctype[:60]!r}")
            body = await read_body(receive, hdrs.get(b"content-length"), self.limit, self.too_large)
            parse = parse_json_request if ctype == JSON_TYPE else parse_binary_request
            priority, deadline = hdrs.get(b"x-priority"), hdrs.get(b"x-deadline-ms")
            args = (
                body,
                self.svc.spec,
                priority.decode("latin-1") if priority is not None else None,
                deadline.decode("latin-1") if deadline is not None else None,
            )
            # A large body takes milliseconds to seconds to parse: off the event loop (a JSON parse holds the GIL
            # all the same, which is why no body is read past ``largest_body_bytes``).
            parsed = await asyncio.to_thread(parse, *args) if len(body) > PARSE_OFF_LOOP_BYTES else parse(*args)
            batcher, pending = self.svc.submit(parsed)
        except BodyError as exc:
            return error_reply(exc.status, exc.detail)
        except QueueFull as exc:
            return error_reply(503, str(exc), [(b"retry-after", str(exc.retry_after_s).encode())])
        except ServeError as exc:
            return error_reply(exc.status, str(exc), [(b"retry-after", b"1")] if exc.status == 503 else None)
        watcher = asyncio.ensure_future(_client_gone(receive))
        watcher.add_done_callback(lambda w: None if w.cancelled() else batcher.cancel(pending))
        try:
            result = await pending.future
        except ServeError as exc:
            return error_reply(exc.status, str(exc))
        except asyncio.CancelledError:
            if watcher.done() and not watcher.cancelled():
                raise ClientGone from None  # the watcher cancelled the request: not our task being cancelled
            batcher.cancel(pending)
            raise
        finally:
            watcher.cancel()
        headers = [
            (b"x-pool", result.pool.encode()),
            (b"x-batch-size", str(result.batch_size).encode()),
            (b"server-timing", f"queue;dur={result.queue_ms:.3f}, compute;dur={result.compute_ms:.3f}".encode()),
        ]
        if BINARY_TYPE.encode() in hdrs.get(b"accept", b""):
            return 200, _BINARY + headers, encode_tensor(result.outputs)
        return 200, _JSON + headers, dumps({"outputs": result.outputs})


class FastPath:
    """Outermost ASGI middleware: /v1/predict goes straight to the endpoint (which answers any method but POST 405,
    counted as every answer of the path), the rest to FastAPI."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]], endpoint: PredictEndpoint) -> None:
        self.app = app
        self.endpoint = endpoint

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] == PATH:
            await self.endpoint(scope, receive, send)
        else:
            await self.app(scope, receive, send)
