"""`rightsize memory` and `rightsize plan` share one GPU memory budget: they agree on what fits."""

from __future__ import annotations

from plan_fixtures import gpu_curve, small_catalog

from rightsize.estimate.memory_tiers import tier_fits
from rightsize.memory_budget import GIB, gpu_fits, usable_gpu_bytes
from rightsize.plan.options import MemoryModel, pair_options


def test_memory_and_plan_agree_at_the_edge_of_a_t4() -> None:
    cat = small_catalog()
    assert usable_gpu_bytes(16 * GIB) == 0.9 * 16 * GIB
    for total_gib in (13.0, 14.3, 14.4, 14.5, 15.9):
        total = int(total_gib * GIB)
        memory = {"fp16": MemoryModel(fixed_bytes=total, per_sample_bytes=0)}  # the estimate's whole total
        (opt,) = pair_options(cat.instances[2:3], [gpu_curve("T4", 5.0, 0.5)], cat.accelerators, memory)
        plan_fits = opt.memory is not None and opt.memory.max_batch(opt.usable_bytes) >= 1
        assert plan_fits == tier_fits(total, 16) == gpu_fits(total, 16 * GIB), total_gib
