"""Hand-built plans, profiles and stores for the report and dashboard tests (the planner never runs here).

Imported by basename (like tests/loadgen/lg_tiny_server.py): ``from report_kit import online_plan``.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from rightsize.plan.result import Batching, Candidate, LatencyPrediction, PlanResult, SpotPlan
from rightsize.profile import Latency, Measurement, Profile, ServiceCurve

XSS = "<script>alert(1)</script>"
GIB = 1024**3

ENV_A: dict[str, Any] = {
    "id": "envaaaa11111",
    "cpu_model": "AMD EPYC 9B14 (test A)",
    "machine": "x86_64",
    "physical_cores": 2,
    "logical_cores": 4,
    "isa": ["avx2", "fma", "avx512f"],
    "ram_bytes": 24 * GIB,
    "gpus": [],
    "torch": "2.13.0",
    "python": "3.11.9",
    "os": "Linux 6.1",
    "hostname": "box-a",
}
ENV_B: dict[str, Any] = {
    "id": "envbbbb22222",
    "cpu_model": "Intel Xeon Platinum 8488C (test B)",
    "machine": "x86_64",
    "physical_cores": 8,
    "logical_cores": 16,
    "isa": ["avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "avx512_fp16", "amx_bf16", "amx_int8"],
    "ram_bytes": 64 * GIB,
    "gpus": [{"name": "NVIDIA A10G", "memory_bytes": 24 * GIB}],
    "torch": "2.13.0",
    "python": "3.11.9",
    "os": "Linux 6.1",
    "hostname": "box-b",
}


def measurement(
    model: str,
    device: str,
    precision: str,
    batch: int,
    t1_ms: float,
    per_sample_ms: float,
    env_id: str,
    mode: str = "inference",
) -> Measurement:
    """A measured point with t(b) = t1 + per_sample * (b - 1) and a 20% p95 tail."""
    t = t1_ms + per_sample_ms * (batch - 1)
    lat = Latency(p50=t, p95=t * 1.2, p99=t * 1.35, mean=t * 1.05, std=t * 0.08, n=30)
    return Measurement(
        model=model,
        mode=mode,
        device=device,
        precision=precision,
        batch_size=batch,
        threads=None,
        input={"seq_len": 64},
        status="ok",
        latency_ms=lat,
        throughput_per_s=batch * 1000.0 / t,
        peak_memory_bytes=int((0.3 + 0.02 * batch) * GIB),
        env_id=env_id,
    )


def profile_for(model: str = "distilbert", env: dict[str, Any] = ENV_A) -> Profile:
    ms = [
        measurement(model, "cpu", p, b, t1, k, env["id"])
        for p, t1, k in (("fp32", 40.0, 30.0), ("bf16", 12.0, 8.0))
        for b in (1, 2, 4, 8, 16)
    ]
    return Profile(model=model, mode="inference", input={"seq_len": 64}, env=env, measurements=tuple(ms))


def curves() -> list[ServiceCurve]:
    bs = (1, 2, 4, 8, 16, 32)
    return [
        ServiceCurve(
            "A10G",
            "fp16",
            bs,
            tuple(3.0 + 0.4 * b for b in bs),
            (0.05,) * 6,
            "projected",
            0.7,
            1.5,
            "roofline+calibration (test)",
        ),
        ServiceCurve(
            "T4",
            "fp16",
            bs,
            tuple(6.0 + 0.9 * b for b in bs),
            (0.05,) * 6,
            "projected",
            0.7,
            1.5,
            "roofline+calibration (test)",
        ),
    ]


def _online(
    instance: str,
    device: str,
    dc: str,
    count: int,
    precision: str,
    price: float,
    p95: float,
    feasible: bool = True,
    reasons: list[str] | None = None,
    provider: str = "aws",
) -> Candidate:
    lat = LatencyPrediction(
        p50=p95 * 0.55,
        p95=p95,
        p99=p95 * 1.3,
        mean=p95 * 0.6,
        utilization=0.55,
        mean_batch=2.5,
        band_ms=(p95 * 0.8, p95 * 1.4),
    )
    rate = 40.0
    return Candidate(
        instance=instance,
        provider=provider,
        region="us-east-1",
        device_class=dc,
        device=device,  # type: ignore[arg-type]
        count=count,
        precision=precision,
        purchase="on_demand",
        cost_usd_per_hour=price * count,
        feasible=feasible,
        provenance="measured" if dc == "cpu" else "projected",
        price_date="2025-06",
        batching=Batching(8, 5.0),
        latency=lat,
        cost_usd_per_1m_requests=price * count / (rate * 3600) * 1e6,
        throughput_per_s=capacity(count),  # the whole deployment's full-batch throughput, as fake_sweep's capacity
        gpus=count if dc == "gpu" else 0,
        memory_bytes=int(0.6 * GIB),
        memory_capacity_bytes=24 * GIB if dc == "gpu" else None,
        reasons=reasons or [],
        price_source="skypilot-catalog (test)",
        kind_hint="online",
    )


def online_plan(model: str = "distilbert", workload: str = "text-classification-api") -> PlanResult:
    cands = [
        _online("c7i.2xlarge", "cpu", "cpu", 2, "bf16", 0.357, 88.0),
        _online("g6.xlarge", "L4", "gpu", 1, "fp16", 0.8048, 22.0),
        _online("g5.xlarge", "A10G", "gpu", 1, "fp16", 1.006, 18.0),
        _online("c7i.4xlarge", "cpu", "cpu", 2, "bf16", 0.714, 70.0),
        _online("n2-standard-8", "cpu", "cpu", 4, "fp32", 0.389, 112.0, provider="gcp"),
        _online("g4dn.xlarge", "T4", "gpu", 1, "fp16", 0.526, 131.0, False, ["p95 131 ms exceeds the 120 ms SLO"]),
        _online("c6i.2xlarge", "cpu", "cpu", 1, "fp32", 0.34, 900.0, False, ["p95 900 ms exceeds the 120 ms SLO"]),
        _online("p5.4xlarge", "H100", "gpu", 1, "fp16", 6.88, 9.0, False, ["over budget: $6.88/h > $2/h"]),
    ]
    rec = cands[0]
    return PlanResult(
        kind="online",
        workload=workload,
        model=model,
        target={
            "online": {
                "rate_per_s": 40.0,
                "latency": {"percentile": 95.0, "bound_ms": 120.0},
                "budget_usd_per_hour": 2.0,
                "request_samples": 1,
            }
        },
        recommendation=rec,
        candidates=cands,
        pareto=[cands[0], cands[1], cands[2]],
        why=["cheapest setup that meets p95 ≤ 120 ms at 40 req/s", f"measured on this machine; model {model}"],
        why_not=[
            "g6.xlarge (L4) meets the SLO but costs $0.80/h vs $0.71/h",
            "GPU utilization 12% (< 20%: overbuying)",
        ],
        alternative=cands[1],
        warnings=["no batching window: add max_wait_ms"],
        assumptions={
            "headroom": 0.8,
            "arrival": "poisson",
            "sources": {"headroom": "docs/sources.md `batching-designs`"},
        },
        price_date="2025-06",
        elapsed_s=0.42,
        infeasible_summary={"over SLO": 1, "over budget": 1},
    )


def capacity(count: int) -> float:
    """Requests/s a test candidate of ``count`` instances serves (its ``throughput_per_s``; fake_sweep's capacity)."""
    return 88.0 * (1.0 + 0.1 * count)


def fake_sweep(c: Candidate, rates: list[float]) -> list[float]:
    """M/M/1-like: p95 grows as 1/(1 - rho); None-like inf above capacity (~2.4x the 40 req/s peak)."""
    assert c.latency is not None
    cap = capacity(c.count)
    return [c.latency.p95 * 0.6 / (1 - r / cap) if r < cap else math.inf for r in rates]


def _training(
    instance: str, device: str, count: int, price: float, t0_h: float, purchase: str = "on_demand"
) -> Candidate:
    eff = 0.9 ** math.log2(count) if count > 1 else 1.0
    t = t0_h / (count * eff)
    spot = None
    cost = price * count * t
    if purchase != "on_demand":
        spot = SpotPlan(0.01, 60.0, t * 1.12, 0.93 if purchase == "spot" else 0.99, purchase, cost * 0.45)
    return Candidate(
        instance=instance,
        provider="aws",
        region="us-east-1",
        device_class="gpu",
        device=device,
        count=count,
        precision="bf16",
        purchase=purchase,
        cost_usd_per_hour=price * count,
        feasible=t <= 12,
        provenance="projected",
        price_date="2025-06",
        runtime_hours=t,
        cost_usd_total=spot.expected_cost_usd if spot else cost,
        gpus=count,
        memory_bytes=int(14 * GIB),
        memory_capacity_bytes=24 * GIB,
        spot=spot,
        reasons=[] if t <= 12 else [f"{t:.1f} h misses the 12 h deadline"],
        kind_hint="training",
    )


def training_plan() -> PlanResult:
    cands = [_training("g5.xlarge", "A10G", n, 1.006, 30.0) for n in (1, 2, 4, 8)]
    cands += [_training("g6.xlarge", "L4", n, 0.8048, 40.0) for n in (1, 2, 4, 8)]
    cands += [
        _training("g5.xlarge", "A10G", 4, 1.006, 30.0, "spot"),
        _training("g5.xlarge", "A10G", 4, 1.006, 30.0, "mixed"),
    ]
    feas = sorted([c for c in cands if c.feasible], key=lambda c: c.cost_usd_total or 0)
    cands = feas + [c for c in cands if not c.feasible]
    return PlanResult(
        kind="training",
        workload="bert-finetune",
        model="bert-base",
        target={
            "training": {
                "dataset_size": 100000,
                "epochs": 3,
                "batch_size": 32,
                "deadline_hours": 12.0,
                "budget_usd": 80.0,
            }
        },
        recommendation=feas[0],
        candidates=cands,
        pareto=feas[:3],
        why=["cheapest that finishes in 12 h"],
        why_not=["CPU: 300 h, misses the deadline"],
        price_date="2025-06",
    )


MEMORY = {
    "breakdown": {"weights": 0.25 * GIB, "activations": 0.9 * GIB, "workspace": 0.2 * GIB},
    "tiers": [16, 24, 40, 80],
}


def build_store(path: Path, model: str = "distilbert") -> tuple[str, str]:
    """Two runs of ``model`` from two machines (ENV_A CPU-only, ENV_B with an A10G), each with a plan."""
    from rightsize.store import Store

    with Store(path) as st:
        ids = []
        for env, gpu in ((ENV_A, False), (ENV_B, True)):
            st.save_env(env)
            run = st.start_run("bench", name=f"bench {env['hostname']}", model=model, env_id=str(env["id"]))
            ms = [
                measurement(model, "cpu", p, b, t1, k, env["id"])
                for p, t1, k in (("fp32", 40.0 if not gpu else 20.0, 30.0 if not gpu else 12.0), ("bf16", 12.0, 8.0))
                for b in (1, 2, 4, 8)
            ]
            if gpu:
                ms += [measurement(model, "cuda", "fp16", b, 2.0, 0.3, env["id"]) for b in (1, 2, 4, 8, 16)]
            st.add_measurements(run, ms)
            st.finish_run(run)
            plan_run = st.start_run("plan", name="plan", model=model, env_id=env["id"])
            st.save_artifact(plan_run, "plan", online_plan(model).to_dict())
            st.finish_run(plan_run)
            ids.append(run)
    return ids[0], ids[1]
