"""Watch a running training or inference loop: where each step's time goes, and what the machine did.

    with LoopProbe() as probe:          # patches DataLoader iteration and Optimizer.step while open
        for x, y in loader:
            loss = model(x).sum(); loss.backward(); opt.step(); opt.zero_grad()
    facts = probe.facts()               # LoopFacts: data wait vs step time, utilization, memory, loaders

What is measured, with no change to the user's code:
- data wait: wall time spent inside ``next()`` on a ``torch.utils.data.DataLoader`` iterator — the
  time the loop stood still waiting for input (the seeds' "GPU starving" check);
- steps: ``Optimizer.step`` calls (training) or, without an optimizer, DataLoader batches; the loop window runs
  from the first batch asked for or optimizer step taken (whichever comes first) to the last;
- loaders: num_workers, pin_memory, batch size of every DataLoader iterated;
- CPU: process CPU time over wall time (cores busy), and the machine's core count;
- memory: peak RSS (sampled) and its trend over the loop (first third vs last third), and on CUDA the peak
  allocated vs the device's total;
- precision: how often ``torch.autocast`` was entered; host-to-device copies: ``Tensor.to``/``.cuda`` calls
  that move CPU tensors to a GPU (only patched when CUDA is present).
"""

from __future__ import annotations

import bisect
import math
import os
import threading
import time
from contextlib import suppress
from dataclasses import asdict, dataclass, field
from typing import Any

import psutil


@dataclass
class LoaderInfo:
    num_workers: int
    pin_memory: bool
    batch_size: int | None


# the shortest loop window judged on its own: four of the sampler's 50 ms readings (``LoopProbe.sample_s``)
MIN_WINDOW_S = 0.2


@dataclass
class LoopFacts:
    """What the probe saw; ``rightsize.diagnose.rules.diagnose`` turns it into findings."""

    wall_s: float = 0.0
    loop_s: float = 0.0  # from the first batch asked for (or step taken) to the last batch or step (0: no loop seen)
    data_wait_s: float = 0.0
    batches: int = 0
    steps: int = 0  # optimizer steps (0 for inference loops)
    cpu_s: float = 0.0  # process user + system CPU time (children included)
    loop_cpu_s: float = 0.0  # of it, spent inside the loop window (loop_s), from the sampler's readings
    # this process's threads, over the loop window (else the watch): seconds on a CPU and seconds ready to run but
    # waiting for one (schedstat; None where the kernel has none)
    sched_run_s: float | None = None
    sched_wait_s: float | None = None
    load_average: float | None = None  # 1-minute load average at the end of the watch
    others_share: float | None = None  # of the cores this process may use, the share other processes kept busy
    logical_cores: int = 1
    torch_threads: int | None = None  # read when the loop is first seen (after the program's set_num_threads)
    peak_rss_bytes: int = 0
    # mean RSS over the first and the last third of the loop window (0: too few readings): a steady climb is tensors
    # kept across steps
    rss_start_bytes: int = 0
    rss_end_bytes: int = 0
    exit_code: int | None = None  # the program's, when it ended by itself (``rightsize diagnose`` fills it in)
    total_ram_bytes: int = 0
    device: str = "cpu"  # cpu | cuda
    cuda_peak_bytes: int | None = None
    cuda_total_bytes: int | None = None
    autocast_entries: int = 0  # torch.autocast contexts entered (mixed precision in use)
    h2d_copies: int = 0
    h2d_bytes: int = 0
    loaders: list[LoaderInfo] = field(default_factory=list)

    @property
    def data_wait_fraction(self) -> float:
        """Share of the loop's time spent waiting for batches: the loop's, not the process's, so a script's setup
        (imports, building the model, reading a dataset index) does not dilute a starving loader."""
        span = self.loop_s if self.loop_s > 0 else self.wall_s
        return self.data_wait_s / span if span > 0 else 0.0

    @property
    def cpu_cores_busy(self) -> float:
        """Cores kept busy on average: over the loop window when one was seen (setup does not dilute it) and it spans
        a few of the sampler's readings, else over the whole watch; never more than the machine has (a window of a
        few ms between two readings 50 ms apart, interpolated, can read 3 of 2 cores)."""
        if self.loop_s >= MIN_WINDOW_S and self.loop_cpu_s > 0:
            busy = self.loop_cpu_s / self.loop_s
        else:
            busy = self.cpu_s / self.wall_s if self.wall_s > 0 else 0.0
        return min(busy, float(max(1, self.logical_cores)))

    @property
    def contention(self) -> float | None:
        """Share of the time this process's threads were ready to run that they waited for a CPU other work held
        (``measure.conditions``' rule for a timing; None without schedstat or with too little run time to tell)."""
        if self.sched_run_s is None or self.sched_wait_s is None or self.sched_run_s + self.sched_wait_s < 0.05:
            return None
        return self.sched_wait_s / (self.sched_run_s + self.sched_wait_s)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"data_wait_fraction": self.data_wait_fraction, "cpu_cores_busy": self.cpu_cores_busy,
                               "contention": self.contention}  # fmt: skip

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> LoopFacts:
        known = {k: v for k, v in d.items() if k in cls.__dataclass_fields__}
        known["loaders"] = [LoaderInfo(**x) for x in known.get("loaders", [])]
        return cls(**known)


class LoopProbe:
    """Context manager that patches torch's DataLoader iterator and Optimizer.step to time a loop."""

    def __init__(self, sample_s: float = 0.05) -> None:
        self.sample_s = sample_s
        self._facts = LoopFacts()
        self._restore: list[tuple[Any, str, Any]] = []
        self._hooks: list[Any] = []
        self._stop = threading.Event()
        self._sampler: threading.Thread | None = None
        self._t0 = 0.0
        self._cpu0 = 0.0
        self._loop_t0: float | None = None  # the first batch asked for or optimizer step taken
        self._loop_t1 = 0.0  # the last batch returned or optimizer step taken
        self._cpu_readings: list[tuple[float, float]] = []  # (perf_counter, process CPU s), one per sample
        self._sched = _SchedClock()
        self._sched_readings: list[tuple[float, tuple[float, float]]] = []  # (perf_counter, (run s, wait s))
        self._busy_readings: list[tuple[float, float]] = []  # (perf_counter, every process's CPU s on our cores)
        self._rss_readings: list[tuple[float, int]] = []  # (perf_counter, RSS bytes), one per sample
        self._seen_loaders: set[tuple[int, int, bool, int | None]] = set()

    # --- patching ------------------------------------------------------------------------------

    def _patch(self, owner: Any, name: str, wrapper: Any) -> None:
        self._restore.append((owner, name, getattr(owner, name)))
        setattr(owner, name, wrapper)

    def __enter__(self) -> LoopProbe:
        import torch
        from torch.utils.data import dataloader

        facts, probe = self._facts, self
        base_iter = dataloader._BaseDataLoaderIter
        original_next = base_iter.__next__

        def timed_next(it: Any) -> Any:
            t = time.perf_counter()
            if probe._loop_t0 is None:
                probe._loop_seen(t)
            try:
                batch = original_next(it)
            finally:
                probe._loop_t1 = time.perf_counter()
                facts.data_wait_s += probe._loop_t1 - t  # the end-of-epoch StopIteration waits too
            facts.batches += 1
            probe._note_loader(it)
            return batch

        self._patch(base_iter, "__next__", timed_next)
        from torch.optim.optimizer import register_optimizer_step_post_hook

        def counted_step(opt: Any, args: Any, kwargs: Any) -> None:  # every optimizer, every step
            facts.steps += 1
            probe._loop_t1 = time.perf_counter()
            if probe._loop_t0 is None:  # a loop without a DataLoader: its window starts at its first step
                probe._loop_seen(probe._loop_t1)

        self._hooks.append(register_optimizer_step_post_hook(counted_step))
        autocast_cls = torch.amp.autocast_mode.autocast
        original_enter = autocast_cls.__enter__

        def counted_enter(ctx: Any) -> Any:
            if getattr(ctx, "_enabled", True):
                facts.autocast_entries += 1
            return original_enter(ctx)

        self._patch(autocast_cls, "__enter__", counted_enter)
        if torch.cuda.is_available():
            facts.device = "cuda"
            facts.cuda_total_bytes = int(torch.cuda.get_device_properties(0).total_memory)
            torch.cuda.reset_peak_memory_stats()
            self._patch_copies(torch)
        facts.logical_cores = os.cpu_count() or 1
        facts.total_ram_bytes = int(psutil.virtual_memory().total)
        self._t0 = time.perf_counter()
        self._cpu0 = _cpu_seconds()
        self._sched_readings.append((self._t0, self._sched.read()))
        self._note_busy(self._t0)
        self._sampler = threading.Thread(target=self._sample, name="rightsize-diagnose", daemon=True)
        self._sampler.start()
        return self

    def _loop_seen(self, t: float) -> None:
        """The loop's first batch or step: its window starts, and torch's thread count is read now, after the
        program's own ``torch.set_num_threads`` (read at import it had said 2 for a loop set to 1)."""
        import torch

        self._loop_t0 = t
        self._facts.torch_threads = torch.get_num_threads()

    def _note_busy(self, t: float) -> None:
        busy = _busy_reading()
        if busy is not None:
            self._busy_readings.append((t, busy))

    def _patch_copies(self, torch: Any) -> None:
        facts = self._facts
        original_to = torch.Tensor.to

        def counted_to(t: Any, *args: Any, **kwargs: Any) -> Any:
            out = original_to(t, *args, **kwargs)
            if t.device.type == "cpu" and out.device.type == "cuda":
                facts.h2d_copies += 1
                facts.h2d_bytes += t.numel() * t.element_size()
            return out

        self._patch(torch.Tensor, "to", counted_to)

    def _note_loader(self, it: Any) -> None:
        """Record each DataLoader once: a new iterator per epoch is the same loader (same dataset, settings)."""
        info = LoaderInfo(
            num_workers=int(getattr(it, "_num_workers", 0) or 0),
            pin_memory=bool(getattr(it, "_pin_memory", False)),
            batch_size=getattr(getattr(it, "_index_sampler", None), "batch_size", None),
        )
        key = (id(getattr(it, "_dataset", None)), info.num_workers, info.pin_memory, info.batch_size)
        if key not in self._seen_loaders:
            self._seen_loaders.add(key)
            self._facts.loaders.append(info)

    def _sample(self) -> None:
        proc = psutil.Process()
        while not self._stop.wait(self.sample_s):
            try:
                rss = proc.memory_info().rss + sum(c.memory_info().rss for c in proc.children(recursive=True))
                self._cpu_readings.append((time.perf_counter(), _cpu_seconds()))
                self._sched_readings.append((time.perf_counter(), self._sched.read()))
                self._note_busy(time.perf_counter())
            except psutil.Error:
                continue
            self._rss_readings.append((time.perf_counter(), int(rss)))
            self._facts.peak_rss_bytes = max(self._facts.peak_rss_bytes, int(rss))

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._sampler is not None:
            self._sampler.join(timeout=1.0)
        facts = self._facts
        t_exit, cpu_exit = time.perf_counter(), _cpu_seconds()
        facts.wall_s = t_exit - self._t0
        facts.cpu_s = cpu_exit - self._cpu0
        if self._loop_t0 is not None:
            facts.loop_s = max(0.0, self._loop_t1 - self._loop_t0)
            facts.rss_start_bytes, facts.rss_end_bytes = _rss_trend(self._rss_readings, self._loop_t0, self._loop_t1)
            readings = [(self._t0, self._cpu0), *self._cpu_readings, (t_exit, cpu_exit)]
            facts.loop_cpu_s = max(0.0, _cpu_at(readings, self._loop_t1) - _cpu_at(readings, self._loop_t0))
        elif facts.torch_threads is None:  # no loop seen: the count the program ends with
            import torch

            facts.torch_threads = torch.get_num_threads()
        self._sched_readings.append((t_exit, self._sched.read()))
        self._note_busy(t_exit)
        windowed = self._loop_t0 is not None and facts.loop_s >= MIN_WINDOW_S
        t0, t1 = (self._loop_t0 or self._t0, self._loop_t1) if windowed else (self._t0, t_exit)
        if self._sched.available:
            for i, name in enumerate(("sched_run_s", "sched_wait_s")):
                series = [(t, v[i]) for t, v in self._sched_readings]
                setattr(facts, name, max(0.0, _cpu_at(series, t1) - _cpu_at(series, t0)))
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else facts.logical_cores
        if len(self._busy_readings) >= 2 and t1 > t0:
            everyone = _cpu_at(self._busy_readings, t1) - _cpu_at(self._busy_readings, t0)
            own = facts.loop_cpu_s if windowed else facts.cpu_s
            facts.others_share = max(0.0, min(1.0, (everyone - own) / ((t1 - t0) * max(1, cores))))
        with suppress(OSError):
            facts.load_average = os.getloadavg()[0]
        facts.peak_rss_bytes = max(facts.peak_rss_bytes, int(psutil.Process().memory_info().rss))
        if facts.device == "cuda":
            import torch

            facts.cuda_peak_bytes = int(torch.cuda.max_memory_allocated())
        for owner, name, original in reversed(self._restore):
            setattr(owner, name, original)
        self._restore.clear()
        for hook in self._hooks:
            hook.remove()
        self._hooks.clear()

    def facts(self) -> LoopFacts:
        return self._facts


def _rss_trend(readings: list[tuple[float, int]], t0: float, t1: float) -> tuple[int, int]:
    """Mean RSS over the first and the last third of the readings in [t0, t1]; (0, 0) under six readings."""
    inside = [rss for t, rss in readings if t0 <= t <= t1]
    if len(inside) < 6:
        return (0, 0)
    third = len(inside) // 3
    return (sum(inside[:third]) // third, sum(inside[-third:]) // third)


def _busy_reading() -> float | None:
    from rightsize.measure.conditions import cores_busy_s

    return cores_busy_s()


class _SchedClock:
    """Seconds this process's threads have run on a CPU and waited for one (``/proc/self/task/*/schedstat``),
    summed as they grow: a thread that ended keeps what it added (summing the live threads' counters went down
    when one ended), a new one adds from 0."""

    def __init__(self) -> None:
        self._last: dict[str, tuple[int, int]] = {}
        self.run_s = self.wait_s = 0.0
        self.available = os.path.exists("/proc/self/schedstat")

    def read(self) -> tuple[float, float]:
        if not self.available:
            return (0.0, 0.0)
        try:
            tasks = os.listdir("/proc/self/task")
        except OSError:
            return (self.run_s, self.wait_s)
        for tid in tasks:
            try:
                with open(f"/proc/self/task/{tid}/schedstat") as f:
                    run, wait = (int(x) for x in f.read().split()[:2])
            except (OSError, ValueError):
                continue  # the thread ended meanwhile
            run0, wait0 = self._last.get(tid, (0, 0))
            self.run_s += max(0, run - run0) / 1e9
            self.wait_s += max(0, wait - wait0) / 1e9
            self._last[tid] = (run, wait)
        return (self.run_s, self.wait_s)


def _cpu_at(readings: list[tuple[float, float]], t: float) -> float:
    """Process CPU seconds at time ``t``, linear between the sampler's readings (time-ordered)."""
    i = bisect.bisect_left(readings, (t, -math.inf))
    if i <= 0:
        return readings[0][1]
    if i >= len(readings):
        return readings[-1][1]
    (t0, c0), (t1, c1) = readings[i - 1], readings[i]
    return c0 + (c1 - c0) * (t - t0) / (t1 - t0) if t1 > t0 else c1


def _cpu_seconds() -> float:
    """CPU seconds of this process and its children: those exited (the children_ fields) and those still running.
    DataLoader workers live through an epoch (with persistent_workers, through the run): their time had counted only
    once they exited, so a loop whose workers kept the cores busy read as idle cores ("raise the batch size")."""
    proc = psutil.Process()
    t = proc.cpu_times()  # before the children are listed: one reaped in between is missed once, never counted twice
    total = t.user + t.system + t.children_user + t.children_system
    for child in proc.children(recursive=True):
        with suppress(psutil.Error):  # exited since it was listed
            c = child.cpu_times()
            total += c.user + c.system
    return float(total)
