"""Part-time traffic: the online plan prices scale-to-zero against keeping replicas warm, within the SLO."""

from __future__ import annotations

import pytest
from plan_fixtures import cpu_curve, small_catalog

from rightsize.plan.coldstart import choose_idle_policy, idle_policies
from rightsize.plan.planner import plan
from rightsize.spec import Workload
from rightsize.spec.targets import ColdStart


def _workload(percentile: float, active: float, resumes: float) -> Workload:
    return Workload.model_validate({
        "name": "part-time", "model": "distilbert",
        "targets": {
            "online": {"rate_per_s": 10, "latency": {"percentile": percentile, "bound_ms": 200}},
            "cold_start": {"scale_from_zero": True, "active_hours_per_day": active, "resumes_per_day": resumes},
        },
    })  # fmt: skip


def test_scale_to_zero_when_its_late_requests_fit_the_slo() -> None:
    cold = ColdStart(active_hours_per_day=8, resumes_per_day=1)
    policies = idle_policies(1, 0.34, 10.0, 95.0, cold, gpu=False)
    pick = choose_idle_policy(policies)
    spin = 25 + 120 + 10
    assert pick.warm == 0 and pick.meets_slo
    assert pick.late_fraction == pytest.approx(spin / (8 * 3600))  # one resumption's spin-up, of 8 h of requests
    assert pick.usd_per_day == pytest.approx(0.34 * 8 + 0.34 * spin / 3600)


def test_tight_percentile_keeps_a_replica_warm() -> None:
    cold = ColdStart(active_hours_per_day=8, resumes_per_day=10)
    pick = choose_idle_policy(idle_policies(1, 0.34, 10.0, 99.0, cold, gpu=False))
    assert pick.warm == 1 and pick.late_fraction == 0.0
    assert pick.usd_per_day == pytest.approx(0.34 * 24)


def test_plan_ranks_by_the_chosen_policy_and_says_so() -> None:
    curves = [cpu_curve("c.2x", 20.0, 15.0), cpu_curve("c.4x", 11.0, 8.0)]
    part = plan(_workload(95, 8, 1), curves, small_catalog())
    full = plan(_workload(95, 24, 1), curves, small_catalog())
    rec, always = part.recommendation, full.recommendation
    assert rec is not None and always is not None and rec.instance == always.instance
    assert rec.cost_usd_per_hour < always.cost_usd_per_hour / 2  # 8 h of 24 plus one spin-up
    assert rec.idle_policy is not None and rec.idle_policy.startswith("scale to zero")
    assert any(line.startswith("idle policy: scale to zero") for line in part.why)
    assert always.idle_policy is None  # traffic all day: nothing to weigh


def test_warm_capacity_is_priced_by_the_instance_not_by_its_worker_processes() -> None:
    """Three worker processes on one VM: keeping two warm keeps the whole VM (it was priced as 2/3 of it)."""
    cold = ColdStart(scale_from_zero=True, active_hours_per_day=8, resumes_per_day=20)
    policies = idle_policies(1, 0.34, 10.0, 95.0, cold, gpu=False, replicas_per_instance=3)
    assert [p.warm for p in sorted(policies, key=lambda p: p.warm)] == [0, 1]  # none or the whole instance
    keep = next(p for p in policies if p.warm == 1)
    assert keep.usd_per_day == pytest.approx(0.34 * 24) and keep.describe().startswith("keep 1 instance(s) warm (3 ")
    assert keep.to_dict()["warm_replicas"] == 3 and keep.to_dict()["always_on_usd_per_day"] == pytest.approx(8.16)


def test_without_scale_from_zero_an_instance_stays_warm_and_json_has_the_numbers() -> None:
    curves = [cpu_curve("c.2x", 20.0, 15.0), cpu_curve("c.4x", 11.0, 8.0)]
    spec = _workload(95, 8, 1).model_dump()
    spec["targets"]["cold_start"]["scale_from_zero"] = False
    rec = plan(Workload.model_validate(spec), curves, small_catalog()).recommendation
    assert rec is not None and rec.idle is not None and rec.idle_policy is not None
    assert rec.idle["policy"] == "keep_warm" and rec.idle["warm_instances"] >= 1
    assert rec.to_dict()["idle"]["usd_per_day"] == pytest.approx(rec.cost_usd_per_hour * 24, rel=1e-3)
    assert any("stay warm: scale_from_zero is off" in n for n in rec.notes)


def test_min_warm_replicas_sets_a_floor_in_whole_instances_and_says_when_the_plan_has_fewer() -> None:
    from rightsize.plan.planner import _warm_floor

    assert _warm_floor(ColdStart(scale_from_zero=True), 3, 2) == (0, "")  # scaling from zero: no floor by default
    assert _warm_floor(ColdStart(scale_from_zero=True, min_warm_replicas=3), 4, 2) == (1, "")  # 3 of 4 on one VM
    assert _warm_floor(ColdStart(), 4, 2) == (1, "")  # scale_from_zero off: at least one instance
    n, note = _warm_floor(ColdStart(min_warm_replicas=50), 1, 1)
    assert n == 1 and note.startswith("min_warm_replicas 50 is more than the plan's 1 replica(s)")
    spec = _workload(95, 8, 1).model_dump()
    spec["targets"]["cold_start"]["min_warm_replicas"] = 1  # part-time, scaling from zero, but keep one
    rec = plan(Workload.model_validate(spec), [cpu_curve("c.4x", 11.0, 8.0)], small_catalog()).recommendation
    assert rec is not None and rec.idle is not None and rec.idle["warm_instances"] == 1


def test_a_spot_spare_serves_nothing_when_traffic_resumes() -> None:
    """Two instances, one of them the spot spare: one warm instance carries the whole load, nobody waits."""
    cold = ColdStart(scale_from_zero=True, active_hours_per_day=4, resumes_per_day=1)
    keep = next(p for p in idle_policies(2, 0.2, 10.0, 95.0, cold, gpu=False, spare=1) if p.warm == 1)
    assert keep.late_fraction == 0.0
    half = next(p for p in idle_policies(2, 0.2, 10.0, 95.0, cold, gpu=False) if p.warm == 1)
    assert half.late_fraction > 0  # without a spare, half the load waits


def test_a_day_averaged_price_says_so_beside_the_always_on_one() -> None:
    """The line "3 replicas on 3x c7a.large: $0.10/h" read as what they cost running ($0.31/h): a day's average."""
    curves = [cpu_curve("c.2x", 20.0, 15.0), cpu_curve("c.4x", 11.0, 8.0)]
    part = plan(_workload(95, 8, 1), curves, small_catalog())
    assert part.recommendation is not None
    assert "/h averaged over the day" in part.why[0]
    (idle,) = [line for line in part.why if line.startswith("idle policy: scale to zero")]
    assert "; always-on would be $" in idle and idle.endswith("/day")
    full = plan(_workload(95, 24, 1), curves, small_catalog())
    assert "averaged" not in full.why[0]
