"""Server metrics in the Prometheus text format (0.0.4), kept per server instance (no global registry).

    rightsize_queue_length{pool}                       samples waiting (gauge)
    rightsize_batch_size{pool}                         samples per batch (histogram)
    rightsize_queue_seconds{pool}                      per request: enqueue -> dispatch (histogram)
    rightsize_batch_wait_seconds{pool}                 per batch: a free worker holding a partial batch (histogram)
    rightsize_compute_seconds{pool}                    per batch: model time (histogram)
    rightsize_request_seconds                          per request: handler time, parse to response (histogram)
    rightsize_dispatch_total{pool,reason}              batches by reason full|timeout|drain
    rightsize_routed_total{pool,reason}                routing split; reason fixed|home|spill
    rightsize_responses_total{code}                    answers by HTTP status
    rightsize_pool_utilization{pool}                   busy fraction of the pool's workers since the last scrape
    rightsize_cpu_utilization                          CPU time of the server process and its worker processes /
                                                       (wall × cores) since the last scrape
    rightsize_gpu_utilization{device}                  nvidia-smi style utilisation when torch can read it

Beside the histograms, ``BatchLog`` keeps the last ``BATCH_LOG_SIZE`` batches one by one (pool, samples,
model ms, worker-busy ms: dispatch to the worker free again, so the thread hops and answering are in it),
served as JSON at ``GET /v1/batches?since=N``: ``rightsize validate`` replays the service times the server
really had through the planner's simulator (a histogram's buckets are too coarse for a spread of 5%).

Everything is updated on the event loop thread, so plain counters need no lock.
"""

from __future__ import annotations

import bisect
import itertools
import time
from collections import defaultdict, deque
from collections.abc import Callable, Sequence
from typing import Any

SECONDS_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0)
SIZE_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
BATCH_LOG_SIZE = 65_536  # batches kept one by one (~3 MB): minutes of a busy server


class BatchLog:
    """The last ``size`` batches, numbered from 0 since the server started."""

    FIELDS = ("pool", "samples", "compute_ms", "busy_ms", "taken_ms")  # taken_ms: perf_counter when taken off the queue

    def __init__(self, size: int = BATCH_LOG_SIZE) -> None:
        self.total = 0
        self._rows: deque[tuple[str, int, float, float, float | None]] = deque(maxlen=size)

    def add(self, pool: str, samples: int, compute_s: float, busy_s: float, taken_s: float | None = None) -> None:
        taken = None if taken_s is None else round(taken_s * 1e3, 3)
        self._rows.append((pool, samples, round(compute_s * 1e3, 4), round(busy_s * 1e3, 4), taken))
        self.total += 1

    def since(self, first: int) -> dict[str, Any]:
        """Batches numbered ``first`` onwards still held, and the number the next batch will get."""
        oldest = self.total - len(self._rows)
        skip = min(len(self._rows), max(0, first - oldest))  # any int: none past the newest (2**63 had been a 500)
        rows = [list(r) for r in itertools.islice(self._rows, skip, None)]
        return {"next": self.total, "first": min(max(first, oldest), self.total), "fields": list(self.FIELDS),
                "batches": rows}  # fmt: skip


class Histogram:
    """Cumulative-bucket histogram of one label set."""

    def __init__(self, buckets: Sequence[float]) -> None:
        self.bounds = tuple(buckets)
        self.counts = [0] * (len(self.bounds) + 1)  # last: +Inf
        self.sum = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.sum += value
        self.count += 1

    def lines(self, name: str, labels: str) -> list[str]:
        sep = "," if labels else ""
        out, acc = [], 0
        for bound, c in zip((*self.bounds, "+Inf"), self.counts, strict=True):
            acc += c
            le = bound if isinstance(bound, str) else f"{bound:g}"
            out.append(f'{name}_bucket{{{labels}{sep}le="{le}"}} {acc}')
        wrap = f"{{{labels}}}" if labels else ""
        out += [f"{name}_sum{wrap} {self.sum:.6g}", f"{name}_count{wrap} {self.count}"]
        return out


class ServeMetrics:
    """All metrics of one server. ``gauges`` are read at scrape time."""

    def __init__(self, pools: Sequence[str], cores: int) -> None:
        self.pools = tuple(pools)
        self.cores = max(1, cores)
        self.batch_size = {p: Histogram(SIZE_BUCKETS) for p in self.pools}
        self.queue_s = {p: Histogram(SECONDS_BUCKETS) for p in self.pools}
        self.batch_wait_s = {p: Histogram(SECONDS_BUCKETS) for p in self.pools}
        self.compute_s = {p: Histogram(SECONDS_BUCKETS) for p in self.pools}
        self.request_s = Histogram(SECONDS_BUCKETS)
        self.batch_log = BatchLog()
        self.dispatch: dict[tuple[str, str], int] = defaultdict(int)
        self.routed: dict[tuple[str, str], int] = defaultdict(int)
        self.responses: dict[int, int] = defaultdict(int)
        self.queue_length: Callable[[str], int] = lambda pool: 0
        self.busy_s: Callable[[str], float] = lambda pool: 0.0
        self.workers: Callable[[str], int] = lambda pool: 1
        self.gpu_utilization: Callable[[], dict[str, float]] = dict
        self.worker_pids: Callable[[], Sequence[int]] = tuple  # the pools' worker processes (--workers k > 1)
        self._workers: dict[int, Any] = {}  # pid -> psutil.Process, held from when it was first seen
        self._worker_cpu: dict[int, float] = {}  # pid -> its CPU seconds at the last read (kept once it ends)
        self._last = self._sample()

    def cpu_s(self) -> float:
        """CPU seconds (user + system) so far of the server process and of its worker processes: a pool of k > 1
        CPU workers runs the model in k processes of its own, whose time ``time.process_time()`` does not see. Only
        the workers, not every child: a server run inside another program (``rightsize validate``, tests) shares
        that program's children, such as its load generator. A worker that has ended keeps its last reading."""
        return time.process_time() + self._workers_cpu_s()

    def _workers_cpu_s(self) -> float:
        import psutil

        for pid in self.worker_pids():
            if pid not in self._workers:
                try:
                    self._workers[pid] = psutil.Process(pid)
                except psutil.Error:  # gone already
                    continue
        for pid, proc in self._workers.items():
            try:
                if proc.is_running():  # not a later process given the same pid
                    t = proc.cpu_times()
                    self._worker_cpu[pid] = t.user + t.system + t.children_user + t.children_system
            except psutil.Error:  # ended: its last reading stands
                continue
        return sum(self._worker_cpu.values())

    def _sample(self) -> tuple[float, float, dict[str, float]]:
        """(wall s, CPU s of the server and its workers, busy s per pool)."""
        t = self.cpu_s()
        return time.perf_counter(), t, {p: self.busy_s(p) for p in self.pools}

    def on_batch(
        self,
        pool: str,
        size: int,
        reason: str,
        wait_s: float,
        compute_s: float,
        queue_s: Sequence[float],
        busy_s: float | None = None,
        taken_s: float | None = None,
    ) -> None:
        self.batch_log.add(pool, size, compute_s, compute_s if busy_s is None else busy_s, taken_s)
        self.batch_size[pool].observe(size)
        self.batch_wait_s[pool].observe(wait_s)
        self.compute_s[pool].observe(compute_s)
        self.dispatch[(pool, reason)] += 1
        hist = self.queue_s[pool]
        for q in queue_s:
            hist.observe(q)

    def on_route(self, pool: str, reason: str) -> None:
        self.routed[(pool, reason)] += 1

    def on_response(self, code: int, seconds: float | None = None) -> None:
        self.responses[code] += 1
        if seconds is not None:
            self.request_s.observe(seconds)

    def render(self) -> str:
        wall, cpu, busy = self._sample()
        last_wall, last_cpu, last_busy = self._last
        self._last = (wall, cpu, busy)
        dt = max(wall - last_wall, 1e-9)
        out: list[str] = []

        def family(name: str, kind: str, help_: str) -> None:
            out.extend([f"# HELP {name} {help_}", f"# TYPE {name} {kind}"])

        family("rightsize_queue_length", "gauge", "Samples waiting per pool.")
        out += [f'rightsize_queue_length{{pool="{p}"}} {self.queue_length(p)}' for p in self.pools]
        for name, hists, help_ in (
            ("rightsize_batch_size", self.batch_size, "Samples per batch."),
            ("rightsize_queue_seconds", self.queue_s, "Per request: enqueue to dispatch."),
            ("rightsize_batch_wait_seconds", self.batch_wait_s, "Per batch: a free worker holding a partial batch."),
            ("rightsize_compute_seconds", self.compute_s, "Per batch: model time."),
        ):
            family(name, "histogram", help_)
            for p in self.pools:
                out += hists[p].lines(name, f'pool="{p}"')
        family("rightsize_request_seconds", "histogram", "Per request: parse to response, in the server.")
        out += self.request_s.lines("rightsize_request_seconds", "")
        family("rightsize_dispatch_total", "counter", "Batches dispatched, by reason full|timeout|drain.")
        out += [
            f'rightsize_dispatch_total{{pool="{p}",reason="{r}"}} {c}' for (p, r), c in sorted(self.dispatch.items())
        ]
        family("rightsize_routed_total", "counter", "Requests routed per pool; reason fixed|home|spill.")
        out += [f'rightsize_routed_total{{pool="{p}",reason="{r}"}} {c}' for (p, r), c in sorted(self.routed.items())]
        family(
            "rightsize_responses_total",
            "counter",
            "Answers of /v1/predict by HTTP status code (499: the client left; 408: the server dropped a request not "
            "read within read_timeout_s), and the Host check's 421s and read timeouts before the headers on any path.",
        )
        out += [f'rightsize_responses_total{{code="{c}"}} {n}' for c, n in sorted(self.responses.items())]
        family("rightsize_pool_utilization", "gauge", "Busy fraction of a pool's workers since the last scrape.")
        for p in self.pools:
            util = (busy[p] - last_busy.get(p, 0.0)) / (dt * max(1, self.workers(p)))
            out.append(f'rightsize_pool_utilization{{pool="{p}"}} {min(1.0, max(0.0, util)):.4f}')
        family(
            "rightsize_cpu_utilization",
            "gauge",
            "CPU time of the server process and its worker processes / (wall time × cores) since the last scrape.",
        )
        out.append(f"rightsize_cpu_utilization {min(1.0, max(0.0, (cpu - last_cpu) / (dt * self.cores))):.4f}")
        gpu = self.gpu_utilization()
        if gpu:
            family("rightsize_gpu_utilization", "gauge", "GPU utilisation as the driver reports it (0..1).")
            out += [f'rightsize_gpu_utilization{{device="{d}"}} {u:.4f}' for d, u in sorted(gpu.items())]
        return "\n".join(out) + "\n"
