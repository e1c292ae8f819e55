"""CPU inference plans always try int8 for zoo models (static for a conv net, dynamic otherwise); nothing else."""

from __future__ import annotations

from typing import Any

import pytest

from rightsize.spec import Workload
from rightsize.workflows.precisions import with_cpu_serving_precisions

ONLINE = {"online": {"rate_per_s": 10, "latency": {"percentile": 95, "bound_ms": 100}}}
BATCH = {"batch": {"items": 100000, "deadline_hours": 2}}


def _spec(model: str = "resnet50", targets: dict[str, Any] | None = None, **over: Any) -> Workload:
    return Workload.model_validate({"name": "t", "model": model, "precisions": ["fp32"], "devices": ["cpu"],
                                    "targets": ONLINE if targets is None else targets} | over)  # fmt: skip


@pytest.mark.parametrize("targets", [ONLINE, BATCH])
def test_online_and_batch_cpu_plans_add_int8_and_say_which_scheme(targets: dict[str, Any]) -> None:
    cnn, notes = with_cpu_serving_precisions(_spec("resnet50", targets))
    assert cnn.precisions == ["fp32", "int8"] and "static quantization: convolutions too" in notes[0]
    text, notes = with_cpu_serving_precisions(_spec("distilbert", targets))
    assert text.precisions == ["fp32", "int8"] and "dynamic quantization of Linear layers" in notes[0]


def test_nothing_is_added_where_int8_does_not_apply() -> None:
    unchanged = [
        _spec(mode="training", targets={"training": {"epochs": 1, "dataset_size": 1000}}),  # no int8 training
        _spec(devices=["cuda"]),  # int8 is CPU-only here
        _spec(precisions=["int8"]),  # already asked for
    ]
    for w in unchanged:
        assert with_cpu_serving_precisions(w) == (w, [])


def test_targets_precisions_without_int8_add_nothing() -> None:
    w = _spec("distilbert", {**ONLINE, "precisions": ["fp32"]})
    assert with_cpu_serving_precisions(w) == (w, [])


def test_a_recommendation_at_a_precision_the_spec_did_not_list_says_so() -> None:
    """`precisions: [fp32]` was recommended bf16 (projected) with no word on it."""
    from types import SimpleNamespace

    from rightsize.workflows.precisions import unlisted_precision

    def result(precision: str) -> Any:
        return SimpleNamespace(recommendation=SimpleNamespace(precision=precision))

    (note,) = unlisted_precision(result("bf16"), ["fp32"], None)
    assert note.startswith("the recommendation runs bf16, which the spec's precisions (fp32) do not list")
    assert note.endswith("targets.precisions: [fp32] plans only those")
    assert unlisted_precision(result("fp32"), ["fp32"], None) == []
    assert unlisted_precision(result("tf32"), ["fp32"], None) == []  # fp32 tensors; TF32 math is the GPU default
    assert unlisted_precision(result("bf16"), ["fp32"], ["bf16"]) == []  # asked for by targets.precisions
    assert unlisted_precision(result("int8"), ["fp32"], None, added=["int8"]) == []  # added for CPU serving, said so
    (named,) = unlisted_precision(result("bf16"), ["fp32"], None, added=["int8"])
    assert "the spec's precisions (fp32) do not list" in named  # the spec's own list, not the one rightsize extended


def test_a_model_int8_cannot_quantize_is_not_planned_at_int8() -> None:
    """A TorchScript file (its layers are script modules) was projected at int8 from its fp32 timings: a precision
    `rightsize serve` cannot run it at, and whose int8 config had failed here."""
    from rightsize.profile import Environment, Measurement, Profile
    from rightsize.workflows.precisions import no_int8

    env = Environment.from_dict({"id": "e", "cpu_model": "x", "physical_cores": 2, "logical_cores": 2})
    failed = Measurement("mymod:make", "inference", "cpu", "int8", 1, None, {}, "failed",
                         reason="UnsupportedError: precision: int8 quantized nothing in this model (...)")  # fmt: skip
    ran = Measurement("mymod:make", "inference", "cpu", "fp32", 1, None, {}, "failed", reason="x")
    assert "measured here" in (no_int8("mymod:make", Profile("mymod:make", "inference", {}, env, (failed,))) or "")
    assert no_int8("mymod:make", Profile("mymod:make", "inference", {}, env, (ran,))) is None
    for ref in ("model.pt", "model.ts", "model.pt2"):
        assert "TorchScript or torch.export" in (no_int8(ref, Profile(ref, "inference", {}, env, ())) or "")
    assert no_int8("ort:model.pt", Profile("ort:model.pt", "inference", {}, env, ())) is None  # ONNX Runtime's own


def test_a_listed_precision_kept_at_a_price_tie_names_the_faster_unlisted_one() -> None:
    """mixed-sizes-api lists fp32: the pick was fp32 T4 at 61 ms while the frontier showed the same T4 at fp16 in
    37 ms, the same price, with no word on why."""
    from dataclasses import replace

    from rightsize.plan.result import Candidate, LatencyPrediction, PlanResult
    from rightsize.workflows.precisions import faster_unlisted

    def at(precision: str, p95: float) -> Candidate:
        lat = LatencyPrediction(p50=p95 / 2, p95=p95, p99=p95 * 1.2, mean=p95 / 2, n=3000, utilization=0.4,
                                mean_batch=2.0, method="event simulation", p_target_ms=p95)  # fmt: skip
        return Candidate(instance="nc4", provider="azure", region="eastus", device_class="gpu", device="T4",
                         count=1, precision=precision, purchase="on-demand", cost_usd_per_hour=0.53, feasible=True,
                         provenance="projected", price_date="2025-06", latency=lat, replicas=1)  # fmt: skip

    rec, fp16 = at("fp32", 61.0), at("fp16", 37.0)
    result = PlanResult(workload="w", model="m", kind="online", target={}, recommendation=rec,
                        candidates=[rec, fp16], pareto=[])  # fmt: skip
    (note,) = faster_unlisted(result, ["fp32"])
    assert note.startswith("nc4 runs fp16 at the same price, the SLO percentile in 37 ms against 61 ms at fp32")
    # resnet50-api, listing fp32 too, is recommended a cheaper fp16: the note must not read "unlisted never wins"
    assert (
        "a precision they do not list wins only by being cheaper; add fp16 to precisions to have it win this tie"
        in note
    )
    assert faster_unlisted(result, ["fp32", "fp16"]) == []  # listed: the ranking already weighed it
    assert faster_unlisted(result, ["bf16"]) == []  # the pick itself unlisted: "the spec lists it" would be false
    near = replace(result, candidates=[rec, at("fp16", 56.0)])  # within the simulation's noise: no claim
    assert faster_unlisted(near, ["fp32"]) == []
    dearer = replace(result, candidates=[rec, replace(fp16, cost_usd_per_hour=0.6)])
    assert faster_unlisted(dearer, ["fp32"]) == []
