"""The p95-vs-rate chart: where its curves stop and what its point at the target rate says."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import replace
from html import unescape

from report_kit import online_plan

from rightsize.plan.result import Candidate, PlanResult
from rightsize.report.charts import rate_chart
from rightsize.report.data import SWEEP_FRACTIONS, build_report_data, compute_sweeps

SCREENED = "screening simulation (shared queue, 3000 requests)"


def _finite_everywhere(c: Candidate, rates: list[float]) -> list[float]:
    """As the planner's simulator: a finite run reads a finite p95 past capacity too (its queue only grows)."""
    return [10.0 + r for r in rates]


def _plan(rec_throughput: float) -> PlanResult:
    """resnet50-api's T4 in small: capacity 567.6 req/s at a 400 req/s peak is 1.419x the peak."""
    plan = online_plan()
    rec = replace(plan.candidates[0], throughput_per_s=rec_throughput)
    return replace(plan, recommendation=rec, candidates=[rec, *plan.candidates[1:]])


def _tips(svg: str) -> list[str]:
    return [unescape(t) for t in re.findall(r"<title>(.*?)</title>", svg)]


def test_points_stop_before_the_rate_reaches_the_capacity() -> None:
    """The T4 of 567.6 req/s had points at 640, 720 and 800 req/s (677, 1,343, 1,878 ms: a finite run's queue)."""
    asked: list[list[float]] = []

    def sweep(c: Candidate, rates: list[float]) -> list[float]:
        asked.append(list(rates))
        return _finite_everywhere(c, rates)

    sweeps, _ = compute_sweeps(_plan(40.0 * 567.6 / 400.0), sweep)  # 56.76 req/s
    rec = sweeps[0]
    assert rec.recommended
    drawn = [r for r, p in zip(rec.rates_per_s, rec.p95_ms, strict=True) if p is not None]
    assert max(drawn) == 40.0 * 1.4 and drawn == [40.0 * f for f in SWEEP_FRACTIONS if f <= 1.4]  # 56 < 56.76
    assert rec.p95_ms[-3:] == (None, None, None)  # 64, 72 and 80 req/s: past capacity, not drawn
    assert asked[0] == drawn  # nor simulated
    svg = rate_chart(build_report_data(_plan(56.76), sweep=sweep))
    assert not any(" at 64 req/s" in t or " at 80 req/s" in t for t in _tips(svg) if "c7i.2xlarge" in t)
    assert "Points stop before the rate reaches a candidate's capacity" in unescape(svg)


def test_a_spot_plans_standby_instance_adds_no_capacity() -> None:
    """A spot-only plan's spare instance serves nothing (plan.checks counts it so): 2 spot instances of 40 req/s
    together serve 40, and the 40 req/s peak is already at capacity."""
    plan = online_plan()
    rec = replace(plan.candidates[0], purchase="spot", count=2, throughput_per_s=80.0)
    plan = replace(plan, recommendation=rec, candidates=[rec, *plan.candidates[1:]])
    sweeps, _ = compute_sweeps(plan, _finite_everywhere)
    assert max(r for r, p in zip(sweeps[0].rates_per_s, sweeps[0].p95_ms, strict=True) if p is not None) == 36.0


def test_the_point_at_the_target_rate_is_the_plans_own_p95() -> None:
    """6 x c7a.xlarge read 53.1 ms at the 400 req/s peak in the chart, 57.6 ms in the plan, its table and its
    "why not": the sweep is another simulation, the plan's figure a screening run on a shared queue."""
    plan = online_plan()
    alt = plan.candidates[1]
    assert alt.latency is not None
    alt = replace(alt, latency=replace(alt.latency, p95=57.6, method=SCREENED))
    plan = replace(plan, alternative=alt, candidates=[plan.candidates[0], alt, *plan.candidates[2:]])
    data = build_report_data(plan, sweep=lambda c, rates: [53.1 for _ in rates])
    sweep = next(s for s in data.sweeps if s.label == "1 × g6.xlarge fp16")
    at_peak = sweep.p95_ms[SWEEP_FRACTIONS.index(1.0)]
    assert at_peak == 57.6 and sweep.plan_method == SCREENED
    assert sweep.p95_ms[SWEEP_FRACTIONS.index(1.0) - 1] == 53.1  # the other rates: the sweep's
    svg = rate_chart(data)
    assert f"1 × g6.xlarge fp16: p95 57.6 ms at 40 req/s (the plan's figure: {SCREENED})" in _tips(svg)
    assert not any("53.1 ms at 40 req/s" in t for t in _tips(svg))
    assert "At the peak rate each point is the plan's own p95, as in the table" in unescape(svg)
    # stored with the plan (plan_record: asdict of each sweep), `rightsize report` draws the same point
    stored = build_report_data(plan.to_dict() | {"rate_sweeps": [dataclasses.asdict(s) for s in data.sweeps]})
    assert f"1 × g6.xlarge fp16: p95 57.6 ms at 40 req/s (the plan's figure: {SCREENED})" in _tips(rate_chart(stored))
