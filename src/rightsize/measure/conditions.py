"""Under what conditions a timing was taken: wall vs CPU time, run-queue wait, load, achieved FLOP/s.

    cond = RunConditions()
    stats, converged = time_adaptive(fn, policy, conditions=cond)   # counters around the timed samples
    extra |= cond.to_extra(threads=4, flops_per_batch=F, p50_ms=stats.p50)

The run-queue wait is the Linux scheduler's own count (``/proc/self/task/*/schedstat``, second
field: nanoseconds a runnable thread waited for a CPU), per thread of the process, so a CPU hog
beside the measurement shows directly: the share of runnable time spent waiting. Without
schedstat (not Linux) the share falls back to 1 − CPU time / (wall × threads). Counters are read
once before and once after the timed loop: no polling thread disturbs the timing.

A second rule (applied by the sweep, which knows the other configs; ``contended_by_rate``) catches
what the run queue does not show, such as a hypervisor stealing the vCPU or a neighbour saturating
memory bandwidth: a config whose achieved GFLOP/s is far below what this machine already reached.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

__all__ = [
    "CONTENTION_THRESHOLD",
    "MAY_BE_LOAD",
    "SLOW_VS_BEST",
    "RunConditions",
    "contended_by_rate",
    "contention_share",
    "cores_busy_s",
    "run_wait_s",
    "steal_s",
    "task_wait_ns",
]

# A config is contended when its threads waited for a CPU more than this share of their runnable
# time. Healthy runs on an idle core wait ~0-3% (timer ticks, kernel threads; typically 0.2-0.3% on an
# idle 2-vCPU VM); a second busy process on the same core makes it ~50%. 15% sits well clear of both, and
# at 15% a timing reads at most ~1.18x slow (1 / (1 - 0.15)), inside the projection's own band.
CONTENTION_THRESHOLD = 0.15
# What a reading taken while other processes kept this machine busy may be (validate's notes and levels say it).
MAY_BE_LOAD = "it may be this machine's load, not the server's"

# ... or when its achieved GFLOP/s is below this fraction of the best this machine reached on the
# same work (see ``contended_by_rate``). A 3x gap is far past run-to-run noise (~10-30% on a shared
# VM) and past the legitimate spread between thread counts, but still catches the 10-36x slowdowns
# seen on a busy host.
SLOW_VS_BEST = 1 / 3

SCHEDSTAT_RULE = "schedstat run-queue wait / (wait + cpu)"
CPU_RULE = "1 - cpu / (wall x threads)"


def task_wait_ns() -> dict[int, int] | None:
    """Nanoseconds each thread of this process has waited on a run queue (None without schedstat)."""
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return None
    waits: dict[int, int] = {}
    for tid in tasks:
        try:
            fields = Path(f"/proc/self/task/{tid}/schedstat").read_text().split()
        except OSError:
            continue  # the thread ended meanwhile
        if len(fields) >= 2:
            waits[int(tid)] = int(fields[1])
    return waits or None


def run_wait_s() -> float | None:
    """Seconds the threads of this process have waited on a run queue so far (None without schedstat)."""
    waits = task_wait_ns()
    return None if waits is None else sum(waits.values()) / 1e9


def wait_delta_s(before: dict[int, int], after: dict[int, int]) -> float:
    """Run-queue wait between two ``task_wait_ns`` readings, in seconds.

    A thread that appeared meanwhile counts from 0 (its whole wait happened in between); one that
    ended meanwhile took its count with it, so it adds nothing (never a negative amount).
    """
    return sum(max(0, ns - before.get(tid, 0)) for tid, ns in after.items()) / 1e9


def contention_share(cpu_s: float, wall_s: float, wait_s: float | None, threads: int) -> tuple[float, str]:
    """(share of runnable time spent waiting for a CPU, 0..1; the rule that measured it).

    With schedstat: wait / (wait + cpu), summed over threads. Without: the CPU time the threads
    did not get out of ``wall × threads``, clamped to [0, 1] (idle pool threads read as contended
    here, so this fallback errs towards flagging).
    """
    if wait_s is not None and cpu_s + wait_s > 0:
        return min(1.0, max(0.0, wait_s / (wait_s + cpu_s))), SCHEDSTAT_RULE
    busy = wall_s * max(1, threads)
    return (min(1.0, max(0.0, 1.0 - cpu_s / busy)) if busy > 0 else 0.0), CPU_RULE


def contended_by_rate(achieved_gflops: float | None, best_gflops: float | None) -> bool:
    """True when the achieved rate is below ``SLOW_VS_BEST`` of a known best (False when either is unknown)."""
    if not achieved_gflops or not best_gflops:
        return False
    return achieved_gflops < SLOW_VS_BEST * best_gflops


_USER_HZ = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100  # /proc/stat ticks per second


def _my_cores_ticks() -> list[list[int]] | None:
    """The ``/proc/stat`` tick columns (user nice system idle iowait irq softirq steal ...) of each core this process
    may use; None where unavailable."""
    try:
        cores = {f"cpu{c}" for c in os.sched_getaffinity(0)}
        lines = Path("/proc/stat").read_text().splitlines()
    except (AttributeError, OSError):
        return None
    return [[int(x) for x in f[1:]] for f in (line.split() for line in lines) if f and f[0] in cores and len(f) > 8]


def steal_s() -> float | None:
    """Seconds the hypervisor has run something else while the cores this process may use were
    ready to run it (``/proc/stat`` steal column, summed over those cores; None where unavailable).

    System-wide per core, not per process: a fact about the host, recorded beside the run-queue
    wait, which does not include it."""
    rows = _my_cores_ticks()
    return sum(r[7] for r in rows) / _USER_HZ if rows else None


def _core_ticks() -> tuple[int, int] | None:
    """(busy, total) ``/proc/stat`` ticks summed over the cores this process may use (idle and iowait are not busy;
    guest time is inside user)."""
    return _busy_total(_my_cores_ticks())


def cores_busy_s() -> float | None:
    """Seconds of CPU every process together has used on the cores this process may use (``/proc/stat``, 10 ms
    ticks); None where unavailable. Less this process's own CPU time over an interval: what other work took."""
    ticks = _core_ticks()
    return None if ticks is None else ticks[0] / _USER_HZ


def _busy_total(rows: list[list[int]] | None) -> tuple[int, int] | None:
    """(busy, total) ticks of ``/proc/stat`` rows (idle and iowait are not busy); None without ticks."""
    if not rows:
        return None
    total = sum(sum(r[:8]) for r in rows)
    return (total - sum(r[3] + r[4] for r in rows), total) if total else None


def others_busy_share(interval_s: float = 0.3) -> float | None:
    """The share of this process's cores other work kept busy over ``interval_s`` while this process slept (0 quiet,
    1 every core taken); None where ``/proc/stat`` is unreadable. Unlike the load average it is not raised by this
    process's own work a minute ago, and it counts only the cores this process may use."""
    before = _core_ticks()
    time.sleep(interval_s)
    after = _core_ticks()
    if before is None or after is None or after[1] <= before[1]:
        return None
    return max(0.0, min(1.0, (after[0] - before[0]) / (after[1] - before[1])))


def loadavg_1m() -> float | None:
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


@dataclass
class RunConditions:
    """Counters around a timed region (a context manager); ``to_extra`` gives Measurement.extra fields.

    ``wall_s`` and ``cpu_s`` are seconds (``cpu_s``: every thread of the process, user + system);
    ``wait_s`` is run-queue wait in seconds, None without schedstat; ``steal_s`` hypervisor steal on
    the process's cores in seconds (10 ms resolution); ``loadavg`` the 1-minute load average before
    and after.
    """

    wall_s: float = 0.0
    cpu_s: float = 0.0
    wait_s: float | None = None
    steal_s: float | None = None
    loadavg: tuple[float | None, float | None] = (None, None)
    _start: dict[str, Any] = field(default_factory=dict, repr=False)

    def __enter__(self) -> RunConditions:
        self._start = {"load": loadavg_1m(), "wait": task_wait_ns(), "steal": steal_s()}
        # Clocks last, so reading the counters above is not inside the measured interval.
        self._start["cpu"] = time.process_time()
        self._start["wall"] = time.perf_counter()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        s = self._start
        self.wall_s = time.perf_counter() - s["wall"]
        self.cpu_s = time.process_time() - s["cpu"]
        after = task_wait_ns()
        self.wait_s = None if after is None or s["wait"] is None else wait_delta_s(s["wait"], after)
        steal = steal_s()
        self.steal_s = None if steal is None or s["steal"] is None else max(0.0, steal - s["steal"])
        self.loadavg = (s["load"], loadavg_1m())

    def contention(self, threads: int) -> tuple[float, str]:
        """(share of runnable time spent waiting for a CPU, the rule that measured it)."""
        return contention_share(self.cpu_s, self.wall_s, self.wait_s, threads)

    def to_extra(self, threads: int, flops_per_batch: float | None, p50_ms: float | None) -> dict[str, Any]:
        """``wall_s``, ``cpu_s``, ``run_wait_s``, ``steal_s``, ``loadavg``, ``achieved_gflops``, ``contention``,
        ``contention_rule``, ``contended`` (by the run-queue rule; the sweep may add the rate rule), and ``threads``:
        the intra-op threads it ran on (a config of threads None, "all", ran on torch's default)."""
        share, rule = self.contention(threads)
        achieved = flops_per_batch / (p50_ms / 1e3) / 1e9 if flops_per_batch and p50_ms else None
        return {
            "wall_s": round(self.wall_s, 4),
            "cpu_s": round(self.cpu_s, 4),
            "run_wait_s": None if self.wait_s is None else round(self.wait_s, 4),
            "steal_s": None if self.steal_s is None else round(self.steal_s, 2),
            "loadavg": [None if x is None else round(x, 2) for x in self.loadavg],
            "achieved_gflops": None if achieved is None else round(achieved, 4),
            "contention": round(share, 4),
            "contention_rule": rule,
            "contended": share > CONTENTION_THRESHOLD,
            "threads": threads,
        }


def _tree_cpu_s(also: Sequence[int] = ()) -> float:
    """CPU seconds (user + system) of this process and every process under it (a server, its workers), with the
    children each has already reaped: a generator process that ended within the level is still ours. ``also``: the
    pids of other trees to count as ours (a server this process drives but did not start)."""
    import psutil

    total = 0.0
    procs: dict[int, Any] = {}
    for pid in (os.getpid(), *also):
        try:
            root = psutil.Process(pid)
            procs |= {p.pid: p for p in (root, *root.children(recursive=True))}
        except psutil.Error:  # gone
            continue
    for p in procs.values():
        try:
            t = p.cpu_times()
            total += t.user + t.system + t.children_user + t.children_system
        except psutil.Error:  # gone between the listing and the read
            continue
    return total


def listening_pids(port: int) -> list[int]:
    """The processes of this machine listening on TCP ``port`` (the server a local load test drives); empty when
    none is, or this user may not see which process holds it."""
    import psutil

    try:
        conns = psutil.net_connections(kind="tcp")
    except (psutil.Error, OSError):
        return []
    return sorted({c.pid for c in conns if c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port
                   and c.pid})  # fmt: skip


def _machine_ticks() -> tuple[int, int] | None:
    """(busy, total) ``/proc/stat`` ticks of every core of the machine (its first, aggregate line)."""
    try:
        first = Path("/proc/stat").read_text().split("\n", 1)[0].split()
        ticks = [int(x) for x in first[1:9]]
    except (OSError, ValueError):
        return None
    return _busy_total([ticks]) if first[:1] == ["cpu"] and len(ticks) == 8 else None


class OthersBusy:
    """The share of this machine's cores that processes outside this process's tree kept busy over a ``with``
    block (0 quiet, 1 every core taken; None where ``/proc/stat`` is unreadable). Every core, not only this
    process's: a server pinned to other cores is slowed by a process there. Unlike ``others_busy_share`` it may
    run while this process and its children work: their CPU time is taken out of the cores' busy time."""

    share: float | None = None

    def __init__(self, also: Sequence[int] = ()) -> None:
        self.also = tuple(also)  # pids whose trees are ours too (a local server a load test drives)

    def __enter__(self) -> OthersBusy:
        self._ticks, self._ours, self._wall = _machine_ticks(), _tree_cpu_s(self.also), time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        after, ours, wall = _machine_ticks(), _tree_cpu_s(self.also), time.perf_counter() - self._wall
        if self._ticks is None or after is None or after[1] <= self._ticks[1] or wall <= 0:
            return
        cores = (after[1] - self._ticks[1]) / _USER_HZ / wall  # core-seconds per second of wall time
        busy_s = (after[0] - self._ticks[0]) / _USER_HZ
        self.share = max(0.0, min(1.0, (busy_s - (ours - self._ours)) / (cores * wall)))
