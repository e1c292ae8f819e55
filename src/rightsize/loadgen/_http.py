"""A minimal HTTP/1.1 keep-alive client on asyncio protocols (no pipelining), built for send rate.

One ``_Conn`` carries one request at a time: write the pre-encoded request, parse the status line
and headers, then skip a Content-Length, chunked or read-until-close body, and call the request's
``done`` callback. A ``Pool`` keeps the connections to one host, opened on demand up to
``max_connections``, and a watchdog that fails requests past their timeout.

Costs per request matter here (a 2-core machine shares them with the server under test): the load
loops drive connections through callbacks, with no task, future or timer per request (~15 µs of
CPU per closed-loop request under uvloop against ~19 µs through the awaitable ``fetch``, which
tests and simple callers use), and the watchdog checks deadlines every few tens of ms instead of
arming a timer per request.
"""

from __future__ import annotations

import asyncio
import collections
import re
import time
from collections.abc import Callable
from typing import cast

__all__ = ["ConnectFailed", "Pool", "ProtocolError", "ServerClosed", "exception_kind", "fetch"]

_CONTENT_LENGTH = re.compile(rb"\r\ncontent-length:[ \t]*(\d+)[ \t]*\r\n")
_ANY_CONTENT_LENGTH = re.compile(rb"\r\ncontent-length:")
_CHUNKED = re.compile(rb"\r\ntransfer-encoding:[^\r]*chunked")
_CLOSE = re.compile(rb"\r\nconnection:[^\r]*close")


class ConnectFailed(ConnectionError):
    """The TCP connect failed (refused, unreachable)."""


class ServerClosed(ConnectionError):
    """The server closed or reset the connection before a complete response."""


class ProtocolError(ConnectionError):
    """The response could not be parsed as HTTP/1.1."""


Done = Callable[[int, "BaseException | None"], None]  # (status, None) or (0, exception)


class _Conn(asyncio.Protocol):
    """One keep-alive connection carrying one request at a time.

    ``send(raw, head, deadline, done)`` writes a request; ``done(status, None)`` or
    ``done(0, exc)`` is called exactly once, from the protocol callback that completes it (the
    callback may ``send`` again on this connection at once: the closed loop's next request and
    the open loop's next queued one go out without a task or a future). ``request`` is the
    awaitable form.
    """

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.alive = False
        self.reusable = True
        self.served = 0  # responses completed on this connection
        self.deadline = 0.0  # perf_counter time the pending request times out
        self._buf = bytearray()
        self._done: Done | None = None
        self._head = False  # the pending request is HEAD: no body follows the headers
        self._got_bytes = False

    # --- asyncio.Protocol callbacks -------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's transports do not subclass it
        self._loop = asyncio.get_running_loop()
        self.alive = True

    def data_received(self, data: bytes) -> None:
        self._got_bytes = True
        self._buf += data
        if self._done is not None:
            self._parse(eof=False)

    def eof_received(self) -> bool:
        self.alive = False
        if self._done is not None:
            self._parse(eof=True)
        return False  # let the transport close

    def connection_lost(self, exc: Exception | None) -> None:
        self.alive = False
        if self._done is not None:
            self._parse(eof=True)
            if self._done is not None:
                self._finish(0, ServerClosed(str(exc) if exc else "server closed the connection"))

    # --- client side ---------------------------------------------------------------------------
    @property
    def pending(self) -> bool:
        return self._done is not None

    @property
    def idle_fresh(self) -> bool:
        """True when a failure on this connection may be a stale keep-alive (safe to retry once)."""
        return self.served > 0 and not self._got_bytes

    def send(self, raw: bytes, head: bool, deadline: float, done: Done) -> None:
        """Write one request; ``done`` gets its outcome (never synchronously from here)."""
        transport = self.transport
        if transport is None or not self.alive or transport.is_closing():
            self._loop.call_soon(done, 0, ServerClosed("connection already closed"))
            return
        self._done = done
        self._head = head
        self._got_bytes = False
        self.deadline = deadline
        transport.write(raw)

    async def request(self, raw: bytes, head: bool, deadline: float) -> int:
        fut: asyncio.Future[int] = self._loop.create_future()

        def done(status: int, exc: BaseException | None) -> None:
            if not fut.done():
                if exc is None:
                    fut.set_result(status)
                else:
                    fut.set_exception(exc)

        self.send(raw, head, deadline, done)
        return await fut

    def expire(self) -> None:
        """The pending request ran past its deadline: fail it with TimeoutError and drop the connection."""
        self.close()
        if self._done is not None:
            self._finish(0, TimeoutError("no response before the timeout"))

    def close(self) -> None:
        self.alive = False
        self.reusable = False
        if self.transport is not None:
            self.transport.abort()

    def _finish(self, status: int, exc: BaseException | None) -> None:
        done, self._done = self._done, None
        assert done is not None
        if exc is None:
            self.served += 1
        else:
            self.reusable = False
        done(status, exc)

    def _parse(self, eof: bool) -> None:
        """Finish the pending request when ``_buf`` holds a whole response (consumed before ``done`` runs)."""
        buf = self._buf
        end = buf.find(b"\r\n\r\n")
        if end < 0:
            if eof:
                self._finish(0, ServerClosed("connection closed mid-headers"))
            return
        head = bytes(buf[: end + 2]).lower()  # + "\r\n" so every header line ends the same way
        if not head.startswith(b"http/1.") or head[12:13] not in (b" ", b"\r") or not head[9:12].isdigit():
            self._finish(0, ProtocolError(f"bad status line {head[:40]!r}"))
            return
        status = int(head[9:12])
        if not 100 <= status <= 599:  # RFC 9110 15: three digits, 1xx-5xx (a 999 had been counted as a 5xx)
            self._finish(0, ProtocolError(f"bad status code {status}"))
            return
        if _CLOSE.search(head) or head.startswith(b"http/1.0"):
            self.reusable = False
        start = end + 4
        stop: int | None
        if self._head or status in (204, 304) or 100 <= status < 200:
            stop = start
        elif _CHUNKED.search(head):
            try:
                stop = _chunked_end(buf, start)
            except ValueError:
                self._finish(0, ProtocolError("bad chunk size in a chunked body"))
                return
        elif (m := _CONTENT_LENGTH.search(head)) is not None:
            stop = start + int(m.group(1))
            if len(buf) < stop:
                stop = None
        elif _ANY_CONTENT_LENGTH.search(head):  # "-5", "abc": not a length (it had read to the close, counted ok)
            self._finish(0, ProtocolError("bad Content-Length"))
            return
        else:  # body runs until the server closes
            self.reusable = False
            stop = len(buf) if eof else None
        if stop is None:
            if eof:
                self._finish(0, ServerClosed("connection closed mid-body"))
            return
        del buf[:stop]
        self._finish(status, None)


def _chunked_end(buf: bytearray, pos: int) -> int | None:
    """Index just past a complete chunked body starting at ``pos``, or None if incomplete."""
    while True:
        eol = buf.find(b"\r\n", pos)
        if eol < 0:
            return None
        size = int(bytes(buf[pos:eol]).split(b";")[0].strip() or b"0", 16)
        if size == 0:
            trailer_end = buf.find(b"\r\n\r\n", eol)
            return None if trailer_end < 0 else trailer_end + 4
        pos = eol + 2 + size + 2
        if len(buf) < pos:
            return None


class Pool:
    """Keep-alive connections to one host, opened on demand up to ``max_connections``.

    ``timeout_s`` bounds each request from its start (waiting for a connection included); a
    watchdog task enforces it every ``tick`` seconds, so a timeout fires up to one tick late.
    """

    def __init__(self, host: str, port: int, max_connections: int, timeout_s: float = 10.0) -> None:
        self.host, self.port, self.max_connections = host, port, max_connections
        self.timeout_s = timeout_s
        self.tick_s = min(0.05, timeout_s / 10)
        self.open = 0  # connections open or being opened
        self.peak_open = 0
        self._idle: list[_Conn] = []
        self._busy: set[_Conn] = set()
        self._waiters: collections.deque[tuple[asyncio.Future[_Conn | None], float]] = collections.deque()
        self._watchdog: asyncio.Task[None] | None = None
        self.on_tick: Callable[[float], None] | None = None  # called by the watchdog with perf_counter()

    def start(self) -> None:
        """Start the timeout watchdog (the first ``acquire`` does it too)."""
        if self._watchdog is None:
            self._watchdog = asyncio.get_running_loop().create_task(self._watch())

    async def connect(self) -> _Conn:
        """Open one connection (the caller accounts for it in ``open``); raises ConnectFailed."""
        loop = asyncio.get_running_loop()
        try:
            _, conn = await asyncio.wait_for(loop.create_connection(_Conn, self.host, self.port), self.timeout_s)
        except OSError as exc:
            raise ConnectFailed(f"{self.host}:{self.port}: {exc.strerror or exc}") from exc
        except asyncio.TimeoutError:
            raise ConnectFailed(f"{self.host}:{self.port}: connect timed out") from None
        return conn

    def reserve(self) -> bool:
        """Count one more connection about to be opened, if under the limit."""
        if self.open >= self.max_connections:
            return False
        self.open += 1
        self.peak_open = max(self.peak_open, self.open)
        return True

    def adopt(self, conn: _Conn) -> None:
        """Track a connection opened via ``reserve`` + ``connect`` as busy (watched for timeouts)."""
        self._busy.add(conn)

    async def prefill(self, n: int) -> None:
        """Open up to ``n`` connections before the clock starts (connect cost stays out of latency)."""
        n = min(n, self.max_connections) - self.open
        if n <= 0:
            return
        self.open += n
        results = await asyncio.gather(*(self.connect() for _ in range(n)), return_exceptions=True)
        for r in results:
            if isinstance(r, _Conn):
                self._idle.append(r)
            else:
                self.open -= 1
        self.peak_open = max(self.peak_open, self.open)

    def take_idle(self) -> _Conn | None:
        """An idle live connection without waiting (the hot path), or None."""
        idle = self._idle
        while idle:
            conn = idle.pop()  # LIFO: the warmest connection
            if conn.alive:
                self._busy.add(conn)
                return conn
            self.open -= 1
        return None

    async def acquire(self, deadline: float) -> _Conn:
        self.start()
        conn = await self._acquire(deadline)
        self._busy.add(conn)
        return conn

    async def _acquire(self, deadline: float) -> _Conn:
        while True:
            while self._idle:
                conn = self._idle.pop()  # LIFO: the warmest connection
                if conn.alive:
                    return conn
                self.open -= 1
            if self.open < self.max_connections:
                self.open += 1
                self.peak_open = max(self.peak_open, self.open)
                try:
                    return await self.connect()
                except BaseException:
                    self.open -= 1
                    self._wake(None)
                    raise
            fut: asyncio.Future[_Conn | None] = asyncio.get_running_loop().create_future()
            self._waiters.append((fut, deadline))
            try:
                got = await fut
            except asyncio.CancelledError:
                # No race: a future resolved just before the cancel hands its connection (or its
                # wake-up) on, so no connection leaks and no other waiter misses its turn.
                if fut.done() and not fut.cancelled() and fut.exception() is None:
                    got = fut.result()
                    if got is not None:
                        self.release(got)
                    else:
                        self._wake(None)
                raise
            if got is not None:
                return got

    def release(self, conn: _Conn, ok: bool = True) -> None:
        """Return ``conn``; a broken or non-reusable one is closed and its slot freed."""
        self._busy.discard(conn)
        if ok and conn.alive and conn.reusable:
            if not self._wake(conn):
                self._idle.append(conn)
            return
        conn.close()
        self.open -= 1
        self._wake(None)

    def _wake(self, conn: _Conn | None) -> bool:
        while self._waiters:
            fut, _ = self._waiters.popleft()
            if not fut.done():
                fut.set_result(conn)
                return True
        return False

    async def _watch(self) -> None:
        """Fail requests and connection waits that passed their deadline."""
        while True:
            await asyncio.sleep(self.tick_s)
            now = time.perf_counter()
            for conn in [c for c in self._busy if c.pending and c.deadline < now]:
                conn.expire()
            for fut, deadline in self._waiters:
                if deadline < now and not fut.done():
                    fut.set_exception(TimeoutError("no free connection before the timeout"))
            if self.on_tick is not None:
                self.on_tick(now)

    def close(self) -> None:
        if self._watchdog is not None:
            self._watchdog.cancel()
        for conn in [*self._idle, *self._busy]:
            conn.close()
        self._idle.clear()
        self._busy.clear()
        for fut, _ in self._waiters:
            if not fut.done():
                fut.cancel()
        self._waiters.clear()


async def fetch(pool: Pool, raw: bytes, started: float, head: bool = False) -> tuple[int, float]:
    """Send ``raw`` on a pooled connection -> (status, perf_counter time a connection was acquired).

    Times out ``pool.timeout_s`` after ``started`` (raises TimeoutError). Retries once on a fresh
    connection when a reused keep-alive turned out stale (closed by the server while idle, no byte
    of a response received).
    """
    deadline = started + pool.timeout_s
    for attempt in (0, 1):
        conn = pool.take_idle() if pool._watchdog is not None else None
        if conn is None:
            conn = await pool.acquire(deadline)
        acquired = time.perf_counter()
        try:
            status = await conn.request(raw, head, deadline)
        except BaseException as exc:
            stale = isinstance(exc, ConnectionError) and conn.idle_fresh
            pool.release(conn, ok=False)
            if attempt == 0 and stale:
                continue
            raise
        pool.release(conn)
        return status, acquired
    raise AssertionError("unreachable")


def exception_kind(exc: BaseException) -> str:
    """The ``ERROR_KINDS`` bucket of a failed request: ``timeout`` or ``connection``."""
    if isinstance(exc, asyncio.TimeoutError | TimeoutError):
        return "timeout"
    return "connection"
