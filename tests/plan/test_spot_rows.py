"""Spot rows need an interruption estimate with a source: without one they are excluded, and say so."""

from __future__ import annotations

from plan_fixtures import ACCELERATORS, gpu_curve, instance

from rightsize.plan.options import pair_options
from rightsize.plan.training import plan_training
from rightsize.spec.targets import TrainingTarget
from rightsize.units import format_usd

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


def _online_spot(catalog_rows: tuple, workers: int = 1) -> object:  # type: ignore[type-arg]
    import dataclasses

    from plan_fixtures import cpu_curve, small_catalog

    from rightsize.plan.planner import plan
    from rightsize.spec import Workload

    online = {"rate_per_s": 20, "latency": {"percentile": 95, "bound_ms": 200}}
    targets = {"online": online, "purchase": ["spot"]}
    w = Workload.model_validate({"name": "s", "model": "distilbert", "targets": targets})
    curves = [dataclasses.replace(cpu_curve(n, 20.0, 15.0), workers=workers) for n in ("c.2x", "c.4x")]
    return plan(w, curves, dataclasses.replace(small_catalog(), instances=catalog_rows))


def test_an_online_spot_plan_rates_its_rows_and_keeps_a_spare_instance() -> None:
    import dataclasses

    from plan_fixtures import small_catalog

    from rightsize.catalog import interruptions_per_hour

    rows = tuple(
        dataclasses.replace(i, spot_interruption=None) if i.instance_type == "c.4x" else i
        for i in small_catalog().instances
    )
    res = _online_spot(rows, workers=3)
    c4 = next(c for c in res.candidates if c.instance == "c.4x")  # type: ignore[attr-defined]
    assert not c4.feasible and any("no interruption estimate" in r for r in c4.reasons)
    rec = res.recommendation  # type: ignore[attr-defined]
    assert rec is not None and rec.instance == "c.2x" and rec.purchase.startswith("spot")
    # an interruption takes the whole VM with its 3 worker processes: the spare is an instance, not a process
    serving = rec.replicas - 3
    assert rec.workers_per_instance == 3 and serving >= 1 and rec.count == -(-serving // 3) + 1
    rate = interruptions_per_hour("<5%")
    assert rate is not None and rec.spot_interruptions_per_hour == rate * rec.count
    assert any(n.startswith("spot: ") and "Spot Advisor bucket <5%" in n for n in rec.notes)
    assert any("spare instance" in n for n in rec.notes)
    assert any(w.startswith("spot: ") for w in res.warnings)  # type: ignore[attr-defined]  # shown under Check
    month = f"(about {rate * rec.count * 730:.2g} a month)"  # 0.05 had read "about 0.1 a month" (one decimal)
    assert any(month in n for n in rec.notes)


def test_interruptions_too_frequent_for_one_spare_are_refused_and_the_note_gives_the_fleet_rate() -> None:
    import dataclasses

    from plan_fixtures import cpu_curve, small_catalog

    from rightsize.plan.planner import plan
    from rightsize.spec import Workload

    def rec_and_cands(rate: float) -> tuple:  # type: ignore[type-arg]
        online = {"rate_per_s": 20, "latency": {"percentile": 95, "bound_ms": 200}}
        targets = {"online": online, "purchase": ["spot"], "interruptions_per_hour": rate}
        w = Workload.model_validate({"name": "s", "model": "distilbert", "targets": targets})
        res = plan(w, [cpu_curve("c.2x", 20.0, 15.0)], dataclasses.replace(small_catalog()))
        return res.recommendation, res.candidates

    rec, _ = rec_and_cands(0.5)  # 0.5/h per instance, a 155 s spin-up: two down at once ~0.2% of the time
    assert rec is not None and rec.spot_interruptions_per_hour == 0.5 * rec.count
    assert any(f"0.5 interruptions/h per instance (the spec), {0.5 * rec.count:.2g}/h over its" in n for n in rec.notes)
    rec, cands = rec_and_cands(30.0)  # 30/h: ~2.6 instances down on average, one spare cannot cover it
    assert rec is None
    assert any("spot interruptions too frequent for one spare" in r for c in cands for r in c.reasons)


def test_cheaper_spot_rows_left_out_for_want_of_an_estimate_are_named_under_check() -> None:
    """A T4 spot job at $0.05 lost to an L4 one at $0.29 without a word: the table lists feasible rows first and
    only `--json`'s infeasible_summary counted the rows excluded for want of an interruption estimate."""
    import dataclasses

    from plan_fixtures import gpu_curve, small_catalog

    from rightsize.plan.job_costs import unrated_spot_note
    from rightsize.plan.planner import plan
    from rightsize.spec import Workload

    rows = (
        instance("g.rated", 0.53, acc="T4", count=1, spot=0.40, bucket="<5%"),
        instance("g.unrated", 0.53, acc="T4", count=1, spot=0.06, bucket=None),
    )
    targets = {"training": {"dataset_size": 10_000, "epochs": 1, "batch_size": 64, "max_nodes": 1,
                            "deadline_hours": 100}, "purchase": ["spot"]}  # fmt: skip
    w = Workload.model_validate({"name": "t", "model": "resnet50", "mode": "training", "targets": targets})
    curves = [gpu_curve("T4", 20.0, 1.0)]
    res = plan(w, curves, dataclasses.replace(small_catalog(), instances=rows))
    rec = res.recommendation
    assert rec is not None and rec.instance == "g.rated" and rec.purchase == "spot"
    [note] = [n for n in res.warnings if "left out" in n]
    unrated = next(c for c in res.candidates if c.instance == "g.unrated" and c.purchase == "spot")
    assert note.startswith("spot: 1 cheaper spot row(s) (1 instance type(s)) were left out: the catalog has no "
                           "interruption estimate for them (its Spot Advisor buckets cover three")  # fmt: skip
    # two significant digits under $0.10, as every price: "$0.01 ..., against $0.06" had read as cents apart
    cost = f"would cost {format_usd(unrated.cost_usd_total or 0)} if never interrupted"
    assert f"g.unrated (T4, {unrated.precision}), {cost}" in note
    assert f"against {format_usd(rec.cost_usd_total or 0)}" in note
    assert note.endswith("targets.interruptions_per_hour to a rate you trust to plan them")
    assert unrated.cost_usd_total is not None and rec.cost_usd_total is not None
    assert unrated.cost_usd_total < rec.cost_usd_total
    dear = dataclasses.replace(unrated, cost_usd_total=rec.cost_usd_total * 2)  # dearer: nothing to say
    assert unrated_spot_note(rec, [rec, dear], "training") is None
    # nothing feasible (a budget only the unrated row meets): the note had vanished with the recommendation
    alone = unrated_spot_note(None, [unrated], "training")
    assert alone is not None and alone.startswith("spot: 1 spot row(s) meeting every target (1 instance type(s))")
    assert "if never interrupted; set targets.interruptions_per_hour" in alone


def test_a_spot_only_online_plan_counts_the_instance_types_left_unsized() -> None:
    import dataclasses

    from plan_fixtures import small_catalog

    rows = tuple(
        dataclasses.replace(i, spot_interruption=None) if i.instance_type == "c.4x" else i
        for i in small_catalog().instances
    )
    res = _online_spot(rows)
    [note] = [n for n in res.warnings if "left out" in n]  # type: ignore[attr-defined]
    assert note.startswith("spot: 1 instance type(s) with a spot price were left out of this spot-only plan, unsized")
    assert "Spot Advisor buckets cover three AWS types" in note


def test_an_unrated_spot_row_is_judged_against_the_deadline_and_budget_too() -> None:
    """Rows without an estimate skipped the deadline and budget checks, and the Check line offered 904 of them as
    "meeting every target" under a $0.05 budget they were all over."""
    inst = instance("g.t4", 0.53, acc="T4", count=1, spot=0.19, bucket=None)
    options = pair_options([inst], [gpu_curve("T4", 20.0, 1.0)], ACCELERATORS)
    tight = TARGET.model_copy(update={"budget_usd": 1e-6})
    [c] = [c for c in plan_training(options, tight, ("spot",), rate_of=lambda _: None) if c.purchase == "spot"]
    assert not c.feasible and any(r.startswith("over budget") for r in c.reasons) and c.reasons[-1].startswith("no int")
    [c] = _spot(None)  # within budget and deadline: the estimate alone keeps it out
    assert c.reasons == [c.reasons[-1]] and c.reasons[-1].startswith("no interruption estimate")
