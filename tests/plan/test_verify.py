"""plan.verify: the long runs that judge a screened pick."""

from __future__ import annotations

from plan_fixtures import ACCELERATORS, cpu_curve, instance

from rightsize.plan.options import pair_options
from rightsize.plan.result import Batching
from rightsize.plan.verify import Policy, _verify_one
from rightsize.spec.targets import LatencyBound, OnlineTarget


def test_a_policy_screening_could_not_tell_from_the_pick_replaces_it_when_its_long_runs_are_faster() -> None:
    """fp32 MobileNetV2 at 73% busy: screening put batch 1 within 5% of batch 8 on one seed and picked the simpler
    batch 1; its long run read 110 ms where batch 8's read 72, and the recommendation moved to int8 on that seed."""
    (opt,) = pair_options([instance("c.2x", 0.34, vcpus=8, ram_gib=16)], [cpu_curve("c.2x", 10.0, 2.0)], ACCELERATORS)
    target = OnlineTarget(rate_per_s=85, latency=LatencyBound(percentile=95, bound_ms=300))  # b1 at 85% busy

    def verified(alternatives: list[Policy]) -> tuple[int, float]:
        c = opt.candidate(replicas=1, batching=Batching(1, 0.0))
        _verify_one(c, opt, target, 12_000, 0, {}, "on-demand", alternatives)
        assert c.batching is not None and c.latency is not None
        return c.batching.max_batch, c.latency.p_target_ms or c.latency.p95

    alone, p_alone = verified([])
    assert alone == 1
    better, p_better = verified([Policy(1, 0.0), Policy(8, 0.0)])
    assert better == 8 and p_better < 0.97 * p_alone  # batching what queued runs 3 ms a sample, not 10
