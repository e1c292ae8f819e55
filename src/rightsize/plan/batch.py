"""Offline batch planner: the best-throughput batch per instance, then how many instances finish the
items before the deadline, the runtime and the cost; CPU fleets and GPUs side by side.

Per option (instance type x precision):

    b*   = argmax_b b / t(b) over measured batch sizes that fit memory
    thr  = per_instance x b* / t(b*)            samples/s of one instance (one replica per GPU;
                                                 a CPU instance runs one process on all its cores)
    n    = ceil(items / (thr x (deadline - spin-up)))
    time = spin-up + items / (n thr);  cost = n x price x time

With an ``InputStage`` (the CPU work around inference that ``rightsize pipeline`` measured: read,
preprocess, write) the instance's rate is bounded by its input pipeline too:

    feed = cores x (instance GHz / local GHz) / core_s_per_item
    CPU instance   thr' = 1 / (1/thr + 1/feed)     (the stages share the cores)
    GPU instance   thr' = min(thr, feed)           (the host feeds the GPUs; the slower side bounds it)

Variants with 2n and 4n instances show the time-vs-cost trade-off (more instances: less time, a
little more money for their spin-up). Spot: items are independent, so a checkpoint is only flushing
results (``CHECKPOINT_MIN``), a restart is the replacement's spin-up, and an interruption stalls only its own
instance (``spot_variant(independent=True)``): the others take over its items from the shared queue.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from rightsize.catalog.model import CpuFamily, Instance
from rightsize.plan.coldstart import spin_up
from rightsize.plan.job_costs import copy_candidate, finish, spin_up_miss, spot_odds, spot_variant
from rightsize.plan.options import GIB, Option
from rightsize.plan.result import Batching, Candidate
from rightsize.spec.targets import BatchTarget, ColdStart
from rightsize.units import format_hours

__all__ = ["CHECKPOINT_MIN", "InputStage", "best_batch", "plan_batch"]

CHECKPOINT_MIN = 0.5  # minutes to flush finished results (assumption; CheckFreq, FAST'21: checkpoints <= 3.5%)


@dataclass(frozen=True)
class InputStage:
    """CPU work per item around inference (read + preprocess + write), measured where the pipeline ran.

    ``core_s_per_item``: CPU core-seconds per item there; ``local_ghz``: that CPU's sustained clock (None:
    the catalog does not know it, so every instance's cores count as those cores)."""

    core_s_per_item: float
    local_ghz: float | None = None

    def feed_per_s(self, inst: Instance, cpus: Mapping[str, CpuFamily]) -> float:
        """Items/s the instance's cores sustain through the input stages alone."""
        if self.core_s_per_item <= 0:
            return math.inf
        fam = cpus.get(inst.cpu_family or "")
        ratio = fam.sustained_ghz / self.local_ghz if fam is not None and self.local_ghz else 1.0
        return inst.cores * ratio / self.core_s_per_item

    def bound(self, inst: Instance, cpus: Mapping[str, CpuFamily], thr: float) -> tuple[float, str]:
        """(throughput with the input stages, what bounds it) for an instance whose inference alone does ``thr``."""
        feed = self.feed_per_s(inst, cpus)
        if inst.accelerator is None:
            return 1.0 / (1.0 / thr + 1.0 / feed), f"read/preprocess/write share the cores ({feed:,.0f} items/s alone)"
        if feed < thr:
            return feed, f"bound by the CPU input pipeline ({feed:,.0f} items/s), not the GPU ({thr:,.0f})"
        return thr, f"bound by inference; the input pipeline could feed {feed:,.0f} items/s"


def best_batch(opt: Option) -> int | None:
    """The measured batch size with the highest throughput that fits memory (None: nothing fits)."""
    cap = opt.curve.max_batch if opt.memory is None else opt.memory.max_batch(opt.usable_bytes)
    sizes = [b for b in opt.curve.batch_sizes if b <= cap]
    if not sizes and cap >= 1:
        sizes = [cap]
    return max(sizes, key=opt.curve.throughput_per_s) if sizes else None


def plan_batch(
    options: Sequence[Option],
    target: BatchTarget,
    purchase: Sequence[str] = ("on_demand", "spot"),
    cold: ColdStart | None = None,
    rate_of: Callable[[Instance], float | None] | None = None,
    spot_mc_top: int = 16,
    seed: int = 0,
    input_stage: InputStage | None = None,
    cpus: Mapping[str, CpuFamily] | None = None,
) -> list[Candidate]:
    """Candidates for ``target`` over ``options``; ``input_stage`` (with the catalog's ``cpus`` for clocks)
    bounds each instance by its input pipeline (``rightsize pipeline``)."""
    cold = cold or ColdStart.model_validate({})
    out: list[Candidate] = []
    work: dict[int, float] = {}
    for opt in options:
        for c, hours in _option(opt, target, purchase, cold, rate_of, input_stage, cpus or {}):
            out.append(c)
            work[id(c)] = hours
    # restart: each candidate's own spin-up (restart_hours None); the longest of all (a GPU's 515 s) had judged CPU
    # spot rows, and their deadline odds fell from 96% to 49% when a GPU was in the instance filter
    out += spot_odds(out, work, target.deadline_hours, target.budget_usd, CHECKPOINT_MIN / 60, None, spot_mc_top, seed)
    return out


def _option(
    opt: Option,
    target: BatchTarget,
    purchase: Sequence[str],
    cold: ColdStart,
    rate_of: Callable[[Instance], float | None] | None,
    input_stage: InputStage | None = None,
    cpus: Mapping[str, CpuFamily] | None = None,
) -> list[tuple[Candidate, float]]:
    inst = opt.instance
    up = spin_up(cold, inst.accelerator is not None)
    base = opt.candidate(cold_start_s=up.total_s, kind_hint="batch")
    b = best_batch(opt)
    if b is None:
        need = opt.need_bytes(1) or 0.0
        base.reasons.append(
            f"does not fit memory: batch 1 needs {need / GIB:.1f} GiB, "
            f"{opt.device} has {opt.usable_bytes / GIB:.1f} GiB usable"
        )
        return [(base, 0.0)]
    thr = opt.per_instance * opt.curve.throughput_per_s(b)  # samples/s per instance
    base.band = opt.curve.band_at(b)  # a projected curve's band at the batch size it runs
    if input_stage is not None:
        thr, bound = input_stage.bound(inst, cpus or {}, thr)
        base.notes.append(bound)
    base.batching = Batching(b, 0.0)
    opt.size_memory(base, b)
    avail_h = target.deadline_hours - up.total_hours
    if avail_h <= 0:
        base.reasons.append(spin_up_miss(up.total_hours, target.deadline_hours))  # in one unit, as training's
        base.notes.append(f"spin-up {up.describe()}")
        return [(base, 0.0)]
    # sized so the slow edge of a projected curve's band still finishes in time (see jobs.finish)
    thr_edge = thr / max(1.0, base.band[1])
    n_min = max(1, math.ceil(target.items / (thr_edge * avail_h * 3600.0) - 1e-9))
    counts = [n for n in dict.fromkeys((n_min, 2 * n_min, 4 * n_min)) if n <= target.max_instances] or [n_min]
    out: list[tuple[Candidate, float]] = []
    for n in counts:
        work_h = target.items / (n * thr) / 3600.0
        c = copy_candidate(base, "on-demand", inst.on_demand_usd_per_hour * n)
        c.count = n
        c.gpus = n * opt.per_instance if inst.accelerator else 0
        c.throughput_per_s = n * thr
        c.notes.append(
            f"batch {b} at {thr:,.0f} samples/s per instance x {n}; {format_hours(work_h)} of work + spin-up "
            f"{up.describe()}"
        )
        if n > target.max_instances:
            c.reasons.append(f"needs {n} instances > max_instances {target.max_instances}")
        sized = copy_candidate(c, "on-demand", c.cost_usd_per_hour)  # before on-demand's deadline and budget
        if "on_demand" in purchase:
            finish(c, work_h + up.total_hours, target.deadline_hours, target.budget_usd, fixed_hours=up.total_hours)
            if n > target.max_instances:
                c.feasible = False
            out.append((c, work_h))
        if "spot" in purchase:  # judged on its own time and cost, not on-demand's reasons ("over budget: $1.16")
            rate = rate_of(inst) if rate_of else None
            sc = spot_variant(
                sized, inst, n, work_h, up.total_hours, CHECKPOINT_MIN / 60.0, up.total_hours, rate,
                target.deadline_hours, target.budget_usd, independent=True,
            )  # fmt: skip
            if sc is not None:
                if n > target.max_instances:
                    sc.feasible = False
                out.append((sc, work_h))
    return out
