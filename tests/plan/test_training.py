"""Training planner: memory fit with accumulation, data-parallel scaling, spot, Pareto over cluster size."""

from __future__ import annotations

import math

import pytest
from plan_fixtures import BATCHES, instance, small_catalog

from rightsize.catalog.model import Catalog
from rightsize.plan.explain import pareto
from rightsize.plan.options import GIB, MemoryModel, pair_options
from rightsize.plan.training import ScalingModel, node_counts, plan_training, training_steps
from rightsize.profile import ServiceCurve
from rightsize.spec.targets import TrainingTarget


def _train_curve(device: str, per_sample_ms: float, precision: str, instance: str | None = None) -> ServiceCurve:
    lat = tuple(20.0 + per_sample_ms * b for b in BATCHES)  # ms per optimizer step at batch b
    prov = "measured" if instance else "projected"
    return ServiceCurve(device, precision, BATCHES, lat, (0.05,) * len(BATCHES), prov, instance=instance)


def test_scaling_defaults_reproduce_their_sources() -> None:
    s = ScalingModel()
    assert 8 * s.efficiency(8, 1, "fp32") == pytest.approx(7.72, abs=0.02)  # NVIDIA DLE RN50 TF32 8xA100
    assert 8 * s.efficiency(8, 1, "bf16") == pytest.approx(6.72, abs=0.02)  # same, AMP
    assert s.efficiency(8, 64, "fp32") / s.efficiency(8, 1, "fp32") == pytest.approx(0.90, abs=0.01)  # Horovod 512
    assert ScalingModel.uniform(0.9).efficiency(1, 4, "fp32") == pytest.approx(0.81)


def test_steps_and_node_counts() -> None:
    t = TrainingTarget(dataset_size=1000, epochs=3, batch_size=32)
    assert training_steps(t) == math.ceil(3000 / 32)
    assert node_counts(8) == [1, 2, 3, 4, 6, 8]
    assert node_counts(64)[-3:] == [16, 32, 64]


def test_accumulation_when_the_batch_does_not_fit() -> None:
    cat = small_catalog()
    curves = [_train_curve("T4", 10.0, "fp32")]
    # 110M params x 16 B (AdamW fp32) ~ 1.64 GiB fixed; 1 GiB of activations per sample
    memory = {"fp32": MemoryModel(fixed_bytes=110e6 * 16, per_sample_bytes=GIB)}
    opts = pair_options(cat.instances, curves, cat.accelerators, memory)
    t = TrainingTarget(steps=1000, batch_size=32, max_nodes=1)
    (c,) = [c for c in plan_training(opts, t, purchase=["on_demand"]) if c.count == 1]
    usable = opts[0].usable_bytes
    fit = int((usable - 110e6 * 16) // GIB)
    assert c.grad_accumulation == math.ceil(32 / fit)
    micro = math.ceil(32 / c.grad_accumulation)
    assert c.batching is not None and c.batching.max_batch == micro
    # t(b) = 20 + 10 b per micro-batch: the 32 samples split as evenly as they go (11, 11, 10), not 3 x 11 = 33
    compute_h = 1000 * (c.grad_accumulation * 20.0 + 10.0 * 32) / 3.6e6
    assert c.runtime_hours == pytest.approx(compute_h + (c.cold_start_s or 0) / 3600)
    assert c.cost_usd_total == pytest.approx(c.runtime_hours * 0.53)


def test_weights_that_never_fit_say_why() -> None:
    cat = small_catalog()
    memory = {"fp32": MemoryModel(fixed_bytes=40 * GIB, per_sample_bytes=1e6)}
    opts = pair_options(cat.instances, [_train_curve("T4", 1.0, "fp32")], cat.accelerators, memory)
    (c,) = plan_training(opts, TrainingTarget(steps=10, batch_size=8), purchase=["on_demand"])
    assert not c.feasible and c.reasons[0].startswith("does not fit memory")


def test_more_nodes_less_time_more_money_and_a_pareto_frontier() -> None:
    big = instance("p.8x", 8.0, vcpus=96, ram_gib=1152, acc="A100-80GB", count=8)
    cat = Catalog(small_catalog().accelerators, {}, (big,))
    opts = pair_options(cat.instances, [_train_curve("A100-80GB", 2.0, "bf16")], cat.accelerators)
    t = TrainingTarget(steps=300_000, batch_size=512, max_nodes=8, deadline_hours=12)
    cands = plan_training(opts, t, purchase=["on_demand"])
    by_nodes = {c.count: c for c in cands}
    assert by_nodes[1].runtime_hours > by_nodes[2].runtime_hours > by_nodes[8].runtime_hours  # type: ignore[operator]
    assert by_nodes[1].cost_usd_total < by_nodes[8].cost_usd_total  # type: ignore[operator]
    assert not by_nodes[1].feasible and "misses the deadline" in by_nodes[1].reasons[0]
    front = pareto(cands, "training")
    assert len(front) >= 3
    costs = [c.cost_usd_total for c in front]
    times = [c.runtime_hours for c in front]
    assert costs == sorted(costs) and times == sorted(times, reverse=True)  # type: ignore[type-var]


def test_spot_and_mixed_candidates() -> None:
    cat = small_catalog()
    opts = pair_options(cat.instances, [_train_curve("T4", 10.0, "fp16")], cat.accelerators)
    t = TrainingTarget(steps=20_000, batch_size=16, max_nodes=1, deadline_hours=30)
    cands = plan_training(opts, t, purchase=["on_demand", "spot"], rate_of=lambda inst: 0.5)  # an interruption / 2 h
    od = next(c for c in cands if c.purchase == "on-demand")
    spot = next(c for c in cands if c.purchase == "spot")
    assert spot.spot is not None and spot.spot.p_meet_deadline is not None
    assert spot.runtime_hours > od.runtime_hours  # type: ignore[operator]
    assert spot.spot.checkpoint_interval_min == pytest.approx(math.sqrt(2 * 5 / 60 * 2) * 60, rel=0.3)
    assert spot.cost_usd_per_hour == pytest.approx(0.19)
    mixed = [c for c in cands if c.purchase == "mixed"]
    if mixed:  # only when spot alone is not a sure thing
        assert mixed[0].spot is not None and (mixed[0].spot.p_meet_deadline or 0) >= spot.spot.p_meet_deadline


def test_a_mixed_plan_bills_every_hour_it_runs_at_no_less_than_the_spot_price() -> None:
    """Its expected hours include the first spin-up; its cost had left that spin-up out (a mixed plan read cheaper
    than spot on the same fleet, and was recommended)."""
    cat = small_catalog()
    opts = pair_options(cat.instances, [_train_curve("T4", 10.0, "fp16")], cat.accelerators)
    t = TrainingTarget(steps=20_000, batch_size=16, max_nodes=1, deadline_hours=4.0)
    mixed = [c for c in plan_training(opts, t, purchase=["on_demand", "spot"], rate_of=lambda inst: 1.0)
             if c.purchase == "mixed"]  # fmt: skip
    assert mixed
    for m in mixed:  # the on-demand share of its hours only adds to this floor
        assert m.cost_usd_total >= m.runtime_hours * m.cost_usd_per_hour  # type: ignore[operator]
        assert m.spot is not None and m.cost_usd_total == m.spot.expected_cost_usd


def test_int8_curves_are_not_trained() -> None:
    cat = small_catalog()
    opts = pair_options(cat.instances, [_train_curve("T4", 1.0, "int8")], cat.accelerators)
    assert plan_training(opts, TrainingTarget(steps=10, batch_size=8)) == []


def test_a_deadline_shorter_than_the_spin_up_says_so() -> None:
    """A 3-minute deadline listed "misses the deadline" on every row and never said spin-up alone is longer."""
    cat = small_catalog()
    opts = pair_options(cat.instances, [_train_curve("T4", 10.0, "fp16")], cat.accelerators)
    t = TrainingTarget(steps=10, batch_size=16, max_nodes=1, deadline_hours=0.05)
    (od,) = [c for c in plan_training(opts, t, purchase=["on_demand"]) if c.purchase == "on-demand"]
    assert not od.feasible and od.reasons[0] == "spin-up alone (8.58 min) exceeds the 3 min deadline"
