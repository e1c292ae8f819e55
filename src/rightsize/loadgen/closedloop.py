"""Closed-loop load: ``concurrency`` users, each sends, waits for the answer, and sends again.

This is what thread-pool clients (the seeds' "20-50 concurrent threads over 1000 images") and wrk
do. While the server stalls the users stop sending, so the requests that *would* have arrived
during the stall are never measured: the tail is under-reported (coordinated omission,
docs/sources.md `load-generation`). Results carry ``coordinated_omission="affected"``; use the open loop to judge
a latency SLO.
"""

from __future__ import annotations

import asyncio
import functools
import math
import time
from dataclasses import dataclass

from rightsize.loadgen._http import Pool, _Conn, exception_kind
from rightsize.loadgen.result import LoadResult, Recorder, answer_checks
from rightsize.loadgen.schedule import check_run_bounds
from rightsize.loadgen.target import Target

__all__ = ["ClosedLoopConfig", "closed_loop"]

_RETRY_PAUSE_S = 0.001  # after a connection error, so a refused port does not become a busy loop


@dataclass(frozen=True)
class ClosedLoopConfig:
    """``concurrency`` users for ``duration_s`` seconds and/or ``requests`` requests in total."""

    concurrency: int
    duration_s: float | None = 10.0
    requests: int | None = None
    timeout_s: float = 10.0
    slo_ms: float | None = None
    warmup_s: float = 0.0
    think_ms: float = 0.0  # pause between a user's response and its next request

    def __post_init__(self) -> None:
        check_run_bounds(self.duration_s, self.requests, self.timeout_s)
        if self.concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {self.concurrency}")


class _Users:
    """``concurrency`` users driven by callbacks: a response's callback sends that user's next request."""

    def __init__(self, target: Target, config: ClosedLoopConfig, pool: Pool, rec: Recorder, t0: float) -> None:
        self.raw, self.head = target.raw, target.method == "HEAD"
        self.config, self.pool, self.rec = config, pool, rec
        self.loop = asyncio.get_running_loop()
        self.warm_end = t0 + config.warmup_s
        self.deadline = math.inf if config.duration_s is None else t0 + config.duration_s
        self.left = config.requests if config.requests is not None else -1  # -1: no request budget
        self.last_done = self.warm_end
        self.active = config.concurrency
        self.finished = asyncio.Event()
        self.tasks: set[asyncio.Task[None]] = set()

    def go(self, conn: _Conn | None) -> None:
        """One user's next request, on ``conn`` (or a pooled or new connection)."""
        start = time.perf_counter()
        if start >= self.deadline or self.left == 0:
            if conn is not None:
                self.pool.release(conn)
            self.active -= 1
            if self.active == 0:
                self.finished.set()
            return
        if self.left > 0:
            self.left -= 1
        measured = start >= self.warm_end
        if conn is None or not (conn.alive and conn.reusable):
            if conn is not None:
                self.pool.release(conn, ok=False)
            conn = self.pool.take_idle()
        if conn is None:
            task = self.loop.create_task(self._connect_and_send(start, measured))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)
            return
        self._send(conn, start, measured, False)

    def _send(self, conn: _Conn, start: float, measured: bool, retried: bool) -> None:
        """Write the request on ``conn``: only now is it *sent* (a connect that fails sends nothing)."""
        if measured and not retried:
            self.rec.sent += 1
        deadline = start + self.config.timeout_s
        conn.send(self.raw, self.head, deadline, functools.partial(self._on_done, conn, start, measured, retried))

    def _on_done(
        self, conn: _Conn, start: float, measured: bool, retried: bool, status: int, exc: BaseException | None
    ) -> None:
        now = time.perf_counter()
        if exc is not None:
            stale = isinstance(exc, ConnectionError) and conn.idle_fresh and not retried
            self.pool.release(conn, ok=False)
            if stale:  # the server closed an idle keep-alive under us: send once more on a new connection
                task = self.loop.create_task(self._connect_and_send(start, measured, retried=True))
                self.tasks.add(task)
                task.add_done_callback(self.tasks.discard)
                return
            self._failed(measured, exc)
            return
        if measured:
            self.rec.response(status, now - start)
            self.last_done = now
        if self.config.think_ms:
            self.loop.call_later(self.config.think_ms / 1000.0, self.go, conn)
        else:
            self.go(conn)

    def _failed(self, measured: bool, exc: BaseException) -> None:
        if measured:
            self.rec.error(exception_kind(exc))
            self.last_done = time.perf_counter()
        self.loop.call_later(_RETRY_PAUSE_S, self.go, None)  # a refused port must not become a busy loop

    async def _connect_and_send(self, start: float, measured: bool, retried: bool = False) -> None:
        if not self.pool.reserve():  # every slot is taken (cannot happen with one per user); fail this one
            self._failed(measured, ConnectionError("no connection slot"))
            return
        try:
            conn = await self.pool.connect()
        except (ConnectionError, OSError) as exc:
            self.pool.open -= 1
            self._failed(measured, exc)
            return
        self.pool.adopt(conn)
        self._send(conn, start, measured, retried)


async def closed_loop(target: Target, config: ClosedLoopConfig) -> LoadResult:
    """Run one closed-loop load against ``target``; latency is measured from the actual send."""
    pool = Pool(target.host, target.port, config.concurrency, config.timeout_s)
    await pool.prefill(config.concurrency)
    pool.start()
    rec = Recorder(config.slo_ms)
    users = _Users(target, config, pool, rec, time.perf_counter())
    try:
        for _ in range(config.concurrency):
            users.go(None)
        await users.finished.wait()
    finally:
        for task in list(users.tasks):
            task.cancel()
        pool.close()
    span_s = max(users.last_done - users.warm_end, 1e-9)  # end of warm-up to the last measured completion
    latency, latency_hdr = rec.latency()
    problems = [] if rec.sent else ["no request was sent after warm-up; lengthen the run or shorten --warmup-s"]
    answers, notes = answer_checks(rec, closed=True)  # its fix is fewer users, not a lower rate
    problems += answers
    return LoadResult(
        mode="closed",
        coordinated_omission="affected",
        url=target.url,
        duration_s=span_s,
        requests_sent=rec.sent,
        requests_answered=rec.answered,
        responses_ok=rec.ok,
        achieved_rate_per_s=rec.sent / span_s,
        throughput_per_s=rec.ok / span_s,
        latency_ms=latency,
        errors=dict(rec.errors),
        status_counts={str(k): v for k, v in sorted(rec.status.items())},
        valid=not problems,
        problems=problems,
        warnings=notes,
        concurrency=config.concurrency,
        connections=config.concurrency,
        connections_peak=pool.peak_open,
        slo_ms=config.slo_ms,
        goodput_per_s=None if config.slo_ms is None else rec.ok_within_slo / span_s,
        latency_hdr=latency_hdr,
    )
