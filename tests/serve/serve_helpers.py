"""Helpers for serving tests: slow fake models, a metrics reader, a light open-loop HTTP client."""

from __future__ import annotations

import asyncio
import re
import threading
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx


class SlowModel:
    """predict(x) -> x.sum(1, keepdim) after fixed_s + per_sample_s × n; records the first column it saw."""

    def __init__(self, fixed_s: float, per_sample_s: float = 0.0) -> None:
        self.fixed_s, self.per_sample_s = fixed_s, per_sample_s
        self.seen: list[float] = []
        self.lock = threading.Lock()

    def __call__(self, x: Any) -> Any:
        with self.lock:
            self.seen += x[:, 0].tolist()
        time.sleep(self.fixed_s + self.per_sample_s * len(x))
        return x.sum(1, keepdim=True)


def metric(text: str, name: str) -> float:
    """Sum of every sample of ``name`` (any labels) in a Prometheus text page."""
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            total += float(line.rsplit(" ", 1)[1])
    return total


@dataclass(frozen=True)
class Outcome:
    status: int | None  # None: no HTTP answer (connection error, timeout)
    latency_s: float  # from the intended send time
    error: str = ""


class RawClient:
    """Keep-alive HTTP/1.1 POSTs over asyncio streams: ~10x cheaper per request than httpx, which matters
    when the client shares a busy 2-core machine (and, in-process, the GIL) with the server under test."""

    def __init__(self, base_url: str) -> None:
        parts = urlsplit(base_url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []

    async def post(self, path: str, body: bytes, timeout_s: float = 30.0) -> int:
        conn = self.idle.pop() if self.idle else await asyncio.open_connection(self.host, self.port)
        reader, writer = conn
        head = f"POST {path} HTTP/1.1\r\nHost: {self.host}\r\nContent-Type: application/json\r\n"
        writer.write(f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + body)
        try:
            header = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout_s)
            length = re.search(rb"(?i)\r\ncontent-length:\s*(\d+)", header)
            await reader.readexactly(int(length.group(1)) if length else 0)
        except BaseException:
            writer.close()
            raise
        self.idle.append(conn)
        return int(header[9:12])

    def close(self) -> None:
        for _, writer in self.idle:
            writer.close()


async def open_loop(base_url: str, rate_per_s: float, duration_s: float, body: bytes) -> list[Outcome]:
    """Constant-rate POSTs to /v1/predict; latency from each request's intended send time (no coordinated omission)."""
    loop = asyncio.get_running_loop()
    client = RawClient(base_url)

    async def one(intended_s: float) -> Outcome:
        try:
            status = await client.post("/v1/predict", body)
        except (OSError, asyncio.IncompleteReadError, asyncio.TimeoutError) as exc:
            return Outcome(None, loop.time() - intended_s, repr(exc))
        return Outcome(status, loop.time() - intended_s)

    start = loop.time() + 0.05
    tasks = []
    for i in range(int(rate_per_s * duration_s)):
        intended = start + i / rate_per_s
        delay = intended - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(intended)))
    outcomes = list(await asyncio.gather(*tasks))
    client.close()
    return outcomes


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]


async def burst(base_url: str, n: int, json_body: dict[str, Any]) -> list[httpx.Response]:
    """``n`` concurrent POSTs to /v1/predict."""
    async with httpx.AsyncClient(timeout=20) as c:
        return list(await asyncio.gather(*(c.post(f"{base_url}/v1/predict", json=json_body) for _ in range(n))))


def start_ready(args: list[str]) -> tuple[Any, dict[str, Any]]:
    """``python -m rightsize serve ARGS --port 0 --json`` in a process, and the ready document it prints once the
    server is up (its indented JSON). The caller stops the process (``proc.kill()`` in a ``finally``)."""
    import json
    import subprocess
    import sys

    cmd = [sys.executable, "-m", "rightsize", "serve", *args, "--port", "0", "--json"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    text = ""
    while True:
        text += proc.stdout.readline()
        try:
            return proc, json.loads(text)
        except json.JSONDecodeError:
            if proc.poll() is not None:
                proc.kill()
                raise AssertionError(proc.stderr.read() if proc.stderr else "") from None
