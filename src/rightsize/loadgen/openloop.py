"""Open-loop load: send on a fixed schedule, measure each latency from its intended send time.

    result = run_open_loop(Target.from_url("http://127.0.0.1:8000"), OpenLoopConfig(rate_per_s=200))

The schedule (Poisson or constant) is drawn before the clock starts. A dispatcher hands each
request to the engine when its intended time comes; how late that happens is the generator's
*send lag*. A request that waits for a free connection or a slow server keeps
counting from its intended time, so stalls show in the tail (no coordinated omission,
docs/sources.md `load-generation`). When the generator itself falls behind (p99 send lag above ``max_lag_ms``, or
fewer than ``min_send_ratio`` of the scheduled requests sent in time with connections free) the run is flagged
invalid; so is one whose server kept every connection busy (past capacity), and the problem says which.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import time
from dataclasses import dataclass, replace

from rightsize.loadgen._http import Pool, _Conn, exception_kind
from rightsize.loadgen.result import GENERATOR_BEHIND, LoadResult, Recorder, answer_checks, latency_of
from rightsize.loadgen.schedule import Arrival, arrival_offsets_s, check_run_bounds
from rightsize.loadgen.target import Target

__all__ = ["OpenLoopConfig", "open_loop"]

_START_DELAY_S = 0.02  # the schedule starts this long after setup, so the first sends are not late
_MIN_SLEEP_S = 0.001


@dataclass(frozen=True)
class OpenLoopConfig:
    """An open-loop run: ``rate_per_s`` for ``duration_s`` seconds and/or ``requests`` requests."""

    rate_per_s: float
    duration_s: float | None = 10.0
    requests: int | None = None
    arrival: Arrival = "poisson"
    connections: int = 128  # max keep-alive connections (HTTP/1.1: max requests in flight)
    prefill_connections: int = 16  # opened before the clock starts
    timeout_s: float = 10.0  # per request, from its actual start
    slo_ms: float | None = None  # goodput counts successful responses within this latency
    warmup_s: float = 0.0  # requests intended before this are sent but not recorded
    max_lag_ms: float = 10.0  # invalid when the p99 send lag exceeds this
    min_send_ratio: float = 0.95  # invalid when fewer than this share of scheduled sends went out in time
    seed: int | None = 0

    def __post_init__(self) -> None:
        check_run_bounds(self.duration_s, self.requests, self.timeout_s)
        if self.connections < 1:
            raise ValueError(f"connections must be >= 1, got {self.connections}")


class _Req:
    """One scheduled request on its way: intended and actual start (perf_counter seconds)."""

    __slots__ = ("measured", "retried", "start", "t_intended")

    def __init__(self, t_intended: float, start: float, measured: bool) -> None:
        self.t_intended, self.start, self.measured, self.retried = t_intended, start, measured, False


class _Engine:
    """Sends scheduled requests on pooled connections with callbacks only (no task or future per request).

    A request goes out at once on an idle connection, else waits in a FIFO queue while new
    connections open (up to the pool's limit); a finished connection takes the next queued request
    before it goes idle. The pool's watchdog fails requests past their timeout, queued ones included.
    """

    def __init__(self, target: Target, config: OpenLoopConfig, pool: Pool, rec: Recorder, warm_end: float) -> None:
        self.raw, self.head = target.raw, target.method == "HEAD"
        self.timeout_s = config.timeout_s
        self.pool, self.rec, self.warm_end = pool, rec, warm_end
        self.queue: collections.deque[_Req] = collections.deque()
        self.connecting: set[asyncio.Task[None]] = set()
        self.inflight = 0
        self.last_start = self.last_done = warm_end
        self.dispatching = True
        self.drained = asyncio.Event()
        pool.on_tick = self._expire_queued

    def submit(self, t_intended: float) -> None:
        start = time.perf_counter()
        req = _Req(t_intended, start, t_intended >= self.warm_end)
        if req.measured:
            self.rec.send_lag_s.append(start - t_intended)
        conn = self.pool.take_idle()
        if conn is not None:
            self._send(conn, req)
        else:
            self.queue.append(req)
            self._grow()

    def _send(self, conn: _Conn, req: _Req) -> None:
        """Write ``req`` on ``conn``: only now is it *sent* (a request still queued for a connection is not)."""
        if req.measured and not req.retried:
            now = time.perf_counter()
            self.rec.sent += 1
            self.rec.connection_wait_s.append(now - req.start)
            self.last_start = now
        self.inflight += 1
        conn.send(self.raw, self.head, req.start + self.timeout_s, functools.partial(self._on_done, conn, req))

    def _on_done(self, conn: _Conn, req: _Req, status: int, exc: BaseException | None) -> None:
        self.inflight -= 1
        if exc is None:
            if req.measured:
                now = time.perf_counter()
                self.rec.response(status, now - req.t_intended)
                self.last_done = now
            self._next(conn)
            return
        stale = isinstance(exc, ConnectionError) and conn.idle_fresh and not req.retried
        self.pool.release(conn, ok=False)
        if stale:  # the server closed an idle keep-alive under us: send once more on a new connection
            req.retried = True
            self.queue.appendleft(req)
        else:
            self._fail(req, exc)
        self._grow()
        self._check_drained()

    def _next(self, conn: _Conn) -> None:
        """A connection is free: give it the next queued request, or return it to the pool."""
        if self.queue and conn.alive and conn.reusable:
            self._send(conn, self.queue.popleft())
            return
        self.pool.release(conn)
        self._grow()
        self._check_drained()

    def _fail(self, req: _Req, exc: BaseException) -> None:
        if req.measured:
            self.rec.error(exception_kind(exc))
            self.last_done = time.perf_counter()

    def _grow(self) -> None:
        """Open connections for queued requests (one per request, within the pool's limit)."""
        while len(self.queue) > len(self.connecting) and self.pool.reserve():
            task = asyncio.get_running_loop().create_task(self._connect())
            self.connecting.add(task)
            task.add_done_callback(self.connecting.discard)

    async def _connect(self) -> None:
        try:
            conn = await self.pool.connect()
        except (ConnectionError, OSError) as exc:
            self.pool.open -= 1
            if self.queue:  # a failed connect fails the request it was opened for
                self._fail(self.queue.popleft(), exc)
                self._grow()
                self._check_drained()
            return
        self.pool.adopt(conn)
        self._next(conn)

    def _expire_queued(self, now: float) -> None:
        q = self.queue
        while q and q[0].start + self.timeout_s < now:  # FIFO: the oldest start is first
            self._fail(q.popleft(), TimeoutError("no free connection before the timeout"))
        self._check_drained()

    def _check_drained(self) -> None:
        if not self.dispatching and not self.queue and self.inflight == 0:
            self.drained.set()


async def open_loop(target: Target, config: OpenLoopConfig) -> LoadResult:
    """Run one open-loop load against ``target``; see the module docstring."""
    offsets = arrival_offsets_s(
        config.rate_per_s,
        duration_s=config.duration_s,
        requests=config.requests,
        arrival=config.arrival,
        seed=config.seed,
    )
    clock = time.perf_counter  # loop.time() is ms-granular under uvloop
    pool = Pool(target.host, target.port, config.connections, config.timeout_s)
    await pool.prefill(min(config.prefill_connections, config.connections))
    pool.start()
    rec = Recorder(config.slo_ms)
    cpu0, wall0 = time.thread_time(), clock()  # this thread runs the whole generator (the event loop)
    t0 = clock() + _START_DELAY_S
    warm_end = t0 + config.warmup_s
    engine = _Engine(target, config, pool, rec, warm_end)
    intended = (offsets + t0).tolist()
    i, n = 0, len(intended)
    try:
        while i < n:
            now = clock()
            while i < n and intended[i] <= now:
                engine.submit(intended[i])
                i += 1
            if i < n:
                # Event-loop timers have 1 ms resolution and uvloop rounds shorter sleeps down to 0,
                # which would spin; so sleep at least 1 ms: sends go out up to ~1 ms late, in small
                # bursts at high rates (wrk2's ms timers behave alike).
                await asyncio.sleep(max(intended[i] - clock(), _MIN_SLEEP_S))
        engine.dispatching = False
        engine._check_drained()
        await engine.drained.wait()  # every request ends by its timeout
    finally:
        for task in list(engine.connecting):
            task.cancel()
        pool.close()

    # Measurement window: from the end of warm-up to the end of the schedule (n / rate after t0).
    window_s = max(t0 + n / config.rate_per_s - warm_end, 1e-9)
    scheduled = sum(1 for t in intended if t >= warm_end)
    send_span_s = max(window_s, engine.last_start - warm_end)
    done_span_s = max(window_s, engine.last_done - warm_end)
    result = _result(target, config, rec, pool, window_s, scheduled, send_span_s, done_span_s)
    if (busy := generator_busy_warning(time.thread_time() - cpu0, clock() - wall0)) is not None:
        result.warnings.append(busy)
    return replace(result, schedule_start_s=t0)


GENERATOR_CPU_BOUND = 0.9  # the generator's thread busy this share of the run: it ran out of core


def generator_busy_warning(cpu_s: float, wall_s: float) -> str | None:
    """A warning when the generator's own thread used nearly a whole core over the run: sends and reads then wait
    for it, and the latencies include its queueing (the send lag sees only the dispatch). It had blamed only the
    server ("the server shed 92%") with the client on the same 2 cores."""
    if wall_s <= 0 or cpu_s / wall_s < GENERATOR_CPU_BOUND:
        return None
    return (f"the load generator was CPU-bound ({cpu_s / wall_s:.0%} of a core over the run): latencies may include "
            "its own delays; give it a core of its own (another machine, or a lower --rate)")  # fmt: skip


def _send_rate_problem(
    config: OpenLoopConfig, rec: Recorder, pool: Pool, achieved: float, scheduled_rate: float, ok_rate: float
) -> str:
    """Why fewer than ``min_send_ratio`` of the scheduled requests were written, by who held them back: a server
    that went away (connection errors), one that kept every pooled connection busy (a request is written only on a
    free connection: past capacity), or the generator itself with connections free. The second had read
    "achieved send rate 120.4/s < 95% of scheduled 150.0/s", a generator's fault, for a server capped at 100/s."""
    shortfall = f"{achieved:.1f}/s < {config.min_send_ratio:.0%} of scheduled {scheduled_rate:.1f}/s"
    if refused := rec.errors.get("connection", 0):
        return (f"achieved send rate {shortfall}: {refused} connection errors (refused, reset or closed: the server "
                "stopped or turned connections away); a request never written counts under errors, not under "
                "sent")  # fmt: skip
    if pool.peak_open >= config.connections:
        n = config.connections
        return (f"the server kept all {n} connections busy, so only {achieved:.1f}/s of the scheduled "
                f"{scheduled_rate:.1f}/s could be sent: it is past capacity at this rate (ok {ok_rate:.1f}/s; if it "
                f"serves more than {n} requests at once, raise --connections)")  # fmt: skip
    return (f"{GENERATOR_BEHIND} with connections free: achieved send rate {shortfall} (lower --rate, or give the "
            "generator a free core)")  # fmt: skip


def _result(
    target: Target,
    config: OpenLoopConfig,
    rec: Recorder,
    pool: Pool,
    window_s: float,
    scheduled: int,
    send_span_s: float,
    done_span_s: float,
) -> LoadResult:
    scheduled_rate = scheduled / window_s
    achieved = rec.sent / send_span_s
    lag = latency_of(rec.send_lag_s)
    wait = latency_of(rec.connection_wait_s)
    latency, latency_hdr = rec.latency()
    problems: list[str] = []
    warnings: list[str] = []
    if scheduled == 0:
        problems.append("no request was scheduled after warm-up; lengthen the run or shorten --warmup-s")
    if lag is not None and lag.p99 > config.max_lag_ms:
        problems.append(
            f"{GENERATOR_BEHIND}: p99 send lag {lag.p99:.1f} ms > {config.max_lag_ms:g} ms "
            "(lower --rate, or give the generator a free core)"
        )
    if scheduled and achieved < config.min_send_ratio * scheduled_rate:
        problems.append(_send_rate_problem(config, rec, pool, achieved, scheduled_rate, rec.ok / done_span_s))
    answers, notes = answer_checks(rec)
    problems += answers
    warnings += notes
    if wait is not None and wait.p99 > config.max_lag_ms and pool.peak_open >= config.connections:
        warnings.append(
            f"all {config.connections} connections were busy: p99 wait for a connection {wait.p99:.1f} ms "
            "(counted in latency; raise --connections if the server should see more concurrent requests)"
        )
    goodput = None if config.slo_ms is None else rec.ok_within_slo / done_span_s
    return LoadResult(
        mode="open",
        coordinated_omission="corrected",
        url=target.url,
        duration_s=window_s,
        requests_sent=rec.sent,
        requests_answered=rec.answered,
        responses_ok=rec.ok,
        achieved_rate_per_s=achieved,
        throughput_per_s=rec.ok / done_span_s,
        latency_ms=latency,
        errors=dict(rec.errors),
        status_counts={str(k): v for k, v in sorted(rec.status.items())},
        valid=not problems,
        problems=problems,
        warnings=warnings,
        arrival=config.arrival,
        offered_rate_per_s=config.rate_per_s,
        scheduled_rate_per_s=scheduled_rate,
        connections=config.connections,
        connections_peak=pool.peak_open,
        slo_ms=config.slo_ms,
        goodput_per_s=goodput,
        send_lag_ms=lag,
        connection_wait_ms=wait,
        latency_hdr=latency_hdr,
    )
