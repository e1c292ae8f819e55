"""Spot rows need an interruption estimate with a source: without one they are excluded, and say so."""

from __future__ import annotations

from plan_fixtures import ACCELERATORS, gpu_curve, instance

from rightsize.plan.options import pair_options
from rightsize.plan.training import plan_training
from rightsize.spec.targets import TrainingTarget

TARGET = TrainingTarget(dataset_size=10_000, epochs=1, batch_size=64, max_nodes=1, deadline_hours=100)


def _spot(bucket: str | None, rate: float | None = None) -> list:  # type: ignore[type-arg]
    inst = instance("g.t4", 0.53, acc="T4", count=1, spot=0.19, bucket=bucket)
    options = pair_options([inst], [gpu_curve("T4", 20.0, 1.0)], ACCELERATORS)
    return [c for c in plan_training(options, TARGET, ("spot",), rate_of=lambda _: rate) if c.purchase == "spot"]


def test_no_bucket_means_no_spot_plan_and_a_reason() -> None:
    [c] = _spot(None)
    assert not c.feasible and any("no interruption estimate" in r for r in c.reasons)


def test_a_bucket_or_a_user_rate_plans_spot() -> None:
    from rightsize.catalog import interruptions_per_hour

    rated = _spot("<5%", interruptions_per_hour("<5%"))
    assert rated and all(c.spot is not None for c in rated)
    user = _spot(None, 0.001)  # targets.interruptions_per_hour
    assert user and user[0].feasible and user[0].spot is not None
