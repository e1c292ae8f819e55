"""A spot-only online plan's words: the cheapest instance it left unsized, its spare, plain interruption counts."""

from __future__ import annotations

import dataclasses

from plan_fixtures import cpu_curve, small_catalog

from rightsize.plan.planner import plan
from rightsize.plan.result import PlanResult
from rightsize.spec import Workload
from rightsize.units import format_usd


def _spot_plan(unrated: str = "", rate: float | None = None, workers: int = 1) -> PlanResult:
    rows = tuple(
        dataclasses.replace(i, spot_interruption=None) if i.instance_type == unrated else i
        for i in small_catalog().instances
    )
    targets: dict[str, object] = {"online": {"rate_per_s": 20, "latency": {"percentile": 95, "bound_ms": 200}},
                                  "purchase": ["spot"]}  # fmt: skip
    if rate is not None:
        targets["interruptions_per_hour"] = rate
    w = Workload.model_validate({"name": "s", "model": "distilbert", "targets": targets})
    curves = [dataclasses.replace(cpu_curve(n, 20.0, 15.0), workers=workers) for n in ("c.2x", "c.4x")]
    return plan(w, curves, dataclasses.replace(small_catalog(), instances=rows))


def test_the_cheapest_instance_left_unsized_is_named_with_its_spot_price_and_the_field_that_plans_it() -> None:
    """sentiment-api with purchase: [spot] recommended 2 x g6.xlarge at $0.81/h while every CPU instance was left out
    for want of an interruption estimate, only counted: 2-vCPU Standard_D2s_v5 at $0.011/h spot went unnamed (with
    interruptions_per_hour: 0.05, 3 of them served it at $0.032/h)."""
    res = _spot_plan(unrated="c.2x")  # c.2x ($0.15/h spot) has no bucket; c.4x ($0.30/h spot) has one
    rec = res.recommendation
    assert rec is not None and rec.instance == "c.4x" and rec.cost_usd_per_hour >= 0.60
    [note] = [n for n in res.warnings if "left out" in n]
    assert (
        "the cheapest, aws c.2x (8 vCPU), costs $0.15/h spot, so a plan on it would start at $0.30/h (a serving "
        f"instance and the spare), against the recommendation's {format_usd(rec.cost_usd_per_hour)}/h"
    ) in note
    assert note.endswith("set targets.interruptions_per_hour to a rate you trust to plan them (or add on_demand to "
                         "targets.purchase)")  # fmt: skip


def test_an_unsized_instance_that_could_not_undercut_names_no_comparison() -> None:
    res = _spot_plan(unrated="c.4x")  # c.4x's start ($0.60/h) is above c.2x's plan
    rec = res.recommendation
    assert rec is not None and rec.instance == "c.2x" and rec.cost_usd_per_hour < 0.60
    [note] = [n for n in res.warnings if "left out" in n]
    assert "the cheapest, aws c.4x (16 vCPU), costs $0.30/h spot, so a plan on it would start at $0.60/h (a " \
        "serving instance and the spare); set targets" in note  # fmt: skip


def test_the_spare_is_named_among_the_replicas_that_meet_the_slo() -> None:
    """ "meets p95 <= 80 ms with 2 replica(s)" counted the spot spare as serving."""
    res = _spot_plan()
    rec = res.recommendation
    assert rec is not None and rec.purchase == "spot" and rec.count >= 2
    assert f"meets p95 <= 200 ms with {rec.replicas} replica(s), one of them a spare for interruptions" in res.why
    res = _spot_plan(workers=3)  # the spare is an instance: all its worker processes
    packed = res.recommendation
    assert packed is not None and packed.workers_per_instance == 3
    assert f"meets p95 <= 200 ms with {packed.replicas} replica(s), 3 of them (one instance) spares for " \
        "interruptions" in res.why  # fmt: skip


def test_on_demand_replicas_have_no_spare_words() -> None:
    targets = {"online": {"rate_per_s": 20, "latency": {"percentile": 95, "bound_ms": 200}}}
    w = Workload.model_validate({"name": "s", "model": "distilbert", "targets": targets})
    res = plan(w, [cpu_curve("c.2x", 20.0, 15.0)], small_catalog())
    assert res.recommendation is not None
    assert f"meets p95 <= 200 ms with {res.recommendation.replicas} replica(s)" in res.why


def test_interruption_counts_print_plain_digits() -> None:
    """0.05/h over 3 instances read "about 1.1e+02 a month"; a Spot Advisor rate "3.5e-05 interruptions/h"."""
    from rightsize.plan.planner import _plain

    assert [_plain(x) for x in (109.5, 1234.5, 0.051, 0.05, 3.5e-05, 1.5, 10.0, 0.0)] == \
        ["110", "1,234", "0.051", "0.05", "0.000035", "1.5", "10", "0"]  # fmt: skip
    rec = _spot_plan(rate=0.1).recommendation
    assert rec is not None
    month = 0.1 * rec.count * 730
    assert month >= 100  # where :.2g turns to an exponent
    assert any(f"{0.1 * rec.count:g}/h over its {rec.count} instance(s) (about {month:,.0f} a month)" in n
               for n in rec.notes)  # fmt: skip
    assert not any("e+" in n or "e-0" in n for n in rec.notes)
