"""The raw HTTP/1.1 client: body framings, keep-alive reuse, the pool's limit and timeouts."""

from __future__ import annotations

import asyncio
import time

import pytest
from lg_tiny_server import TinyServer

from rightsize.loadgen._http import ConnectFailed, Pool, ServerClosed, fetch
from rightsize.loadgen.target import Target


def _raw(server: TinyServer, path: str) -> bytes:
    return Target.from_url(server.url(path), method="GET").raw


def test_framings_and_keep_alive(server: TinyServer) -> None:

    async def main() -> tuple[list[int], int, int]:
        pool = Pool("127.0.0.1", server.port, max_connections=4, timeout_s=5)
        try:
            statuses = []
            for path in ("/work/0", "/chunked", "/status/404", "/work/0"):
                status, _ = await fetch(pool, _raw(server, path), time.perf_counter())
                statuses.append(status)
            kept = pool.open  # one connection carried all four (keep-alive, sequential)
            statuses.append((await fetch(pool, _raw(server, "/eof"), time.perf_counter()))[0])
            return statuses, kept, pool.open
        finally:
            pool.close()

    statuses, kept, after_eof = asyncio.run(main())
    assert statuses == [200, 200, 404, 200, 200]
    assert kept == 1
    assert after_eof == 0  # a read-until-close body leaves nothing to reuse


def test_pool_limit_queues_and_timeout_fires(server: TinyServer) -> None:

    async def main() -> tuple[list[object], float]:
        pool = Pool("127.0.0.1", server.port, max_connections=1, timeout_s=0.45)
        raw = _raw(server, "/work/300")
        t0 = time.perf_counter()
        try:
            sends = (fetch(pool, raw, time.perf_counter()) for _ in range(2))
            out = await asyncio.gather(*sends, return_exceptions=True)
        finally:
            pool.close()
        return list(out), time.perf_counter() - t0

    out, elapsed = asyncio.run(main())
    # One connection: the first answers after ~300 ms; the second waits for it, then cannot finish
    # its own 300 ms within the 450 ms timeout counted from its start.
    assert isinstance(out[0], tuple) and out[0][0] == 200
    assert isinstance(out[1], TimeoutError)
    assert 0.4 < elapsed < 0.8


def test_connection_errors(server: TinyServer, closed_port: int) -> None:
    async def main() -> list[BaseException | tuple[int, float]]:
        refused = Pool("127.0.0.1", closed_port, 2, timeout_s=2)
        dropped = Pool("127.0.0.1", server.port, 2, timeout_s=2)
        try:
            out = await asyncio.gather(
                fetch(refused, b"GET / HTTP/1.1\r\n\r\n", time.perf_counter()),
                fetch(dropped, _raw(server, "/drop"), time.perf_counter()),
                return_exceptions=True,
            )
            return list(out)
        finally:
            refused.close()
            dropped.close()

    refused, dropped = asyncio.run(main())
    assert isinstance(refused, ConnectFailed)
    assert isinstance(dropped, ServerClosed)


@pytest.mark.parametrize("n", [1, 40])
def test_every_request_gets_its_answer_under_concurrency(server: TinyServer, n: int) -> None:

    async def main() -> list[tuple[int, float]]:
        pool = Pool("127.0.0.1", server.port, max_connections=8, timeout_s=5)
        try:
            return await asyncio.gather(*(fetch(pool, _raw(server, "/work/5"), time.perf_counter()) for _ in range(n)))
        finally:
            pool.close()

    out = asyncio.run(main())
    assert [s for s, _ in out] == [200] * n
    assert server.requests == n


class _FakeTransport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.written = b""
        self.closed = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written += bytes(data)

    def is_closing(self) -> bool:
        return self.closed

    def abort(self) -> None:
        self.closed = True


RESPONSES = [
    (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", 200, True),
    (b"HTTP/1.1 503 Busy\r\ncontent-length:2\r\nRetry-After: 1\r\n\r\n{}", 503, True),
    (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"3;ext=1\r\nabc\r\n10\r\n0123456789abcdef\r\n0\r\nX-T: 1\r\n\r\n",
        200,
        True,
    ),
    (b"HTTP/1.1 204 No Content\r\n\r\n", 204, True),
    (b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\nx", 200, False),
    (b"HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n", 200, True),  # no reason phrase
]


@pytest.mark.parametrize(("wire", "status", "reusable"), RESPONSES)
@pytest.mark.parametrize("piece", [1, 7, 1000])
def test_parser_handles_any_split(wire: bytes, status: int, reusable: bool, piece: int) -> None:
    from rightsize.loadgen._http import _Conn

    async def main() -> tuple[int, bool, bytes]:
        conn = _Conn()
        conn.connection_made(_FakeTransport())
        task = asyncio.ensure_future(conn.request(b"GET / HTTP/1.1\r\n\r\n", False, 1e18))
        await asyncio.sleep(0)
        for i in range(0, len(wire), piece):
            assert not task.done()
            conn.data_received(wire[i : i + piece])
        return await task, conn.reusable, bytes(conn._buf)

    got, reuse, left = asyncio.run(main())
    assert (got, reuse, left) == (status, reusable, b"")


def test_parser_rejects_garbage_and_reads_until_close() -> None:
    from rightsize.loadgen._http import ProtocolError, _Conn

    async def main() -> tuple[BaseException | int, int]:
        bad = _Conn()
        bad.connection_made(_FakeTransport())
        t1 = asyncio.ensure_future(bad.request(b"x", False, 1e18))
        await asyncio.sleep(0)
        bad.data_received(b"SSH-2.0-OpenSSH\r\n\r\n")
        eof = _Conn()
        eof.connection_made(_FakeTransport())
        t2 = asyncio.ensure_future(eof.request(b"x", False, 1e18))
        await asyncio.sleep(0)
        eof.data_received(b"HTTP/1.0 200 OK\r\n\r\nbody without length")
        assert not t2.done()
        eof.eof_received()
        r1 = await asyncio.gather(t1, return_exceptions=True)
        return r1[0], await t2

    err, status = asyncio.run(main())
    assert isinstance(err, ProtocolError) and status == 200


@pytest.mark.parametrize(
    ("wire", "why"),
    [
        (b"HTTP/1.1 200 OK\r\nContent-Length: -5\r\n\r\nabc", "bad Content-Length"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: abc\r\n\r\nabc", "bad Content-Length"),
        (b"HTTP/1.1 999 Odd\r\nContent-Length: 0\r\n\r\n", "bad status code 999"),
    ],
)
def test_a_response_with_a_bad_length_or_status_is_a_protocol_error(wire: bytes, why: str) -> None:
    """A negative Content-Length was read to the close and counted a success (the load test 'valid'); a 999 was
    counted as a 5xx."""
    from rightsize.loadgen._http import ProtocolError, _Conn

    async def main() -> BaseException | int:
        conn = _Conn()
        conn.connection_made(_FakeTransport())
        task = asyncio.ensure_future(conn.request(b"x", False, 1e18))
        await asyncio.sleep(0)
        conn.data_received(wire)
        conn.eof_received()
        return (await asyncio.gather(task, return_exceptions=True))[0]

    got = asyncio.run(main())
    assert isinstance(got, ProtocolError) and str(got) == why
