"""Core affinity for measuring under load: keep the load generator off the cores it measures.

    split = split_cpus()            # CpuSplit(generator={0}, server={1, ...}) or None on one core
    with pinned(split.server):      # every thread of this process, and threads started meanwhile
        ...

On a 2-core VM a generator sharing the model's cores slowed int8 DistilBERT batches by 35-46%
(docs/loadtesting.md, validate), which measures the rig, not the server.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = ["CpuSplit", "pin_process", "pinned", "split_cpus", "usable_cores"]


def usable_cores() -> int:
    """Cores this process may use (its affinity mask, not the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


@dataclass(frozen=True)
class CpuSplit:
    """Which cores drive the load and which serve (``os.sched_setaffinity`` sets)."""

    generator: frozenset[int]
    server: frozenset[int]

    def to_dict(self) -> dict[str, list[int]]:
        return {"generator": sorted(self.generator), "server": sorted(self.server)}


def split_cpus() -> CpuSplit | None:
    """The first usable core for the load generator, the rest for the server; None with one core."""
    if not hasattr(os, "sched_getaffinity"):
        return None
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        return None
    return CpuSplit(frozenset(cores[:1]), frozenset(cores[1:]))


@contextlib.contextmanager
def pinned(cpus: frozenset[int] | None) -> Iterator[None]:
    """Every thread of this process on ``cpus`` (threads started meanwhile inherit it); restored on exit."""
    if cpus is None:
        yield
        return
    before: dict[int, set[int]] = {}
    for tid in map(int, os.listdir("/proc/self/task")):
        with contextlib.suppress(OSError):  # a thread may end while we walk the list
            before[tid] = os.sched_getaffinity(tid)
            os.sched_setaffinity(tid, cpus)
    try:
        yield
    finally:
        for tid, mask in before.items():
            with contextlib.suppress(OSError):
                os.sched_setaffinity(tid, mask)


def pin_process(pid: int, cpus: frozenset[int] | None) -> None:
    """Pin a child right after it starts (before it starts threads, which inherit the mask)."""
    if cpus is not None:
        os.sched_setaffinity(pid, cpus)
