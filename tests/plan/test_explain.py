"""The recommendation's words: price age, and an unverified price that wins is flagged with the verified option."""

from __future__ import annotations

import dataclasses
from datetime import date

from plan_fixtures import cpu_curve, small_catalog

from rightsize.catalog.model import Catalog, is_unverified
from rightsize.plan.explain import explain, price_age, rank
from rightsize.plan.online import plan_online
from rightsize.plan.options import pair_options
from rightsize.plan.result import Candidate
from rightsize.spec.targets import LatencyBound, OnlineTarget


def test_price_age_in_months_then_years() -> None:
    assert price_age("2025-06", today=date(2026, 11, 24)) == ", 17 months old"
    assert price_age("2023-01", today=date(2026, 11, 24)) == ", 3.8 years old"
    assert price_age("2026-11", today=date(2026, 11, 24)) == ""
    assert price_age("unknown") == ""


def test_unverified_marks() -> None:
    assert is_unverified("Azure retail price list Fsv2 (as remembered; estimate, re-check)")
    assert not is_unverified("skypilot-catalog vms.csv 2025 snapshot")
    # a snapshot row whose spot price alone is marked: verified for an on-demand plan, not for a spot one
    snap = "skypilot-catalog vms.csv 2025 snapshot (sources: skypilot-catalog, azure-vm-pricing) (spot re-check)"
    assert not is_unverified(snap, "on-demand") and not is_unverified(snap, "on_demand")
    assert is_unverified(snap, "spot (+1 spare replica)") and is_unverified(snap, "mixed") and is_unverified(snap)
    assert is_unverified("AWS EC2 on-demand list price us-east-1 (estimate; re-check)", "on-demand")


def _plan(cat: Catalog) -> tuple[list[str], list[str]]:
    curves = [cpu_curve("c.2x", 20.0, 15.0), cpu_curve("c.4x", 11.0, 8.0)]
    target = OnlineTarget(rate_per_s=10, latency=LatencyBound(percentile=95, bound_ms=80))
    ranked = rank(plan_online(pair_options(cat.instances, curves, cat.accelerators), target), "online")
    why, _, _, warnings = explain("online", ranked, 95, 80)
    return why, warnings


def test_an_unverified_winner_is_flagged_with_the_cheapest_verified_plan() -> None:
    cat = small_catalog()
    why, warnings = _plan(cat)
    assert "months old" in why[-1] or "years old" in why[-1]
    assert not any("unverified" in w for w in warnings)  # every row verified: nothing to flag
    rows = tuple(
        dataclasses.replace(i, source="price list (as remembered; re-check)") if i.instance_type == "c.2x" else i
        for i in cat.instances
    )
    why, warnings = _plan(dataclasses.replace(cat, instances=rows))
    assert warnings[0].startswith("the recommended c.2x's price is unverified")
    assert "the cheapest verified plan is 1 replica on 1x aws c.4x" in warnings[0] and "2.00x the cost" in warnings[0]


def _best_c4x() -> Candidate:
    """The best plan of one CPU instance type at 10/s, p95 <= 80 ms: the rank tests' starting point."""
    cat = small_catalog()
    target = OnlineTarget(rate_per_s=10, latency=LatencyBound(percentile=95, bound_ms=80))
    options = pair_options(cat.instances, [cpu_curve("c.4x", 11.0, 8.0)], cat.accelerators)
    return rank(plan_online(options, target), "online")[0]


def test_at_the_same_price_a_verified_price_ranks_first() -> None:
    known = _best_c4x()
    guess = dataclasses.replace(known, instance="z.4x", price_source="price list (as remembered; re-check)")
    assert rank([guess, known], "online")[0] is known  # 'z.4x' sorts after: the name does not decide it
    assert rank([dataclasses.replace(guess, instance="a.4x"), known], "online")[0] is known
    cheaper_guess = dataclasses.replace(guess, cost_usd_per_hour=known.cost_usd_per_hour * 0.99)
    assert rank([cheaper_guess, known], "online")[0] is cheaper_guess  # cheaper still wins, and is flagged


def test_small_latencies_keep_their_digits() -> None:
    from rightsize.plan.explain import ms

    assert (ms(0.42), ms(3.456), ms(12.6), ms(0.0)) == ("0.42", "3.5", "13", "0")


def test_at_the_same_price_the_better_known_plan_ranks_first() -> None:
    """A precision extrapolated here (wider band) does not win a price tie by a hair of speed."""
    best = _best_c4x()
    assert best.latency is not None
    guess = dataclasses.replace(best, precision="int8", band=(0.3, 4.0),
                                latency=dataclasses.replace(best.latency, p95=best.latency.p95 * 0.99))  # fmt: skip
    known = dataclasses.replace(best, band=(0.6, 1.6))
    assert rank([guess, known], "online")[0] is known
    cheaper_guess = dataclasses.replace(guess, cost_usd_per_hour=best.cost_usd_per_hour * 0.9)
    assert rank([cheaper_guess, known], "online")[0] is cheaper_guess  # price still comes first


def test_at_the_same_price_and_band_a_precision_anchored_on_itself_ranks_before_an_extrapolated_one() -> None:
    """Since the extrapolated band is never narrower than the anchored one, the two often come out alike: then the
    precision measured here (anchored on itself) wins the price tie, not the extrapolated one a hair faster."""
    best = _best_c4x()
    assert best.latency is not None and best.curve is not None
    known = dataclasses.replace(best, band=(0.66, 2.16), curve=dataclasses.replace(best.curve, provenance="projected"))
    guess = dataclasses.replace(known, precision="bf16", curve=dataclasses.replace(known.curve, extrapolated=True),
                                latency=dataclasses.replace(best.latency, p95=best.latency.p95 * 0.9))  # fmt: skip
    assert rank([guess, known], "online")[0] is known
    cheaper_guess = dataclasses.replace(guess, cost_usd_per_hour=best.cost_usd_per_hour * 0.95)
    assert rank([cheaper_guess, known], "online")[0] is cheaper_guess  # price still comes first


def test_a_replica_near_full_says_why_it_still_keeps_up_and_what_to_watch() -> None:
    from rightsize.plan.checks import check_warnings
    from rightsize.plan.result import Batching

    cat = small_catalog()
    curves = [cpu_curve("c.2x", 20.0, 15.0)]
    target = OnlineTarget(rate_per_s=10, latency=LatencyBound(percentile=95, bound_ms=80))
    rec = rank(plan_online(pair_options(cat.instances, curves, cat.accelerators), target), "online")[0]
    assert rec.latency is not None and rec.latency.utilization < 0.9
    assert not any(w.startswith("busy") for w in check_warnings("online", rec, 80, 1))
    busy = dataclasses.replace(rec.latency, utilization=0.99, mean_batch=3.7)
    batched = dataclasses.replace(rec, latency=busy, batching=Batching(max_batch=8, max_wait_ms=0.0))
    (w,) = [w for w in check_warnings("online", batched, 80, 1) if w.startswith("busy")]
    assert "busy 99%" in w and "mean 3.7 of at most 8" in w and "validate" in w
    full = dataclasses.replace(batched, latency=dataclasses.replace(busy, mean_batch=8.0))
    (w,) = [w for w in check_warnings("online", full, 80, 1) if w.startswith("busy")]
    assert "no room for bigger batches" in w
    # resnet50-api at 300/s on a T4 read "busy 98%... the latency rises steeply with any extra traffic" while its
    # full batches served 595/s and 450/s still met the SLO: with room, the line says where the slack is
    roomy = dataclasses.replace(batched, throughput_per_s=20.0, latency=dataclasses.replace(busy, mean_batch=3.0))
    (w,) = [w for w in check_warnings("online", roomy, 80, 1, samples_per_s=10) if w.startswith("busy")]
    assert w.startswith("busy 99% though its full batches would serve 20 samples/s, 2.0x the rate: with no batch "
                        "window it runs whatever is queued")  # fmt: skip
    assert "extra traffic mostly grows its batches (mean 3.0 of at most 8)" in w

    def busy_line(c: object, samples_per_s: float) -> str:
        (w,) = [w for w in check_warnings("online", c, 80, 1, samples_per_s=samples_per_s) if w.startswith("busy")]
        return w

    assert "latency rises steeply" in busy_line(roomy, 18)  # 1.1x: no real room
    near = dataclasses.replace(roomy, latency=dataclasses.replace(busy, mean_batch=4.5))  # over half full
    assert "latency rises steeply" in busy_line(near, 10)
    # a 5 ms window fills batches on purpose: "runs whatever is queued" would be false
    windowed = dataclasses.replace(roomy, batching=Batching(max_batch=8, max_wait_ms=5.0))
    assert "latency rises steeply" in busy_line(windowed, 10)
    # a spot-only plan's spare instance serves nothing: 2 instances at 20/s are 10/s of room, 1.0x, not 2.0x
    spot = dataclasses.replace(roomy, purchase="spot", count=2)
    assert "latency rises steeply" in busy_line(spot, 10)
    assert "would serve 20 samples/s, 2.0x" in busy_line(dataclasses.replace(spot, throughput_per_s=40.0), 10)


def test_with_no_feasible_plan_the_closest_is_the_fastest_not_the_cheapest() -> None:
    cat = small_catalog()
    curves = [cpu_curve("c.2x", 20.0, 15.0), cpu_curve("c.4x", 11.0, 8.0)]  # c.4x: faster, dearer
    target = OnlineTarget(rate_per_s=10, latency=LatencyBound(percentile=95, bound_ms=1))
    ranked = rank(plan_online(pair_options(cat.instances, curves, cat.accelerators), target), "online")
    assert not any(c.feasible for c in ranked) and ranked[0].instance == "c.2x"  # ranked by cost
    why, _, _, _ = explain("online", ranked, 95, 1)
    assert why[1].startswith("closest:") and "c.4x" in why[1]


def test_infeasible_reasons_group_by_kind_with_their_numbers_as_ranges() -> None:
    from rightsize.plan.explain import infeasible_summary

    target = OnlineTarget(rate_per_s=10, latency=LatencyBound(percentile=95, bound_ms=1))
    opts = pair_options(small_catalog().instances, [cpu_curve("c.2x", 20.0, 15.0)], {})
    base = rank(plan_online(opts, target), "online")[0]
    cands = []
    for n in (73, 200, 1347):
        cands.append(dataclasses.replace(base, feasible=False, reasons=[f"needs {n} instances > max_instances 64"]))
    cands.append(dataclasses.replace(base, feasible=False, reasons=["over budget: 3 replicas cost $1.02/h > $1/h"]))
    assert infeasible_summary(cands) == {"needs 73-1347 instances > max_instances 64": 3, "over budget": 1}


def test_a_job_won_on_a_wide_band_says_the_slow_edge_would_flip_it() -> None:
    cat = small_catalog()
    target = OnlineTarget(rate_per_s=10, latency=LatencyBound(percentile=95, bound_ms=80))
    base = rank(plan_online(pair_options(cat.instances, [cpu_curve("c.4x", 11.0, 8.0)], cat.accelerators), target),
                "online")[0]  # fmt: skip
    cpu = dataclasses.replace(base, provenance="projected", band=(0.53, 2.59), cost_usd_total=0.22, runtime_hours=0.6)
    gpu = dataclasses.replace(base, device_class="gpu", instance="g.x", provenance="projected", band=(0.6, 1.6),
                              cost_usd_total=0.29, runtime_hours=0.7)  # fmt: skip
    _, _, alt, warnings = explain("batch", [cpu, gpu])
    assert alt is gpu
    [line] = [w for w in warnings if "rests on the projection" in w]
    assert "slow edge of its band (x2.59)" in line and "cost about $0.57" in line and "($0.29)" in line
    assert "1.55 h" in line  # 0.6 h x 2.59
    narrow = dataclasses.replace(cpu, band=(0.8, 1.2))  # 0.22 x 1.2 < 0.29: the answer holds across the band
    assert not any("rests on the projection" in w for w in explain("batch", [narrow, gpu])[3])
    assert not any("rests on the projection" in w for w in explain("online", [cpu, gpu])[3])  # sized at the edge


def test_a_measured_input_stage_replaces_the_rule_of_thumb_warning() -> None:
    """`rightsize pipeline` measured 21 us of input work per item and still warned of a 300/s-per-vCPU JPEG rate."""
    from rightsize.plan.explain import explain
    from rightsize.plan.result import Candidate

    gpu = Candidate(instance="g.t4", provider="aws", region="us-east-1", device_class="gpu", device="T4", count=1,
                    precision="fp16", purchase="on-demand", cost_usd_per_hour=0.53, feasible=True, vcpus=4,
                    provenance="measured", price_date="2025-06",
                    throughput_per_s=4000.0, runtime_hours=1.0, cost_usd_total=0.53)  # fmt: skip
    rule = [w for w in explain("batch", [gpu])[3] if w.startswith("CPU-bound input pipeline risk")]
    assert len(rule) == 1  # 1,000 samples/s per vCPU
    assert not [w for w in explain("batch", [gpu], input_measured=True)[3] if "input pipeline risk" in w]


def test_at_the_same_price_a_precision_the_spec_lists_ranks_first() -> None:
    """bert-finetune lists [fp32, bf16]: an unlisted fp16 at the same price and band had been recommended."""
    best = _best_c4x()
    listed = dataclasses.replace(best, precision="bf16")
    unlisted = dataclasses.replace(best, precision="fp16")
    assert rank([unlisted, listed], "online", ["fp32", "bf16"])[0] is listed
    assert rank([listed, unlisted], "online", ["fp32", "fp16"])[0] is unlisted
    cheaper = dataclasses.replace(unlisted, cost_usd_per_hour=best.cost_usd_per_hour * 0.99)
    assert rank([listed, cheaper], "online", ["fp32", "bf16"])[0] is cheaper  # price still comes first


def test_the_closest_to_a_budget_is_the_cheapest_that_misses_nothing_else() -> None:
    """Against a $0.1/h budget the closest had been the fastest of all (8x H200 at $43/h), not c7a.large at $0.103;
    against max_instances, the one needing the fewest instances (it had named 87058 x c7i.48xlarge)."""
    from rightsize.plan.explain import infeasible_summary

    target = OnlineTarget(rate_per_s=10, latency=LatencyBound(percentile=95, bound_ms=80))
    base = rank(plan_online(pair_options(small_catalog().instances, [cpu_curve("c.4x", 11.0, 8.0)], {}), target),
                "online")[0]  # fmt: skip
    assert base.latency is not None
    fast = dataclasses.replace(base, instance="fast", cost_usd_per_hour=43.0, feasible=False,
                               latency=dataclasses.replace(base.latency, p95=2.0),
                               reasons=["over budget: 1 replicas cost $43.00/h > $0.1/h"])  # fmt: skip
    cheap = dataclasses.replace(base, instance="cheap", cost_usd_per_hour=0.103, feasible=False,
                                reasons=["over budget: 1 replicas cost $0.10/h > $0.1/h"])  # fmt: skip
    slow = dataclasses.replace(
        base, instance="slow", cost_usd_per_hour=0.05, feasible=False, reasons=["p95 300 ms > 80 ms"]
    )  # misses the SLO: not nearer for being cheaper
    why, _, _, _ = explain("online", [slow, cheap, fast], 95, 80)
    assert why[1].startswith("closest:") and "cheap" in why[1]
    big = dataclasses.replace(base, instance="big", count=64, cost_usd_total=9.0, runtime_hours=1.0, feasible=False,
                              reasons=["needs 1364 instances > max_instances 64"])  # fmt: skip
    small = dataclasses.replace(big, instance="small", cost_usd_total=5.0, reasons=["needs 87058 instances > "
                                "max_instances 64"])  # fmt: skip
    why, _, _, _ = explain("batch", [small, big])
    assert why[1].startswith("closest:") and "big" in why[1]
    assert infeasible_summary(
        [big, dataclasses.replace(small, reasons=["needs 52046400 instances > max_instances 64"])]
    ) == {"needs 1364-52046400 instances > max_instances 64": 2}  # not 5.20464e+07


def test_the_other_class_example_quotes_its_own_reason() -> None:
    """`no GPU plan is feasible; e.g. 1 replica on 1x aws g4dn.xlarge ...: over budget: 1 replicas cost $3.67/h`:
    the cheapest GPU row was named with the reason most GPU rows had, another instance's price."""
    rec = _best_c4x()
    gpu = dict(device_class="gpu", feasible=False, device="T4", gpus=1)
    cheap = dataclasses.replace(rec, instance="g.small", cost_usd_per_hour=0.53,
                                reasons=["over budget: 1 replicas cost $0.53/h > $0.12/h"], **gpu)  # fmt: skip
    dear_why = ["over budget: 1 replicas cost $3.67/h > $0.12/h"]
    dear = [dataclasses.replace(rec, instance=f"g.big{i}", cost_usd_per_hour=3.67, reasons=dear_why, **gpu)
            for i in (1, 2)]  # fmt: skip
    _, why_not, _, _ = explain("online", [rec, cheap, *dear], 95, 80)
    (line,) = [w for w in why_not if w.startswith("no GPU plan is feasible")]
    assert "g.small" in line and "$0.53/h > $0.12/h" in line and "$3.67" not in line


def test_an_over_budget_reason_shows_enough_digits_to_differ() -> None:
    """The reason "over budget: 1 replicas cost $0.10/h > $0.1/h" read as a contradiction."""
    from rightsize.plan.verify import mark_over_budget

    near, far = _best_c4x(), _best_c4x()
    near.cost_usd_per_hour, far.cost_usd_per_hour = 0.1004, 0.68
    mark_over_budget(near, 0.1)
    mark_over_budget(far, 0.5)
    assert near.reasons[-1] == "over budget: 1 replicas cost $0.1004/h > $0.1000/h"
    assert far.reasons[-1] == "over budget: 1 replicas cost $0.68/h > $0.50/h"


def test_at_the_same_price_faster_wins_only_beyond_the_simulations_noise() -> None:
    """fp32 (72 ms) and int8 (77 ms) on one c7a.large swapped places with --seed: 7% is inside a long run's
    run-to-run spread, so such a tie keeps the candidates' own order, which no arrival draw moves."""
    best = _best_c4x()
    assert best.latency is not None
    lat = best.latency

    def at(p95: float, precision: str) -> Candidate:
        return dataclasses.replace(best, precision=precision,
                                   latency=dataclasses.replace(lat, p95=p95, p_target_ms=p95))  # fmt: skip

    fp32, int8 = at(77.0, "fp32"), at(72.0, "int8")
    assert rank([fp32, int8], "online")[0] is fp32 and rank([int8, fp32], "online")[0] is int8
    slow = at(110.0, "fp32")  # 53% slower: a real difference, the faster wins
    assert rank([slow, int8], "online")[0] is int8


def test_a_request_mix_batched_across_requests_is_not_told_it_does_not_batch() -> None:
    """mixed-sizes-api at 40 ms: "batching max 32, wait 2 ms, mean batch 2.9" and beside it "no micro-batching":
    the check compared the batch cap with the mix's largest request (32 samples), not its smallest (1)."""
    from rightsize.plan.result import Batching, Candidate, LatencyPrediction

    lat = LatencyPrediction(p50=10.0, p95=32.0, p99=40.0, mean=12.0, n=3000, utilization=0.39, mean_batch=2.9,
                            method="event simulation")  # fmt: skip
    gpu = Candidate(instance="g.t4", provider="aws", region="us-east-1", device_class="gpu", device="T4", count=1,
                    precision="fp16", purchase="on-demand", cost_usd_per_hour=0.53, feasible=True,
                    provenance="projected", price_date="2025-06", batching=Batching(32, 2.0), latency=lat,
                    replicas=1)  # fmt: skip

    def told(**kw: int) -> bool:
        return any("no micro-batching" in w for w in explain("online", [gpu], 95, 40, 32, **kw)[3])  # type: ignore[arg-type]

    assert not told(smallest_request=1)
    assert told()  # one size of 32 samples: a batch of 32 holds one request


def test_a_text_model_gets_no_jpeg_decode_warning() -> None:
    """batch-embedding (DistilBERT) was warned of a 300/s-per-vCPU JPEG decode rate, 'tokenizing is far cheaper'
    in the same breath: the planner now leaves the rule out for a model that reads tokens."""
    from plan_fixtures import gpu_curve, small_catalog

    from rightsize.plan.planner import plan
    from rightsize.spec import Workload

    w = Workload.model_validate({"name": "b", "model": "distilbert", "targets": {
        "batch": {"items": 2_000_000, "deadline_hours": 24}}})  # fmt: skip
    curves = [gpu_curve("T4", 1.0, 0.05)]  # ~16,000 samples/s at batch 256 on a 4-vCPU host

    def rule(text: bool) -> list[str]:
        r = plan(w, curves, small_catalog(), text_input=text)
        assert r.recommendation is not None and r.recommendation.device_class == "gpu"
        return [x for x in r.warnings if x.startswith("CPU-bound input pipeline risk")]

    assert len(rule(False)) == 1 and "about what decoding JPEGs allows)" in rule(False)[0]
    assert rule(True) == []


def test_a_projection_with_no_band_says_so_in_words() -> None:
    """A row scaled from a measured instance of its CPU family read "true times may be x1.00-x1.00 of those shown"."""
    from rightsize.plan.checks import band_words

    assert band_words((1.0, 1.0)).startswith("no band: scaled from timings measured here on its CPU family")
    assert band_words((0.69, 1.54)) == "true times may be x0.69-x1.54 of those shown"


def test_a_plan_over_budget_only_names_the_budget_that_buys_it() -> None:
    """`closest: ... over budget: 1 replicas cost $0.10/h > $0.01/h` named no fix; the budget field and the price
    that buys the closest plan, rounded up (a $0.103/h plan is not bought by $0.10/h)."""
    target = OnlineTarget(rate_per_s=10, latency=LatencyBound(percentile=95, bound_ms=80))
    base = rank(plan_online(pair_options(small_catalog().instances, [cpu_curve("c.4x", 11.0, 8.0)], {}), target),
                "online")[0]  # fmt: skip
    cheap = dataclasses.replace(base, instance="cheap", cost_usd_per_hour=0.103, feasible=False,
                                reasons=["over budget: 1 replicas cost $0.10/h > $0.01/h"])  # fmt: skip
    why, _, _, _ = explain("online", [cheap])
    assert why[2] == "to fix: raise budget_usd_per_hour to $0.11 or more, which buys it", why
    job = dataclasses.replace(cheap, cost_usd_total=12.341, runtime_hours=1.0, reasons=["over budget: $12.34 > $5.00"])
    why, _, _, _ = explain("batch", [job])
    assert why[2] == "to fix: raise budget_usd to $12.35 or more, which buys it", why
    # judged at the band's slow edge: the number it carries, not one read back out of the reason's text
    edge = dataclasses.replace(job, cost_usd_total_at_edge=18.511, reasons=["over budget at the pessimistic edge of "
                               "the projection band (x1.50 on the work): $18.51 > $5.00 (median $12.34)"])  # fmt: skip
    why, _, _, _ = explain("batch", [edge])
    assert why[2] == "to fix: raise budget_usd to $18.52 or more, which buys it", why
    slow = dataclasses.replace(cheap, reasons=["over budget: 1 replicas cost $0.10/h > $0.01/h", "p95 300 ms > 80 ms"])
    why, _, _, _ = explain("online", [slow])
    assert not any(w.startswith("to fix: raise budget") for w in why), why  # a budget alone would not buy it


def test_at_one_price_and_speed_a_measured_plan_ranks_before_a_projected_one_on_fewer_machines() -> None:
    """text-classification-api ranked 1 x c7a.xlarge (projected, $0.20528/h) above 2 x c7a.large (measured, 2 x
    $0.10264/h), both p95 78.8 ms, on fewer machines, then told the user to validate the projected pick."""
    best = _best_c4x()
    assert best.latency is not None and best.curve is not None
    measured = dataclasses.replace(best, instance="c.2x", count=2, provenance="measured", cost_usd_per_hour=0.1 + 0.2)
    projected = dataclasses.replace(best, instance="c.4x", count=1, provenance="projected", cost_usd_per_hour=0.3,
                                    curve=dataclasses.replace(best.curve, provenance="projected"))  # fmt: skip
    assert measured.cost_usd_per_hour != projected.cost_usd_per_hour  # 0.30000000000000004: equal within 1e-6
    assert rank([projected, measured], "online")[0] is measured
    cheaper = dataclasses.replace(projected, cost_usd_per_hour=0.3 * (1 - 1e-4))
    assert rank([cheaper, measured], "online")[0] is cheaper  # a real difference in price still decides
    assert best.latency is not None
    slower = dataclasses.replace(
        measured,
        latency=dataclasses.replace(
            best.latency, p95=best.latency.p95 * 2, p_target_ms=(best.latency.p_target_ms or 0) * 2
        ),
    )
    assert rank([slower, projected], "online")[0] is projected  # and a real difference in speed
