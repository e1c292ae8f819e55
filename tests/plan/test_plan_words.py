"""The plan's words where a number could be misread: per-instance GPUs, a job frontier's missed targets, spot rates."""

from __future__ import annotations

from dataclasses import replace

from rightsize.plan.result import Candidate, SpotPlan


def _job(**over: object) -> Candidate:
    base = Candidate(instance="g6.xlarge", provider="aws", region="us-east-1", device_class="gpu", device="L4",
                     count=16, precision="fp16", purchase="on-demand", cost_usd_per_hour=12.9, feasible=True,
                     provenance="projected", price_date="2025-06", gpus=16, vcpus=4, runtime_hours=0.5,
                     cost_usd_total=6.45)  # fmt: skip
    return replace(base, **over)  # type: ignore[arg-type]


def test_a_gpu_row_reads_its_gpus_per_instance_and_a_frontier_point_says_when_it_misses() -> None:
    """16 single-L4 instances read "16x L4" beside CPU rows that give vCPUs per instance; a job's Pareto point
    that misses the deadline read like a plan."""
    from rich.console import Console

    from rightsize.cli.plan import _point, _table
    from rightsize.plan.result import PlanResult

    result = PlanResult(workload="w", model="m", kind="batch", target={}, recommendation=None, candidates=[_job()],
                        pareto=[])  # fmt: skip
    console = Console(width=200, record=True)
    console.print(_table(result, 5))
    assert "1x L4" in console.export_text() and "16x L4" not in console.export_text()
    late = _job(feasible=False, reasons=["misses the deadline: 30 min > 20 min", "over budget: $6.45 > $5.00"])
    assert _point(late) == "g6.xlarge x16 ($6.45, 30 min, misses the deadline and the budget)"
    assert _point(_job()) == "g6.xlarge x16 ($6.45, 30 min)"


def test_a_job_frontier_shows_what_a_looser_target_buys_and_nothing_else() -> None:
    """resnet50-scoring's frontier began with Azure T4 spot rows at $0.05 labelled "misses a target": they met the
    deadline but had no interruption estimate, so no deadline or budget could buy them."""
    from rightsize.plan.explain import pareto
    from rightsize.plan.job_costs import missed_targets
    from rightsize.plan.verify import NO_SPOT_RATE

    plan = _job()
    late = _job(instance="late", cost_usd_total=3.0, runtime_hours=2.0, feasible=False,
                reasons=["misses the deadline: 2.00 h > 1.00 h"])  # fmt: skip
    unpriced = _job(instance="unpriced", cost_usd_total=1.0, runtime_hours=0.2, feasible=False, reasons=[NO_SPOT_RATE])
    capped = _job(instance="capped", cost_usd_total=9.0, runtime_hours=0.1, feasible=False,
                  reasons=["needs 80 instances > max_instances 64"])  # fmt: skip
    assert missed_targets(unpriced) is None and missed_targets(capped) == ["max_instances"]
    assert missed_targets(plan) == [] and missed_targets(_job(feasible=False)) is None
    assert [c.instance for c in pareto([plan, late, unpriced, capped], "batch")] == ["late", "g6.xlarge", "capped"]
    # a dearer point a hair faster is no trade-off: a $55/h p5 stood on the frontier 0.0015 ms ahead of a $22/h p4d
    hair = _job(instance="hair", cost_usd_total=20.0, runtime_hours=0.1 * 0.995)
    step = _job(instance="step", cost_usd_total=30.0, runtime_hours=0.1 * 0.98)
    assert [c.instance for c in pareto([plan, capped, hair, step], "batch")] == ["g6.xlarge", "capped", "step"]


def test_a_batch_fleets_spot_line_gives_the_rate_per_instance_too() -> None:
    """ "spot: 54 interruptions/h assumed" read as if the spec's 3/h per instance had been replaced."""
    from rightsize.plan.explain import explain

    spot = SpotPlan(interruptions_per_hour=54.0, checkpoint_interval_min=2.0, expected_hours=0.43,
                    p_meet_deadline=0.99, policy="spot", expected_cost_usd=3.0, stalls_per_hour=3.0)  # fmt: skip
    rec = _job(device_class="cpu", device="cpu", gpus=0, purchase="spot", spot=spot, count=18)
    line = next(w for w in explain("batch", [rec])[3] if w.startswith("spot:"))
    assert line.startswith("spot: 54 interruptions/h over the fleet (3/h per instance, each stalling only its own)")


def test_a_job_says_when_a_much_faster_one_costs_nearly_the_same() -> None:
    """With prices linear in size, c6i fp32 fine-tuning recommended c6i.xlarge (6.51 h, $1.11) over c6i.4xlarge
    (1.71 h, $1.16) without a word: the cheapest by 4% took 4x as long."""
    from rightsize.plan.explain import explain

    slow = _job(instance="c6i.xlarge", device_class="cpu", device="cpu", gpus=0, count=1, runtime_hours=6.51,
                cost_usd_total=1.11, cost_usd_per_hour=0.17)  # fmt: skip
    quick = replace(slow, instance="c6i.4xlarge", runtime_hours=1.71, cost_usd_total=1.16, cost_usd_per_hour=0.68)
    dear = replace(slow, instance="c6i.16xlarge", runtime_hours=0.5, cost_usd_total=1.36, cost_usd_per_hour=2.72)
    why, _, _, _ = explain("batch", [slow, quick, dear])
    line = next(w for w in why if w.startswith("nearly as cheap and faster"))
    assert "c6i.4xlarge" in line and "1.71 h instead of 6.51 h for +5% ($1.16)" in line
    why, _, _, _ = explain("batch", [slow, dear])  # 23% dearer: not a near tie
    assert not any(w.startswith("nearly as cheap") for w in why)


def test_a_jobs_closest_option_is_one_a_looser_target_would_buy() -> None:
    """With no feasible plan, "closest" named a c7i.48xlarge spot row without an interruption estimate: excluded
    from spot plans whatever the deadline."""
    from rightsize.plan.explain import explain
    from rightsize.plan.verify import NO_SPOT_RATE

    late = _job(instance="late", runtime_hours=2.0, feasible=False, reasons=["misses the deadline: 2.00 h > 1.00 h"])
    unplannable = _job(instance="unpriced", runtime_hours=0.2, feasible=False, reasons=[NO_SPOT_RATE])
    why, _, _, _ = explain("batch", [unplannable, late])
    assert any(w.startswith("closest: 16 instances on 16x aws late") for w in why), why


def test_an_accumulated_batch_reads_as_micro_batches_of_up_to_its_largest() -> None:
    """ "batch 7, gradient accumulation x5" read as 35 samples where the spec asked for 32 (7, 7, 6, 6, 6)."""
    from rightsize.plan.explain import explain
    from rightsize.plan.result import Batching

    c = _job(grad_accumulation=5, batching=Batching(7, 0.0), kind_hint="training")
    why, _, _, _ = explain("training", [c])
    assert "micro-batches of up to 7, gradient accumulation x5" in why[0] and "batch 7," not in why[0]


def test_an_online_frontier_point_counts_instances_as_a_jobs_does() -> None:
    """'c7i.48xlarge x2 ($8.57/h)' was 2 replicas on 1 instance at one instance's price."""
    from rightsize.cli.plan import _point
    from rightsize.plan.result import LatencyPrediction

    lat = LatencyPrediction(p50=5.0, p95=9.0, p99=12.0, mean=5.5, utilization=0.3, mean_batch=1.0)
    packed = _job(instance="c7i.48xlarge", device_class="cpu", device="cpu", gpus=0, count=1, replicas=2,
                  cost_usd_per_hour=8.57, latency=lat)  # fmt: skip
    assert _point(packed) == "2 replicas on 1 x c7i.48xlarge ($8.57/h, 9 ms)"
    assert _point(replace(packed, count=2)) == "2 x c7i.48xlarge ($8.57/h, 9 ms)"


def test_a_frontier_point_says_replicas_on_instances_and_sub_millisecond_latency() -> None:
    """The frontier read "c7a.large x1 int8, 2 replicas ($0.10/h, 0 ms)": x1 beside 2 replicas, a 0.41 ms p95 as 0."""
    from rightsize.cli.plan import _point
    from rightsize.plan.result import LatencyPrediction

    lat = LatencyPrediction(p50=0.3, p95=0.41, p99=0.5, mean=0.3, utilization=0.1, mean_batch=1.0)
    packed = _job(instance="c7a.large", device_class="cpu", device="cpu", gpus=0, count=1, replicas=2,
                  cost_usd_per_hour=0.1, latency=lat, precision="int8")  # fmt: skip
    assert _point(packed, precision=True) == "2 replicas on 1 x c7a.large int8 ($0.10/h, 0.41 ms)"
    four = replace(packed, instance="c7a.xlarge", replicas=4, latency=replace(lat, p95=0.0412))
    assert _point(four) == "4 replicas on 1 x c7a.xlarge ($0.10/h, 0.041 ms)"


def test_infeasible_job_rows_a_looser_target_buys_come_before_the_unplannable_ones() -> None:
    """A 1e13-item job's table led with spot rows no target buys ('no interruption estimate'), cheapest of all."""
    from rightsize.plan.explain import rank

    unplannable = _job(
        purchase="spot",
        cost_usd_total=1.0,
        feasible=False,
        reasons=["needs 106791 instances > max_instances 64", "no interruption estimate with a source"],
    )
    buyable = _job(cost_usd_total=9.0, feasible=False, reasons=["needs 1364 instances > max_instances 64"])
    assert rank([unplannable, buyable], "batch") == [buyable, unplannable]


def test_a_frontier_of_several_precisions_names_each_points() -> None:
    """The frontier's "Standard_NC4as_T4_v3 x1 ($0.53/h, 37 ms)" was the fp16 row beside the fp32 recommendation."""
    from dataclasses import replace

    from rightsize.cli.plan import _point

    job = _job()
    assert _point(job, precision=True) == f"g6.xlarge x16 {job.precision} ($6.45, 30 min)"
    assert _point(replace(job, precision="fp32")) == "g6.xlarge x16 ($6.45, 30 min)"  # one precision: as before


def test_a_frontier_of_several_purchase_options_names_each_points_and_counts_the_rest() -> None:
    """bert-finetune with mixed rows printed "Standard_NC4as_T4_v3 x1 fp16 ($0.02, ...)" then "... ($0.08, ...)": a
    spot and a mixed row read as one point twice; and the fastest 2 of 8 points were dropped without a word."""
    from plan_fixtures import printed_plan

    from rightsize.cli import plan as cli_plan
    from rightsize.plan.result import PlanResult

    job = _job()
    assert cli_plan._point(replace(job, purchase="spot"), purchase=True) == "g6.xlarge x16 spot ($6.45, 30 min)"
    points = [replace(job, purchase="spot" if i % 2 else "on-demand", cost_usd_total=1.0 + i,
                      runtime_hours=1.0 - i / 10) for i in range(8)]  # fmt: skip
    result = PlanResult(workload="w", model="m", kind="batch", target={}, recommendation=points[0],
                        candidates=points, pareto=points)  # fmt: skip
    line = next(x for x in printed_plan(result) if x.startswith("Pareto frontier"))
    assert "g6.xlarge x16 on-demand ($1.00" in line and "g6.xlarge x16 spot ($2.00" in line
    assert line.endswith("(+2 more, the fastest: `--json` lists them)")


def test_a_tiny_jobs_cost_reads_in_significant_digits() -> None:
    """A batch of 10 items: every row read "$ total 0.00" and the frontier "Standard_F2s_v2 x1 ($0.00, 2.71 min)"
    beside a recommendation of $0.0038."""
    from rich.console import Console

    from rightsize.cli.plan import _point, _table
    from rightsize.plan.result import PlanResult

    tiny = _job(instance="Standard_F2s_v2", provider="azure", device_class="cpu", device="cpu", count=1,
                precision="fp32", cost_usd_per_hour=0.085, gpus=0, vcpus=2, runtime_hours=2.71 / 60,
                cost_usd_total=0.0038)  # fmt: skip
    assert _point(tiny) == "Standard_F2s_v2 x1 ($0.0038, 2.71 min)"
    result = PlanResult(workload="w", model="m", kind="batch", target={}, recommendation=tiny, candidates=[tiny],
                        pareto=[])  # fmt: skip
    console = Console(width=200, record=True)
    console.print(_table(result, 5))
    row = next(line for line in console.export_text().splitlines() if "Standard_F2s_v2" in line)
    assert "0.0038" in row and "0.085" in row and "0.00 " not in row
    assert _point(_job()) == "g6.xlarge x16 ($6.45, 30 min)"  # dollars and cents from $0.10 up, as before
