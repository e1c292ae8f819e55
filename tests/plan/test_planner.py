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


def test_filters_that_match_nothing_together_say_where_the_instances_are() -> None:
    """`providers: [gcp]` + `regions: [us-east-1]` said only "widen the filters", while `rightsize catalog` with the
    same filters names each provider's regions; and `instances: [aws:c.2x]`, as the plan table prints it, was
    refused."""
    cat = small_catalog()
    two = dataclasses.replace(cat, instances=(*cat.instances, dataclasses.replace(cat.instances[0], provider="gcp",
                              region="us-east4", instance_type="n2-x")))  # fmt: skip
    aws = cat.instances[0].provider
    spec = {"model": "distilbert", "targets": {**ONLINE, "providers": ["gcp"], "regions": [cat.instances[0].region]}}
    with pytest.raises(NotFoundError, match=r"^no catalog instance matches targets\.providers/regions/instances "
                       r"\(gcp: cpu in us-east4\); widen the filters"):  # fmt: skip
        plan(parse_spec(spec), [], two)
    w = parse_spec({"model": "distilbert", "targets": {**ONLINE, "instances": [f"{aws}:c.2x"]}})
    r = plan(w, [cpu_curve("c.2x", 20.0, 15.0)], two)
    assert r.recommendation is not None and r.recommendation.instance == "c.2x"


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


def test_a_projected_option_cheaper_at_its_bands_centre_is_named() -> None:
    """Projected options are sized at their band's slow edge, a measured one at its timing: the family measured here
    won every CPU plan (c6i.large at $0.085/h never beat c7a.large at $0.103/h) and nothing said a cheaper one might
    do at the band's centre."""
    from plan_fixtures import BATCHES, instance

    from rightsize.profile import ServiceCurve

    cat = small_catalog()
    cat = dataclasses.replace(cat, instances=(*cat.instances, instance("c.cheap", 0.20, vcpus=8)))
    lat = tuple(30.0 + 15.0 * (b - 1) for b in BATCHES)  # 30 ms at the centre, 60 ms x2 at the slow edge
    cheap = ServiceCurve("cpu:c.cheap", "fp32", BATCHES, lat, (0.1,) * len(BATCHES), "projected", 0.5, 2.0,
                         instance="c.cheap")  # fmt: skip
    online = {"rate_per_s": 10, "latency": {"percentile": 95, "bound_ms": 50}}
    w = parse_spec({"model": "distilbert", "targets": {"online": online}})
    r = plan(w, [cpu_curve("c.4x", 11.0, 8.0), cheap], cat)
    assert r.recommendation is not None and r.recommendation.instance == "c.4x"
    assert not next(c for c in r.candidates if c.instance == "c.cheap").feasible  # 60 ms+ at the slow edge
    [note] = [n for n in r.warnings if n.startswith("projected options are sized at the slow edge")]
    assert "at the band's centre, aws c.cheap x2 (fp32) would meet the SLO for $0.40/h against $0.68/h" in note
    measured = dataclasses.replace(cheap, provenance="measured", band_lo=1.0, band_hi=1.0)
    r2 = plan(w, [cpu_curve("c.4x", 11.0, 8.0), measured], cat)  # measured and cheaper: the pick, nothing to add
    assert r2.recommendation is not None and r2.recommendation.instance == "c.cheap"
    assert not [n for n in r2.warnings if "band's centre" in n]
    # the shortlist is priced as the plan buys: on demand here, so a cheap spot price does not put a dear instance
    # on it (D4s_v5s at $0.19/h on demand had crowded out F2s_v2 at $0.085/h)
    from rightsize.plan.options import pair_options
    from rightsize.plan.planner import _could_undercut

    spotty = instance("c.spotty", 0.90, vcpus=8, spot=0.05, bucket="<5%")
    cat2 = dataclasses.replace(cat, instances=(*cat.instances, spotty))
    dear = dataclasses.replace(cheap, device="cpu:c.spotty", instance="c.spotty")
    curves = [cpu_curve("c.4x", 11.0, 8.0), cheap, dear]
    options = pair_options(cat2.instances, curves, cat2.accelerators)
    measured_best = r.candidates[0]
    assert measured_best.provenance == "measured"
    shortlist = {o.instance.instance_type for o in _could_undercut(options, [measured_best], ["on_demand"])}
    assert shortlist == {"c.cheap"}
    assert "c.spotty" in {o.instance.instance_type for o in _could_undercut(options, [measured_best], ["spot"])}


def test_the_busy_lines_rate_is_in_samples() -> None:
    """The busy line divided samples/s of capacity by requests/s: 4-sample requests read 7.4x of room, not 1.9x."""
    from rightsize.plan.planner import _samples_per_s
    from rightsize.spec.targets import OnlineTarget

    latency = {"percentile": 95, "bound_ms": 100}
    assert _samples_per_s(OnlineTarget(rate_per_s=80, latency=latency, request_samples=4)) == 320  # type: ignore[arg-type]
    mix = [{"samples": 1, "share": 0.75}, {"samples": 9, "share": 0.25}]
    assert _samples_per_s(OnlineTarget(rate_per_s=10, latency=latency, request_mix=mix)) == 30  # type: ignore[arg-type]
    assert _samples_per_s(None) is None


def test_training_scaling_assumption_names_the_all_reduce_when_gradients_are_known() -> None:
    """With gradient bytes each multi-worker step pays their all-reduce (BERT-base: scaling_efficiency 0.06-0.16
    over 10-25 Gb/s), yet assumptions.scaling named the per-doubling constants 0.988 / 0.983 that it never used."""
    tr = parse_spec(
        {"model": "bert-base", "mode": "training", "targets": {"training": {"steps": 1000, "batch_size": 16}}}
    )
    curves = [gpu_curve("T4", 50.0, 5.0, precision="fp16")]
    with_grads = plan(tr, curves, small_catalog(), {"fp16": MemoryModel(2e9, 50e6, gradient_bytes=440e6)})
    words = with_grads.assumptions["scaling"]
    assert "all-reduce of the model's 419.6 MiB of gradients" in words and "per doubling" not in words
    without = plan(tr, curves, small_catalog(), {"fp16": MemoryModel(2e9, 50e6)})
    assert without.assumptions["scaling"].startswith("per doubling: in-node 0.988 (AMP 0.944), across nodes 0.983")


def test_a_specs_own_scaling_efficiency_is_used_where_gradients_are_known() -> None:
    """targets.training.scaling_efficiency was silently ignored whenever the model's gradient size was known (the
    all-reduce model ran instead): the spec's per-doubling efficiency is now what scales its workers."""
    training = {"steps": 1000, "batch_size": 16, "scaling_efficiency": 0.9, "max_nodes": 2}
    tr = parse_spec({"model": "bert-base", "mode": "training", "targets": {"training": training}})
    curves = [gpu_curve("T4", 50.0, 5.0, precision="fp16")]
    result = plan(tr, curves, small_catalog(), {"fp16": MemoryModel(2e9, 50e6, gradient_bytes=440e6)})
    assert result.assumptions["scaling"].startswith("per doubling: in-node 0.9 (AMP 0.9), across nodes 0.9; spec")
    several = [c.scaling_efficiency for c in result.candidates if c.count > 1 and c.scaling_efficiency]
    del training["scaling_efficiency"]
    tr = parse_spec({"model": "bert-base", "mode": "training", "targets": {"training": training}})
    modelled = plan(tr, curves, small_catalog(), {"fp16": MemoryModel(2e9, 50e6, gradient_bytes=440e6)})
    all_reduce = [c.scaling_efficiency for c in modelled.candidates if c.count > 1 and c.scaling_efficiency]
    # 2 nodes at 0.9 per doubling: 0.65 with the smaller batch per worker; the all-reduce of 440 MB read far less
    assert several and set(several) == {0.65} and all_reduce and max(all_reduce) < 0.3
