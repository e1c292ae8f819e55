"""Connection-level defences uvicorn does not have: slow clients, too many connections, foreign Host.

    protocol_class(read_timeout_s=10, max_connections=2048, on_timeout=count)   # uvicorn.Config(http=...)
    HostCheck(app, allowed_hosts("127.0.0.1"))                # outermost ASGI middleware (rightsize.hosts)

- **Read timeout.** uvicorn times out idle keep-alive connections but not a request whose headers or
  body trickle in (slowloris): each such connection holds a file descriptor forever. The guarded
  protocol answers 408 and closes a connection whose request has not been read completely
  ``read_timeout_s`` after it began (or closes it, when nothing has arrived since it opened). A request
  the app was reading is flagged in its scope (``read_timed_out``) so the app counts a 408, not a
  client that left; one whose headers never arrived is counted by ``on_timeout(408)``.
- **Connection cap.** Past ``max_connections`` open connections, a new one evicts the connection that
  has spent longest reading an unfinished request (a slow client, by definition), so a flood of idle
  sockets cannot exhaust descriptors and starve real clients; if every connection has a request in
  the app, the new one is closed at once (a fast reset, not a hang).
- **Host check.** A server bound to loopback answers only requests whose ``Host`` names loopback:
  a web page cannot reach it through DNS rebinding (``evil.example`` resolving to 127.0.0.1).

The timeout and cap need uvicorn's httptools protocol (installed with ``uvicorn[standard]``); with
plain h11 they are off and ``protocol_class`` returns None.
"""

from __future__ import annotations

import asyncio
import importlib.util
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from rightsize.hosts import host_name

__all__ = ["TIMED_OUT", "HostCheck", "protocol_class", "read_timed_out"]

Scope = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]], Awaitable[None]]
TIMED_OUT = "rightsize.read_timed_out"  # scope key: the guard dropped this request unread (408), the client did not go


def read_timed_out(scope: Scope) -> bool:
    """Whether the guard dropped this request for its read timeout (the app then sees a disconnect)."""
    return bool(scope.get(TIMED_OUT))


def protocol_class(
    read_timeout_s: float, max_connections: int, on_timeout: Callable[[int], None] | None = None
) -> type[asyncio.Protocol] | None:
    """uvicorn's httptools protocol with a request read timeout and a connection cap (None without httptools).
    ``on_timeout(408)`` counts a request dropped before its headers were read (no app saw it)."""
    if importlib.util.find_spec("httptools") is None:
        return None
    from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

    detail = f"request not read within {read_timeout_s:g} s (read_timeout_s): send its headers and body at once"
    body = b'{"detail":"' + detail.encode() + b'"}'

    class GuardedProtocol(HttpToolsProtocol):
        _read_timer: asyncio.TimerHandle | None = None
        _reading_since: float | None = None  # loop time a still-unfinished request began arriving
        _began = False  # a request's first bytes arrived (and it is unfinished)
        _in_app = False  # its headers are read: the app has it

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm()
            if len(self.connections) > max_connections:
                self._evict()

        def _evict(self) -> None:
            """Close the connection that has been reading an unfinished request the longest (or this one)."""
            others: list[Any] = [c for c in self.connections if c is not self]
            reading = [c for c in others if getattr(c, "_reading_since", None) is not None]
            victim: Any = min(reading, key=lambda c: c._reading_since) if reading else self
            victim._disarm()
            victim.transport.close()

        def _arm(self) -> None:
            if self._read_timer is None:
                self._reading_since = self.loop.time()
                self._read_timer = self.loop.call_later(read_timeout_s, self._read_timed_out)

        def _disarm(self) -> None:
            self._reading_since = None
            if self._read_timer is not None:
                self._read_timer.cancel()
                self._read_timer = None

        def _read_timed_out(self) -> None:
            self._read_timer = None
            self._reading_since = None
            if self.transport.is_closing():
                return
            cycle = self.cycle if self._in_app else None
            if self._began and (cycle is None or not cycle.response_started):
                if cycle is not None:  # the app reads its body: it sees a disconnect and counts 408 by the flag
                    cycle.scope[TIMED_OUT] = True  # type: ignore[literal-required]
                    cycle.disconnected = True  # nothing more of the app's reaches the socket
                elif on_timeout is not None:
                    on_timeout(408)
                self._send_408()
            self.transport.close()

        def _send_408(self) -> None:
            head = [STATUS_LINE[408]]
            for name, value in self.server_state.default_headers:
                head.extend([name, b": ", value, b"\r\n"])
            head.append(b"content-type: application/json\r\ncontent-length: %d\r\n" % len(body))
            self.transport.write(b"".join(head) + b"connection: close\r\n\r\n" + body)

        def on_message_begin(self) -> None:
            self._arm()  # a new request on a kept-alive connection: its headers and body must arrive in time
            self._began, self._in_app = True, False
            super().on_message_begin()

        def on_headers_complete(self) -> None:
            self._in_app = True
            super().on_headers_complete()

        def on_message_complete(self) -> None:
            self._disarm()
            super().on_message_complete()

        def on_response_complete(self) -> None:
            self._disarm()  # idle keep-alive from here on is uvicorn's own timeout_keep_alive
            super().on_response_complete()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

    return GuardedProtocol


class HostCheck:
    """Outermost ASGI middleware: 421 for an HTTP request whose Host header is not in ``allowed``; ``on_refused``
    counts each in the server's metrics (refused DNS-rebinding attempts had been invisible in /metrics)."""

    def __init__(
        self, app: ASGIApp, allowed: frozenset[bytes] | None, on_refused: Callable[[int], None] | None = None
    ) -> None:
        self.app = app
        self.allowed = allowed
        self.on_refused = on_refused

    async def __call__(self, scope: Scope, receive: Callable[[], Awaitable[Any]], send: Any) -> None:
        if self.allowed is not None and scope["type"] == "http":
            raw = dict(scope["headers"]).get(b"host")
            # no Host at all (HTTP/1.0 health checks) is no rebinding: a browser always sends the name it resolved
            if raw is not None and host_name(raw) not in self.allowed:
                body = b'{"detail":"Host header does not name this server (it listens on loopback only)"}'
                await send({"type": "http.response.start", "status": 421,
                            "headers": [(b"content-type", b"application/json"),
                                        (b"content-length", str(len(body)).encode())]})  # fmt: skip
                await send({"type": "http.response.body", "body": body})
                if self.on_refused is not None:
                    self.on_refused(421)
                return
        await self.app(scope, receive, send)
