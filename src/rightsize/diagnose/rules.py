"""The seeds' checklist for a running loop, as rules over ``LoopFacts``: each finding names a fix.

    findings = diagnose(facts)   # [Finding(check, severity, evidence, fix)], worst first

Thresholds (each a judgement call, stated where it is used):
- too short to judge: a loop window under 0.2 s (four CPU readings) gets no data-wait or CPU verdict;
- the program failed (it exited non-zero by itself): said first, the rest covers only the steps it ran;
- input pipeline starving: the loop waits on its DataLoader > 20% of its time (first batch to last step) — unless
  each wait is under 1 ms a batch, less than a loader worker takes to hand a batch over: then per-batch overhead;
- per-step overhead: steps (else batches) under 1 ms each: a step's fixed cost dominates, do more work per step;
- CPU contention: the program's threads waited for a CPU > 15% of the time they were ready to run (bench's
  rule for a disturbed timing) while other processes kept > 25% of the cores busy: other work held the cores, so
  the other verdicts read worse than the program is;
- CPU underused: a compute loop keeps < 50% of the cores busy, or about as many cores as torch has threads when
  that is fewer than the cores (one thread on 2 cores reads 50%) (and is not starving, and not contended);
- memory growth: the last third of the loop's RSS above the first third's by > 25% and > 100 MiB;
- memory headroom: peak < 30% of the GPU (room for a larger batch or a smaller GPU), or > 90% of
  the GPU or RAM (one bigger batch or input from out-of-memory);
- small batch: under 8 samples per batch on a loop that is not starving;
- GPU without mixed precision, pageable host memory, or many small host-to-device copies.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

from rightsize.diagnose.probe import MIN_WINDOW_S, LoopFacts
from rightsize.measure.conditions import CONTENTION_THRESHOLD

Severity = Literal["problem", "advice", "ok"]
STARVING = 0.20
UNDERUSED = 0.50
ROOMY, TIGHT = 0.30, 0.90
SMALL_BATCH = 8
OTHERS_BUSY = 0.25  # other processes kept more than a quarter of the cores busy: not the program waiting on itself
# A DataLoader worker hands each batch to the loop through a pipe (pickled, shared memory, a queue): on the dev VM
# (2 cores, 2026-11) next() on a trivial TensorDataset took 1.37 ms a batch of 16 with num_workers=2 against 0.06 ms
# with num_workers=0 (3000 batches after 50 to start the workers). A loop waiting less than that a batch loses more to
# the hand-off than workers could win back (Linear(32,1), batch 16: 7x slower with 2 workers; batch 1024 3.5x faster).
HANDOFF_S = 1e-3
# A training step's fixed cost (Python, operator dispatch, autograd, the optimizer's per-parameter loop): on the dev VM
# Linear(32,1) + MSE + backward + SGD took 0.18 ms a step at batch 1, 0.19 at 16, 0.21 at 1024 (2000 steps each). A
# step under 1 ms is a fifth or more that cost for the smallest model, most of it for one with a few layers: a bigger
# batch runs many times the samples per second (batch 16 -> 1024 was 37x).
STEP_OVERHEAD_S = 1e-3
MIN_STEPS = 20  # fewer steps than this: their mean time is start-up (first-call allocation, lazy init)
GROWTH, GROWTH_MIN_BYTES = 0.25, 100 * 2**20


@dataclass(frozen=True)
class Finding:
    check: str
    severity: Severity
    evidence: str
    fix: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def diagnose(f: LoopFacts) -> list[Finding]:
    """Findings for one watched loop, problems first; one "ok" finding when nothing stands out."""
    out: list[Finding] = []
    if f.exit_code:  # a crash is the first thing to fix: "no step was seen" had led, its exit code a note after it
        out.append(Finding("program", "problem", f"the program exited with code {f.exit_code}" +
                           ("" if f.batches or f.steps else " before any DataLoader batch or optimizer step"),
                           "fix the error it printed (above) first, then diagnose it again; the findings below cover "
                           "only the steps it ran" if f.batches or f.steps else
                           "fix the error it printed (above), then diagnose it again"))  # fmt: skip
    if f.batches == 0 and f.steps == 0:
        return out or [Finding("loop", "problem", "no DataLoader batch and no optimizer step was seen",
                        "diagnose watches torch DataLoader iteration and Optimizer.step; use them, or wrap "
                        "your loop in `with rightsize.diagnose.watch():`")]  # fmt: skip
    workers = max((loader.num_workers for loader in f.loaders), default=0)
    batch = next((loader.batch_size for loader in f.loaders if loader.batch_size), None)
    span = f.loop_s if f.loop_s > 0 else f.wall_s
    judged = span >= MIN_WINDOW_S  # a loop of a few ms: its waits are start-up, its CPU share between two readings
    if not judged:
        out.append(Finding(
            "loop", "advice",
            f"the loop ran {span * 1000:.0f} ms ({f.batches} batches, {f.steps} optimizer steps): too short to "
            "judge its data wait or CPU use",
            "watch a longer run: a few seconds of steps (the first epoch, or --timeout N to stop it there)",
        ))  # fmt: skip
    starving = judged and f.data_wait_fraction > STARVING
    wait_per_batch = f.data_wait_s / max(1, f.batches)
    handoff = starving and wait_per_batch < HANDOFF_S  # many cheap batches: the wait is per-batch overhead, not loading
    if handoff:
        bigger = f"DataLoader(batch_size={batch * 16}) or more" if batch else "a bigger DataLoader batch_size"
        have = (f"its {workers} workers add that hand-off to every batch: num_workers=0 may be faster; "
                if workers else "loader workers would not help: ")  # fmt: skip
        out.append(Finding(
            "per-batch overhead", "problem",
            f"the loop waited on its DataLoader {f.data_wait_fraction:.0%} of the time ({f.data_wait_s:.2f} s of the "
            f"loop's {span:.2f} s), {wait_per_batch * 1000:.2f} ms a batch ({f.batches} batches of {batch or '?'}; "
            f"num_workers={workers})",
            f"raise the batch size: {bigger} (scale the learning rate with it); " + have + "each batch costs less "
            "than handing it between processes (~1 ms)",
        ))  # fmt: skip
    elif starving:
        # loader workers that keep under half the cores busy wait (disk, network, a remote store), not compute:
        # more of them overlap the waits, past the core count (2 sleeping workers on 2 cores had been told they
        # "fill the cores" at 0.56 cores busy)
        more = max(2 * workers, workers + 2)
        idle_cores = f.others_share is None or f.others_share <= OTHERS_BUSY  # not idle for want of a free CPU
        waiting = (0 < workers >= min(f.logical_cores, more) and f.cpu_cores_busy < UNDERUSED * f.logical_cores
                   and idle_cores)  # fmt: skip
        suggest = min(f.logical_cores, 8) if workers == 0 else more if waiting else min(f.logical_cores, more)
        # workers already on every core: more of them would only take turns (it had suggested the num_workers set)
        pin = ", pin_memory=True" if f.device == "cuda" else ""
        why = (
            f"its {workers} loader workers keep only {f.cpu_cores_busy:.1f} of {f.logical_cores} cores busy: they "
            "wait (disk, network), so more of them overlap the waits; "
            if waiting
            else ""
        )
        parallel = (why + f"load data in parallel: DataLoader(num_workers={suggest}, persistent_workers=True{pin}, "
                    "prefetch_factor=4); " if suggest > workers else
                    f"its {workers} loader workers already fill the {f.logical_cores} cores: more would only take "
                    "turns; make each item cheaper: ")  # fmt: skip
        out.append(Finding(
            "input pipeline", "problem",
            f"the loop waited on its DataLoader {f.data_wait_fraction:.0%} of the time "
            f"({f.data_wait_s:.2f} s of the loop's {f.loop_s or f.wall_s:.2f} s, {f.batches} batches; "
            f"num_workers={workers})",
            parallel + "decode and augment ahead of time or on the GPU; a faster disk or cached dataset; until then "
            "a bigger instance will not help" + (" unless it has more cores" if suggest <= workers else ""),
        ))  # fmt: skip
    steps = f.steps or f.batches
    per_step = span / steps
    stepping = judged and steps >= MIN_STEPS and per_step < STEP_OVERHEAD_S and not handoff
    if stepping:
        what = "optimizer steps" if f.steps else "batches"
        out.append(Finding(
            "per-step overhead", "problem",
            f"{steps} {what} in {span:.2f} s: {per_step * 1000:.2f} ms each ({steps / span:.0f}/s)",
            "do more work per step: a bigger batch (scale the learning rate with it), or fewer, larger steps; each "
            "step is mostly its fixed cost (Python, operator dispatch, the optimizer's loop), which a bigger "
            "instance will not shorten",
        ))  # fmt: skip
    # its threads waited for a CPU, and other processes held the cores (a program whose loader workers and torch
    # threads oversubscribe the cores waits too, on itself: not other work to wait out)
    contended = (judged and f.contention is not None and f.contention > CONTENTION_THRESHOLD
                 and (f.others_share is None or f.others_share > OTHERS_BUSY))  # fmt: skip
    if contended:
        held = [f"other processes kept {f.others_share:.0%} of its cores busy"] if f.others_share is not None else []
        held += [f"load average {f.load_average:.1f} on {f.logical_cores} cores"] if f.load_average else []
        load = f" ({'; '.join(held)})" if held else ""
        out.append(Finding(
            "CPU contention", "problem",
            f"the program's threads waited for a CPU {f.contention or 0:.0%} of the time they were ready to run: "
            f"other work held the cores{load}",
            "its step times, data wait and cores busy read worse than the program is: diagnose it again on a quiet "
            "machine (or the one that will run it) before acting on them",
        ))  # fmt: skip
    busy = f.cpu_cores_busy / max(1, f.logical_cores)
    # contended: the cores were busy, with other work; "raise the batch size" or "k processes" would be wrong
    # fewer torch threads than cores, and about that many cores busy: one thread on 2 cores reads 50%, which the
    # busy < 50% rule had passed as "no bottleneck found"
    t = f.torch_threads
    capped = t is not None and t < f.logical_cores and f.cpu_cores_busy < t + 0.5
    if f.device == "cpu" and judged and not (starving or stepping or contended) and (busy < UNDERUSED or capped):
        threads = f"; torch uses {t} thread(s)" if t else ""
        processes = "run k worker processes x t threads (`rightsize plan` sizes that) — or pick a smaller instance"
        # a small batch or fewer torch threads than cores: say so first; else (a batch >= 8 on every core) the
        # processes clause is the whole fix, and must not start with its "or"
        more = (batch or SMALL_BATCH) < SMALL_BATCH or (t or 0) < f.logical_cores
        fix = "raise the batch size (larger GEMMs use more cores) or torch.set_num_threads(cores); or " + processes
        if capped:
            fix = (f"torch.set_num_threads({f.logical_cores}): torch runs {t} thread(s) on {f.logical_cores} cores; "
                   "or " + processes)  # fmt: skip
        out.append(Finding(
            "CPU utilization", "advice",
            f"{f.cpu_cores_busy:.1f} of {f.logical_cores} cores busy on average ({busy:.0%}){threads}",
            fix if more else processes,
        ))  # fmt: skip
    capacity = f.cuda_total_bytes if f.device == "cuda" else f.total_ram_bytes
    peak = f.cuda_peak_bytes if f.device == "cuda" else f.peak_rss_bytes
    if capacity and peak:
        share = peak / capacity
        where = "GPU memory" if f.device == "cuda" else "RAM"
        if share > TIGHT:
            out.append(Finding(
                "memory headroom", "problem", f"peak {peak / 2**30:.2f} GiB is {share:.0%} of {where}",
                "lower the batch size, use mixed precision (bf16/fp16 autocast), activation checkpointing, or a "
                "bigger device (`rightsize memory` finds the smallest that fits)",
            ))  # fmt: skip
        elif share < ROOMY and f.device == "cuda":  # a CPU box's RAM is rarely what a smaller machine saves
            out.append(Finding(
                "memory headroom", "advice", f"peak {peak / 2**30:.2f} GiB is only {share:.0%} of {where}",
                "room for a larger batch (better device utilization), or a smaller, cheaper machine",
            ))  # fmt: skip
    grew = f.rss_end_bytes - f.rss_start_bytes
    if f.rss_start_bytes and grew > GROWTH * f.rss_start_bytes and grew > GROWTH_MIN_BYTES:
        out.append(Finding(
            "memory growth", "problem",
            f"RSS grew from {f.rss_start_bytes / 2**30:.2f} GiB to {f.rss_end_bytes / 2**30:.2f} GiB over the loop "
            "(the mean of its first third to its last third)",
            "tensors kept across steps hold their graphs and activations: keep numbers (losses.append(loss.item()), "
            "not losses.append(loss)) or .detach() what you keep; a longer run will run out of memory",
        ))  # fmt: skip
    if batch is not None and batch < SMALL_BATCH and not starving:
        out.append(Finding(
            "batch size", "advice", f"batch size {batch}",
            f"small batches underuse the hardware: try {SMALL_BATCH * 4} (keep the learning rate scaled) and "
            "compare samples/s with `rightsize bench`",
        ))  # fmt: skip
    if f.device == "cuda":
        if f.steps and f.autocast_entries == 0:
            out.append(Finding("mixed precision", "advice", "no torch.autocast seen on a GPU",
                               "wrap the forward in torch.autocast('cuda', dtype=torch.bfloat16) (fp16 + GradScaler on "
                               "T4/V100): tensor cores, half the activation memory"))  # fmt: skip
        if f.loaders and not any(loader.pin_memory for loader in f.loaders):
            out.append(
                Finding(
                    "host-to-device copies",
                    "advice",
                    "DataLoader pin_memory=False",
                    "pin_memory=True and .to('cuda', non_blocking=True) overlap the copy with compute",
                )
            )
        copies = f.h2d_copies / max(1, f.batches)
        if copies > 8:
            out.append(Finding("host-to-device copies", "advice",
                               f"{copies:.0f} CPU->GPU copies per batch ({f.h2d_bytes / 2**20:.0f} MiB in all)",
                               "batch the copies: move whole batches, keep constants on the GPU"))  # fmt: skip
    if not out:
        seen = f"{f.batches} batches" if f.batches else f"{f.steps} optimizer steps"  # a loop without a DataLoader
        out.append(Finding("loop", "ok",
                           f"{seen}, data wait {f.data_wait_fraction:.0%}, "
                           f"{f.cpu_cores_busy:.1f} cores busy", "no bottleneck found"))  # fmt: skip
    order = {"problem": 0, "advice": 1, "ok": 2}
    return sorted(out, key=lambda x: order[x.severity])
