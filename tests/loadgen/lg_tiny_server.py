"""A tiny controllable HTTP/1.1 server for the load generator's tests, in its own process.

Its own process keeps the generator's timing free of GIL hand-offs with the server (a thread in
the test process would add up to the 5 ms switch interval to every response). Paths:

    /work/<ms>            200 after <ms> milliseconds (any number in flight)
    /serial/<ms>          200 after <ms> milliseconds, one request at a time (a single worker)
    /status/<NNN>         NNN at once
    /v1/info, /v1/predict 404 (it describes nothing), 200
    /drop                 close the connection without answering
    /chunked, /eof        a chunked body; a body that ends when the connection closes
    /control/stall/<in_ms>/<ms>   hold every /work and /serial request arriving in that window until it ends
    /control/count        {"requests": n}: requests served since start or /control/reset
    /control/reset

    python tests/loadgen/lg_tiny_server.py   # prints its port on the first line of stdout
"""

from __future__ import annotations

import asyncio
import http.client
import json
import subprocess
import sys
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class _Handler:
    def __init__(self) -> None:
        self.count = 0
        self.stall = (0.0, 0.0)  # time.monotonic() window
        self.lock = asyncio.Lock()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n")[1:]:
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                if length:
                    await reader.readexactly(length)
                path = head.split(b" ", 2)[1].decode()
                if not await self.respond(path, writer):
                    return
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def respond(self, path: str, writer: asyncio.StreamWriter) -> bool:
        """Write the response to ``path``; False when the connection must end."""
        parts = path.strip("/").split("/")
        if parts[0] == "control":
            if parts[1] == "stall":
                start = time.monotonic() + float(parts[2]) / 1000
                self.stall = (start, start + float(parts[3]) / 1000)
            elif parts[1] == "reset":
                self.count = 0
            self.write(writer, 200, json.dumps({"requests": self.count}).encode())
            return True
        self.count += 1
        if parts[0] == "drop":
            return False
        if parts[0] == "chunked":
            writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nabcd\r\n2;x=y\r\nef\r\n0\r\n\r\n")
            return True
        if parts[0] == "eof":
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil close")
            await writer.drain()
            return False
        if parts[0] == "status":
            self.write(writer, int(parts[1]), b'{"error":"x"}')
            return True
        if parts[0] == "v1":  # not a rightsize server: no /v1/info; /v1/predict answers anything
            self.write(writer, 404 if parts[1:] == ["info"] else 200, b'{"ok":true}')
            return True
        delay_s = float(parts[1]) / 1000 if len(parts) > 1 else 0.0
        start, end = self.stall
        now = time.monotonic()
        if start <= now < end:
            await asyncio.sleep(end - now)
        if parts[0] == "serial":
            async with self.lock:
                await asyncio.sleep(delay_s)
        elif delay_s:
            await asyncio.sleep(delay_s)
        self.write(writer, 200, b'{"ok":true}')
        return True

    @staticmethod
    def write(writer: asyncio.StreamWriter, status: int, body: bytes) -> None:
        head = f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        writer.write(head.encode() + body)


async def _main() -> None:
    handler = _Handler()
    server = await asyncio.start_server(handler.handle, "127.0.0.1", 0, backlog=1024)
    print(server.sockets[0].getsockname()[1], flush=True)
    async with server:
        await server.serve_forever()


class TinyServer:
    """The test-side handle: starts the server process, builds URLs, sends control requests."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen([sys.executable, __file__], stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        self.port = int(self.proc.stdout.readline())

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def control(self, path: str) -> int:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
        try:
            conn.request("GET", "/control/" + path)
            return int(json.loads(conn.getresponse().read())["requests"])
        finally:
            conn.close()

    def stall(self, start_in_s: float, stall_ms: float) -> None:
        self.control(f"stall/{start_in_s * 1000:g}/{stall_ms:g}")

    @property
    def requests(self) -> int:
        return self.control("count")

    def reset(self) -> None:
        self.control("reset")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


if __name__ == "__main__":
    asyncio.run(_main())


def until_valid(run: Callable[[], T], tries: int = 3) -> T:
    """Re-run a load run whose generator fell behind (another job took the CPU); skip if it never keeps up.

    Tests that measure rates or latencies need a run the generator kept up with; detecting the
    opposite is tested on its own (test_a_starved_generator_flags_the_run_invalid).
    """
    import pytest

    for _ in range(tries):
        result = run()
        if getattr(result, "valid", True):
            return result
    pytest.skip(f"the generator could not keep up in {tries} tries: this machine is overloaded")
