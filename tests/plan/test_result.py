"""The JSON of a plan: the keys the CLI, the report and users rely on."""

from __future__ import annotations

import json
import math

from rightsize.plan.result import Batching, Candidate, LatencyPrediction, PlanResult

CANDIDATE_KEYS = {
    "instance", "provider", "device_class", "count", "precision", "batching", "latency_ms", "runtime_hours",
    "time_to_train_hours", "cost_usd_per_hour", "cost_usd_total", "feasible", "reasons", "provenance", "price_date",
}  # fmt: skip


def _cand(**kw: object) -> Candidate:
    base: dict[str, object] = {
        "instance": "c7i.2xlarge", "provider": "aws", "region": "us-east-1", "device_class": "cpu", "device": "cpu",
        "count": 2, "precision": "fp32", "purchase": "on-demand", "cost_usd_per_hour": 0.714, "feasible": True,
        "provenance": "projected", "price_date": "2025-06",
    }  # fmt: skip
    base.update(kw)
    return Candidate(**base)  # type: ignore[arg-type]


def test_online_candidate_json() -> None:
    c = _cand(
        batching=Batching(8, 5.0),
        latency=LatencyPrediction(
            p50=20.0,
            p95=45.0,
            p99=70.0,
            mean=25.0,
            utilization=0.4,
            mean_batch=1.6,
            method="simulation",
            p_target_ms=45.0,
            band_ms=(30.0, 80.0),
        ),
        kind_hint="online",
    )
    d = c.to_dict()
    assert d.keys() >= CANDIDATE_KEYS
    assert d["batching"] == {"max_batch": 8, "max_wait_ms": 5.0}
    assert d["latency_ms"]["p95"] == 45.0 and d["latency_ms"]["band"] == [30.0, 80.0]
    assert d["utilization"] == 0.4 and d["time_to_train_hours"] is None
    assert d["latency_method"] == "simulation"
    assert _cand(replicas=3, kind_hint="online").to_dict()["replicas"] == 3


def test_training_candidate_json_and_non_finite_numbers() -> None:
    c = _cand(runtime_hours=5.5, cost_usd_total=math.inf, kind_hint="training")
    d = c.to_dict()
    assert d["time_to_train_hours"] == 5.5 and d["latency_ms"] is None
    assert d["cost_usd_total"] is None  # inf is not JSON
    assert d["replicas"] is None and d["count"] == 2  # a job runs on instances: no serving replicas (it read 0)
    json.dumps(d, allow_nan=False)


def test_plan_result_json() -> None:
    rec = _cand(kind_hint="online")
    r = PlanResult("online", "w", "distilbert", {"online": {}}, rec, [rec, _cand(feasible=False)], [rec], ["why"])
    d = r.to_dict(top=1)
    assert {"kind", "recommendation", "candidates", "pareto", "why", "why_not", "warnings", "price_date"} <= d.keys()
    assert len(d["candidates"]) == 1 and d["n_candidates"] == 2 and d["feasible"] is True
    json.dumps(d, allow_nan=False)
