"""The disturbed-timing note under a GPU recommendation says "a CPU plan may beat this GPU one" only when
re-timing could plausibly change the device class: a CPU row is plannable and within the timings' slowdown."""

from __future__ import annotations

import dataclasses

from rightsize.plan.result import Candidate, PlanResult
from rightsize.plan.verify import NO_SPOT_RATE
from rightsize.workflows.plan import cpu_may_win


def _row(cls: str, per_h: float, reasons: list[str] = [], purchase: str = "on-demand") -> Candidate:  # noqa: B006
    return Candidate(
        instance=f"{cls}.x", provider="aws", region="us-east-1", device="T4" if cls == "gpu" else "cpu",
        device_class=cls, precision="fp32", count=1, purchase=purchase, cost_usd_per_hour=per_h,
        feasible=not reasons, provenance="projected", price_date="2025-06", reasons=list(reasons),
    )  # fmt: skip


def _result(rec: Candidate, alt: Candidate) -> PlanResult:
    target = {"online": {"rate_per_s": 10, "latency": {"percentile": 95, "bound_ms": 80}}}
    return PlanResult("online", "w", "distilbert", target, rec, [rec, alt], [rec], alternative=alt)


def test_a_cpu_plan_may_win_only_when_plannable_and_within_the_slowdown() -> None:
    gpu = _row("gpu", 0.81)
    # spot only: every CPU row left out (no interruption estimate): re-timing changes nothing
    assert not cpu_may_win(_result(gpu, _row("cpu", 0.011, [NO_SPOT_RATE], "spot")), 3.8)
    # a feasible CPU plan at 45x the cost: timings 3.8x slow cannot close that gap
    assert not cpu_may_win(_result(gpu, _row("cpu", 0.81 * 45)), 3.8)
    # within the slowdown: it may
    assert cpu_may_win(_result(gpu, _row("cpu", 0.81 * 1.5)), 3.8)
    # an infeasible CPU row whose p95 misses the SLO by less than the slowdown: it may
    slow = _row("cpu", 0.2, ["latency SLO not met: p95 > 80 ms even with 64 replicas"])
    assert not cpu_may_win(_result(gpu, slow), 3.8)  # no predicted latency: no gap to judge
    from rightsize.plan.result import LatencyPrediction

    near = dataclasses.replace(slow, latency=LatencyPrediction(p50=90.0, p95=120.0, p99=150.0, utilization=0.5,
                                                                mean_batch=1.0))  # fmt: skip
    assert cpu_may_win(_result(gpu, near), 3.8) and not cpu_may_win(_result(gpu, near), 1.2)
    # a CPU recommendation: nothing to flip
    assert not cpu_may_win(_result(_row("cpu", 0.2), gpu), 3.8)
