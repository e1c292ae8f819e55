"""The planner's front door: dispatch by target, ranking, explanation, errors."""

from __future__ import annotations

import dataclasses
import json

import pytest
from plan_fixtures import cpu_curve, gpu_curve, small_catalog

from rightsize.errors import NotFoundError, SpecError
from rightsize.plan import MemoryModel, plan
from rightsize.spec import parse_spec

ONLINE = {"online": {"rate_per_s": 10, "latency": {"percentile": 95, "bound_ms": 80}}}


def test_online_plan_recommends_cpu_and_explains_the_idle_gpu() -> None:
    w = parse_spec({"model": "distilbert", "targets": ONLINE})
    curves = [cpu_curve("c.2x", 20.0, 15.0), cpu_curve("c.4x", 11.0, 8.0), gpu_curve("T4", 4.0, 0.2)]
    r = plan(w, curves, small_catalog(), {"fp32": MemoryModel(3e8, 2e6), "fp16": MemoryModel(1.5e8, 1e6)})
    assert r.kind == "online" and r.recommendation is not None
    assert r.recommendation.instance == "c.2x" and r.recommendation.device_class == "cpu"
    assert r.candidates[0] is r.recommendation
    assert r.alternative is not None and r.alternative.device_class == "gpu"
    assert any("overbuying" in line for line in r.why_not)
    assert "p95" in r.why[0] and "$0.34/h" in r.why[0]
    assert r.pareto and r.pareto[0] is r.recommendation
    assert r.price_date == "2025-06"
    d = json.loads(json.dumps(r.to_dict(top=3), allow_nan=False))
    assert d["recommendation"]["instance"] == "c.2x" and len(d["candidates"]) == 3


def test_nothing_feasible_says_why() -> None:
    w = parse_spec({"model": "distilbert", "targets": {"online": {"rate_per_s": 10, "latency": {"bound_ms": 5}}}})
    r = plan(w, [cpu_curve("c.2x", 20.0, 15.0)], small_catalog())
    assert r.recommendation is None and not r.feasible
    assert "t(1) alone exceeds the SLO" in r.why[0]
    assert r.infeasible_summary == {"t(1) alone exceeds the SLO": 1}


def test_training_and_rules_dispatch() -> None:
    tr = parse_spec(
        {"model": "bert-base", "mode": "training", "targets": {"training": {"steps": 1000, "batch_size": 16}}}
    )
    r = plan(tr, [gpu_curve("T4", 50.0, 5.0, precision="fp16")], small_catalog())
    assert r.kind == "training" and r.recommendation is not None and r.recommendation.runtime_hours
    assert "steps" in r.assumptions and "scaling" in r.assumptions
    rules = parse_spec({"model": "simplenet", "targets": {"kind": "classic_ml", "rows": 1_000_000}})
    rr = plan(rules, [], small_catalog())
    assert rr.kind == "rules" and rr.recommendation is not None and rr.recommendation.device_class == "cpu"


def test_user_errors() -> None:
    with pytest.raises(SpecError, match="targets"):
        plan(parse_spec({"model": "distilbert"}), [], small_catalog())
    with pytest.raises(SpecError, match="mode"):
        plan(parse_spec({"model": "bert-base", "targets": {"training": {"steps": 5}}}), [], small_catalog())
    with pytest.raises(SpecError, match=r"^targets\.providers\[0\]: 'oracle' is not in the catalog"):
        plan(parse_spec({"model": "distilbert", "targets": {**ONLINE, "providers": ["oracle"]}}), [], small_catalog())
    cat = small_catalog()  # every entry known, none of them together: the filters match no instance
    two = dataclasses.replace(cat, instances=(*cat.instances, dataclasses.replace(cat.instances[0], provider="gcp",
                                                                                   instance_type="n2-x")))  # fmt: skip
    with pytest.raises(NotFoundError, match="providers"):
        plan(parse_spec({"model": "distilbert", "targets": {**ONLINE, "providers": ["gcp"], "instances": ["c.2x"]}}),
             [], two)  # fmt: skip
    with pytest.raises(NotFoundError, match="no service curve"):
        plan(parse_spec({"model": "distilbert", "targets": ONLINE}), [cpu_curve("other", 1, 1)], small_catalog())


def test_cold_start_notes_and_spin_up() -> None:
    from rightsize.plan.coldstart import GPU_IMAGE_FACTOR, spin_up
    from rightsize.spec.targets import ColdStart

    cold = ColdStart(scale_from_zero=True, min_warm_replicas=0)
    assert spin_up(cold, gpu=False).total_s == pytest.approx(25 + 120 + 10)
    assert spin_up(cold, gpu=True).image_pull_s == pytest.approx(120 * GPU_IMAGE_FACTOR)  # CUDA images are big
    w = parse_spec(
        {"model": "distilbert", "targets": {**ONLINE, "cold_start": {"scale_from_zero": True, "min_warm_replicas": 0}}}
    )
    r = plan(w, [cpu_curve("c.2x", 20.0, 15.0)], small_catalog())
    assert r.recommendation is not None and r.recommendation.cold_start_s == pytest.approx(155.0)
    assert any("first request after idle waits 155 s" in n for n in r.recommendation.notes)
