"""The closest row and the fix it names: the other device class's closest row (not its cheapest), a rule that left a
class out said as such, and an impossible deadline's fix that buys a plan in one edit."""

from __future__ import annotations

from plan_fixtures import BATCHES, small_catalog

from rightsize.plan.explain import explain, rank
from rightsize.plan.options import pair_options
from rightsize.plan.result import Candidate
from rightsize.plan.rules import plan_rules
from rightsize.plan.training import plan_training
from rightsize.plan.verify import NO_SPOT_RATE
from rightsize.profile import ServiceCurve
from rightsize.spec.targets import TrainingTarget


def _train_curve(device: str, per_sample_ms: float, precision: str = "fp16") -> ServiceCurve:
    lat = tuple(20.0 + per_sample_ms * b for b in BATCHES)
    return ServiceCurve(device, precision, BATCHES, lat, (0.05,) * len(BATCHES), "projected")


def _job(name: str, cls: str, per_h: float, hours: float, reasons: list[str], purchase: str = "on-demand") -> Candidate:
    return Candidate(
        instance=name, provider="aws", region="us-east-1", provenance="projected", price_date="2025-06", device=name,
        device_class=cls, precision="bf16", count=1, purchase=purchase,
        cost_usd_per_hour=per_h, feasible=not reasons, runtime_hours=hours, runtime_hours_at_edge=hours * 1.2,
        cost_usd_total=per_h * hours, reasons=reasons, gpus=1 if cls == "gpu" else 0, vcpus=8,
    )  # fmt: skip


def test_the_other_class_names_its_closest_row_not_its_cheapest() -> None:
    """bert-finetune: "no CPU plan is feasible; e.g. ... Standard_D2s_v5 (... spot): misses the deadline: 375 h > 12 h"
    where 3 x c7i.12xlarge ran 7.46 h and missed only at the band's slow edge; the row named was a spot row no spot
    plan takes (no interruption estimate)."""
    rec = _job("a100", "gpu", 4.0, 2.0, [])
    spot = _job("d2s", "cpu", 0.011, 375.0, [NO_SPOT_RATE], purchase="spot")
    slow = _job("d2s_od", "cpu", 0.09, 375.0, ["misses the deadline: 375 h > 12 h"])
    near = _job("c7i", "cpu", 6.4, 7.46, ["misses the deadline at the pessimistic edge ...: 16.1 h > 12 h"])
    ranked = rank([rec, spot, slow, near], "training")
    _, why_not, alt, _ = explain("training", ranked)
    assert alt is near, why_not
    assert (
        why_not[0].startswith("no CPU plan is feasible; the closest, 1 instance on 1x aws c7i")
        and "16.1 h" in why_not[0]
    )


def test_a_class_a_rule_left_out_says_not_planned() -> None:
    """gradient-boosting: "no GPU plan is feasible; e.g. aws g4dn.xlarge ...: GPU rarely helps": a rule left the GPUs
    out, none was found infeasible."""
    cat = small_catalog()
    ranked, _ = plan_rules(cat.instances, "classic_ml", None, 1_000_000, ["on_demand"])
    assert any(c.device_class == "gpu" for c in ranked)
    _, why_not, _, _ = explain("rules", ranked)
    assert why_not[0].startswith("GPU rows not planned: GPU rarely helps: classic_ml"), why_not
    # every CPU row on spot with no interruption estimate: not planned either
    rec = _job("a100", "gpu", 4.0, 2.0, [])
    _, why_not, _, _ = explain("training", [rec, _job("d2s", "cpu", 0.011, 9.0, [NO_SPOT_RATE], purchase="spot")])
    assert why_not[0].startswith("CPU rows not planned: no interruption estimate"), why_not


def test_an_impossible_deadline_names_the_deadline_that_buys_the_fastest_row() -> None:
    """deadline_hours 0.1: "raise deadline_hours to more than 0.144: the shortest spin-up is 8.58 min"; at 0.15 still
    infeasible, then "raise deadline_hours to 0.258". The first fix names the deadline that buys a plan."""
    cat = small_catalog()
    opts = pair_options(cat.instances, [_train_curve("T4", 10.0)], cat.accelerators)

    def planned(deadline: float) -> tuple[list[Candidate], list[str]]:
        t = TrainingTarget(steps=2000, batch_size=16, max_nodes=1, deadline_hours=deadline)
        ranked = rank(plan_training(opts, t, purchase=["on_demand"]), "training")
        return ranked, explain("training", ranked)[0]

    ranked, why = planned(0.05)
    assert not any(c.feasible for c in ranked)
    (fix,) = [w for w in why if w.startswith("to fix")]
    assert "which buys it" in fix and "of it spin-up" in fix, fix
    deadline = float(fix.split("deadline_hours to ")[1].split(" ")[0])
    again, _ = planned(deadline)
    assert any(c.feasible for c in again), fix


def test_rules_other_class_example_unchanged_by_a_cheaper_gpu() -> None:
    """A blanket rule's example is still the cheapest of the class it left out."""
    rec = _job("c7i", "cpu", 1.0, 2.0, [])
    gpus = [_job(f"g{i}", "gpu", p, 1.0, ["GPU rarely helps: classic_ml is branchy"]) for i, p in ((1, 3.0), (2, 0.5))]
    _, why_not, alt, _ = explain("training", [rec, *gpus])
    assert alt is not None and alt.instance == "g2" and why_not[0].startswith("GPU rows not planned"), why_not
