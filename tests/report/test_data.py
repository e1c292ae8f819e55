"""Gathering what a report shows: targets, memory views, rate sweeps, stored plans."""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import asdict, fields, replace
from types import SimpleNamespace

import pytest
from report_kit import curves, fake_sweep, online_plan, profile_for

from rightsize.plan.result import PlanResult
from rightsize.profile import ServiceCurve
from rightsize.report.data import (
    GIB,
    SWEEP_FRACTIONS,
    build_report_data,
    compute_sweeps,
    curve_from_dict,
    memory_view,
    targets_of,
)


def test_targets_are_found_nested_or_flat() -> None:
    nested = targets_of({"online": {"rate_per_s": 40, "latency": {"percentile": 99, "bound_ms": 120},
                                    "budget_usd_per_hour": 2.0}})  # fmt: skip
    assert (nested.rate_per_s, nested.percentile, nested.bound_ms, nested.budget_usd_per_hour) == (40, 99, 120, 2.0)
    flat = targets_of({"items": 5_000_000, "deadline_hours": 8, "budget_usd": 50})
    assert (flat.deadline_hours, flat.budget_usd, flat.rate_per_s, flat.bound_ms) == (8, 50, None, None)


def test_memory_view_accepts_plain_dicts_estimates_and_tier_shapes() -> None:
    plain = memory_view({"weights": 2 * GIB, "activations": GIB, "tiers": [24, 16]})
    assert plain is not None
    assert plain.total_bytes == 3 * GIB
    assert [g for g, _ in plain.tiers] == [16, 24]
    nested = memory_view(
        {
            "breakdown": {"weights": GIB, "none": 0},
            "tiers": [(24.0, ["A10G", "L4"]), {"memory_gib": 80, "name": "H100"}],
        }
    )
    assert nested is not None
    assert nested.breakdown == {"weights": GIB}  # zero components are dropped
    assert nested.tiers == ((24.0, "A10G/L4 24 GiB"), (80.0, "H100 80 GiB"))
    est = memory_view(SimpleNamespace(breakdown={"weights": 5.0 * GIB}, tiers=[40]))
    assert est is not None
    assert est.total_bytes == 5 * GIB and est.tiers == ((40.0, "40 GiB"),)
    assert memory_view(None) is None and memory_view({"weights": 0}) is None


def test_memory_tiers_come_from_the_catalog_the_caller_passes() -> None:
    from rightsize.catalog import gpu_memory_tiers, load_catalog

    mv = memory_view({"weights": GIB}, tiers=gpu_memory_tiers(load_catalog("")))
    assert mv is not None
    gib = [g for g, _ in mv.tiers]
    assert 16 in gib and 22.49 in gib and 80 in gib  # V100-16GB, A10/A10G/L4 (exposed), A100-80GB-PCIe/H100-PCIe
    bare = memory_view({"weights": GIB})  # no catalog passed: no file is read, no tiers drawn
    assert bare is not None and bare.tiers == ()


def test_rate_sweep_covers_the_top_candidates_at_fractions_of_the_peak(plan_online: PlanResult) -> None:
    sweeps, note = compute_sweeps(plan_online, fake_sweep)
    assert note == ""
    assert len(sweeps) == 4  # recommendation, alternative, then feasible ones
    assert sweeps[0].recommended and not any(s.recommended for s in sweeps[1:])
    assert sweeps[0].rates_per_s == tuple(40.0 * f for f in SWEEP_FRACTIONS)
    # fake_sweep: capacity 88 * (1 + 0.1 * 2) = 105.6 req/s for 2 replicas, so every rate up to 80 req/s is finite
    assert all(v is not None for v in sweeps[0].p95_ms)
    one_replica = sweeps[1]  # capacity 96.8 req/s: the 80 req/s point is still finite, none is infinite-as-None lost
    assert one_replica.p95_ms[-1] is not None and one_replica.p95_ms[-1] > one_replica.p95_ms[0]


def test_unstable_rates_become_gaps() -> None:
    plan = online_plan()

    def sweep(c: object, rates: list[float]) -> list[float]:
        return [10.0 if r < 40 else math.inf for r in rates]

    sweeps, _ = compute_sweeps(plan, sweep)
    n_finite = sum(f * 40 < 40 for f in SWEEP_FRACTIONS) + 1  # and the peak's point: the plan's own p95
    assert sum(v is not None for v in sweeps[0].p95_ms) == n_finite
    assert sweeps[0].p95_ms[SWEEP_FRACTIONS.index(1.0)] == 88.0 and sweeps[0].p95_ms[-1] is None


def test_two_candidates_with_one_curve_draw_one_labelled_line() -> None:
    """n2-highcpu-4 and Standard_F4s_v2 (one projected CPU family and size) had two legend entries and one visible
    line, the second drawn exactly over the first."""
    from rightsize.report.charts import rate_chart

    plan = online_plan()
    one = plan.candidates[0].latency  # twins: the plan has them at one p95 too (the chart's point at the peak rate)
    plan = replace(plan, candidates=[replace(c, latency=one) for c in plan.candidates])
    plan = replace(plan, recommendation=plan.candidates[0], alternative=plan.candidates[1])
    data = build_report_data(plan, sweep=lambda c, rates: [5.0 * (1 + r / 100) for r in rates])
    assert len(data.sweeps) == 4  # the four candidates test_rate_sweep_... draws, each simulated
    svg = rate_chart(data)
    legend = [s.label for s in data.sweeps]
    joined = f"{legend[0]} (recommended) = {legend[1]} = {legend[2]} = {legend[3]}"
    assert svg.count(joined) == 1 and svg.count(legend[1]) == 1 + 14, svg  # one legend entry; its 14 points' tooltips
    import re

    strokes = set(re.findall(r'<polyline class="series"[^>]*stroke="([^"]+)"', svg))
    assert len(strokes) == 1, strokes  # every twin in the legend's colour: a later one had covered it in its own


def test_a_failing_sweep_is_a_note_not_a_crash(plan_online: PlanResult) -> None:
    def broken(c: object, rates: list[float]) -> list[float]:
        raise RuntimeError("boom")

    data = build_report_data(plan_online, sweep=broken)
    assert data.sweeps == [] and "boom" in data.sweep_note


def test_stored_plan_dict_renders_the_same_data_as_the_live_result(plan_online: PlanResult) -> None:
    live = build_report_data(plan_online, profile=profile_for())
    stored = build_report_data(plan_online.to_dict(), profile=profile_for())
    assert live.plan == stored.plan
    assert live.targets.bound_ms == 120.0 and live.recommendation is not None
    assert len(live.measurements) == 10  # 2 precisions x 5 batch sizes, all ok
    assert live.env is not None and live.env.id == "envaaaa11111"


def test_stored_extras_curves_memory_and_sweeps_are_used(plan_online: PlanResult) -> None:
    payload = plan_online.to_dict()
    payload["curves"] = [asdict(c) for c in curves()]
    payload["memory"] = {"weights": GIB}
    payload["rate_sweeps"] = [{"label": "x", "rates_per_s": [10, 20], "p95_ms": [5.0, None]}]
    data = build_report_data(payload)
    assert [c.device for c in data.curves] == ["A10G", "T4"]
    assert data.curves[0] == curves()[0]
    assert data.memory is not None and data.memory.total_bytes == GIB
    assert data.sweeps[0].p95_ms == (5.0, None)


def test_a_stored_plan_without_a_sweep_gives_its_own_reason(plan_online: PlanResult) -> None:
    """The report said "the planner gave no rate sweep (pass sweep= to write_report)": a developer's note."""
    payload = plan_online.to_dict() | {"rate_sweeps": [], "rate_sweep_note": "no feasible online candidate to sweep"}
    assert build_report_data(payload).sweep_note == "no feasible online candidate to sweep"
    assert build_report_data(plan_online.to_dict()).sweep_note == "no rate sweep was stored with this plan"


def test_curve_round_trips_through_json_dict() -> None:
    c = curves()[1]
    assert curve_from_dict(asdict(c)) == c
    # every field set off its default: a stored plan's CPU layout (2 workers x 1 thread) had come back as 1 x None
    cpu = replace(c, device="cpu:c.4x", instance="c.4x", threads=1, workers=2, memory_bytes=(1,) * 6,
                  device_share=(0.5,) * 6, compute_share=(0.4,) * 6, band_los=(0.7,) * 6, band_his=(1.5,) * 6,
                  extrapolated=True, caveats=("int8 extrapolated",), batch_limit=16)  # fmt: skip
    assert {f.name for f in fields(cpu) if getattr(cpu, f.name) == getattr(ServiceCurve("d", "p", (1,), (1.0,), (0.1,),
            "projected"), f.name)} <= {"provenance"}  # fmt: skip
    assert curve_from_dict(json.loads(json.dumps(asdict(cpu)))) == cpu
    with pytest.raises(KeyError):
        curve_from_dict({"precision": "fp16"})


def test_a_request_mix_plan_draws_no_one_size_rate_sweep() -> None:
    """mixed-sizes-api's chart read 18.6 ms at the peak for a T4 the plan had at 61.5 ms: the sweep sends one
    request size, the mix's 5% of 32-sample requests left out."""
    plan = online_plan()
    mix = dataclasses.replace(plan, target={"online": {**plan.target["online"], "request_mix": [
        {"samples": 1, "share": 0.95}, {"samples": 32, "share": 0.05}]}})  # fmt: skip
    sweeps, note = compute_sweeps(mix, fake_sweep)
    assert sweeps == [] and note.startswith("the rate sweep simulates one request size")
    assert compute_sweeps(plan, fake_sweep)[0]  # one size: drawn
