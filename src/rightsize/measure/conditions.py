"""Under what conditions a timing was taken: wall vs CPU time, run-queue wait, load, achieved FLOP/s.

    with RunConditions() as cond:
        stats, converged = time_adaptive(...)
    extra |= cond.to_extra(threads=4, flops_per_batch=F, p50_ms=stats.p50)

The run-queue wait is the Linux scheduler's own count (``/proc/self/task/*/schedstat``, second
field: nanoseconds a runnable thread waited for a CPU), summed over every thread of the process, so
a CPU hog beside the measurement shows directly: the share of runnable time spent waiting. Without
schedstat (not Linux) the share falls back to 1 − CPU time / (wall × threads). Counters are read
once before and once after the timed loop: no polling thread disturbs the timing.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

__all__ = ["CONTENTION_THRESHOLD", "RunConditions", "run_wait_s"]

# A config is contended when its threads waited for a CPU more than this share of their runnable
# time. Healthy runs on an idle core wait ~0-3% (timer ticks, kernel threads); a second busy
# process on the same core makes it ~50%.
CONTENTION_THRESHOLD = 0.15


def run_wait_s() -> float | None:
    """Seconds the threads of this process have waited on a run queue (None without schedstat)."""
    total, seen = 0, False
    try:
        tasks = list(Path("/proc/self/task").iterdir())
    except OSError:
        return None
    for task in tasks:
        try:
            fields = (task / "schedstat").read_text().split()
        except OSError:
            continue  # the thread ended meanwhile
        if len(fields) >= 2:
            total += int(fields[1])
            seen = True
    return total / 1e9 if seen else None


@dataclass
class RunConditions:
    """Counters around a timed region (a context manager); ``to_extra`` gives Measurement.extra fields."""

    wall_s: float = 0.0
    cpu_s: float = 0.0
    wait_s: float | None = None
    loadavg: tuple[float, float] = (0.0, 0.0)
    _start: dict[str, Any] = field(default_factory=dict, repr=False)

    def __enter__(self) -> RunConditions:
        self._start = {
            "wall": time.perf_counter(),
            "cpu": time.process_time(),
            "wait": run_wait_s(),
            "load": os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0,
        }
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        s = self._start
        self.wall_s = time.perf_counter() - s["wall"]
        self.cpu_s = time.process_time() - s["cpu"]
        wait = run_wait_s()
        self.wait_s = None if wait is None or s["wait"] is None else max(0.0, wait - s["wait"])
        self.loadavg = (s["load"], os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0)

    def contention(self, threads: int) -> tuple[float, str]:
        """(share of runnable time spent waiting for a CPU, the rule that measured it)."""
        if self.wait_s is not None and self.cpu_s + self.wait_s > 0:
            return self.wait_s / (self.wait_s + self.cpu_s), "schedstat run-queue wait"
        busy = self.wall_s * max(1, threads)
        return (min(1.0, max(0.0, 1.0 - self.cpu_s / busy)) if busy > 0 else 0.0), "1 - cpu / (wall x threads)"

    def to_extra(self, threads: int, flops_per_batch: float | None, p50_ms: float | None) -> dict[str, Any]:
        share, rule = self.contention(threads)
        achieved = flops_per_batch / (p50_ms / 1e3) / 1e9 if flops_per_batch and p50_ms else None
        return {
            "wall_s": round(self.wall_s, 4),
            "cpu_s": round(self.cpu_s, 4),
            "run_wait_s": None if self.wait_s is None else round(self.wait_s, 4),
            "loadavg": [round(x, 2) for x in self.loadavg],
            "achieved_gflops": None if achieved is None else round(achieved, 3),
            "contention": round(share, 4),
            "contention_rule": rule,
            "contended": share > CONTENTION_THRESHOLD,
        }
