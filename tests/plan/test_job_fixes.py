"""A job plan with no answer names what to change, at the numbers that buy it (the probe of batch and training
specs: budgets quoted at the median, "closest" picked past the spin-up, a host-bound GPU row left unsaid)."""

from __future__ import annotations

import dataclasses

from plan_fixtures import cpu_curve, gpu_curve, small_catalog

from rightsize.plan.batch import plan_batch
from rightsize.plan.checks import host_bound_note
from rightsize.plan.explain import explain
from rightsize.plan.job_costs import finish, missed_words
from rightsize.plan.options import pair_options
from rightsize.plan.result import Batching, Candidate
from rightsize.spec.targets import BatchTarget
from rightsize.units import format_hours_apart, format_usd_apart


def _l4_x2() -> Candidate:
    """rb2's closest row: 2 g6.xlarge spot at $0.805/h, 20M items at 1,899/s (2.926 h of work), spin-up 0.143 h."""
    cat = small_catalog()
    projected = dataclasses.replace(cpu_curve("c.2x", 10.0, 10.0), provenance="projected", band_lo=0.69, band_hi=1.54)
    (c, *_) = plan_batch(pair_options(cat.instances[:1], [projected], cat.accelerators),
                         BatchTarget(items=1000, deadline_hours=10, max_instances=1), ["on_demand"])  # fmt: skip
    return dataclasses.replace(c, cost_usd_per_hour=0.805, reasons=[], notes=[])


def test_the_budget_and_its_fix_are_both_at_the_band_edge() -> None:
    """rb2 (budget $2) said "over budget: $2.47 > $2.00", "to fix: raise budget_usd to $2.48"; at $3 the same row was
    "over budget at the pessimistic edge ...: $3.74 > $3.00" and the fix moved to $3.75. (2.926 h x 1.54 + 0.143 h)
    x $0.805/h = $3.74: the first run says $3.75, and $3.75 buys it."""
    for budget in (2.0, 3.0):
        c = _l4_x2()
        finish(c, 2.926 + 0.143, None, budget, fixed_hours=0.143)
        assert c.cost_usd_total_at_edge is not None and round(c.cost_usd_total_at_edge, 2) == 3.74
        assert c.reasons == [f"over budget at the pessimistic edge of the projection band (x1.54 on the work): "
                             f"$3.74 > ${budget:.2f} (median $2.47)"]  # fmt: skip
        why, *_ = explain("batch", [c])
        assert why[-1] == "to fix: raise budget_usd to $3.75 or more, which buys it", why
        # the frontier names the edge it misses at: "$2.47, misses the budget" against $3.00 read as a contradiction
        assert missed_words(c) == ["the budget at the band's slow edge: $3.74"]
    c = _l4_x2()
    finish(c, 2.926 + 0.143, None, 3.75, fixed_hours=0.143)
    assert c.feasible and not c.reasons and missed_words(c) == []


def test_a_tiny_budget_reads_with_its_digits() -> None:
    """bud_tiny: "over budget: $0.10 > $0.00" against budget_usd 0.0001."""
    c = dataclasses.replace(_l4_x2(), band=(1.0, 1.0), cost_usd_per_hour=0.4)
    finish(c, 0.25, None, 0.0001, fixed_hours=0.143)
    assert c.reasons == ["over budget: $0.10 > $0.0001"]
    assert format_usd_apart(2.004, 2.0) == ("$2.004", "$2.000")


def test_an_impossible_deadline_names_the_shortest_spin_up_and_the_fix() -> None:
    """r50_1s / dl1s, a 1 s deadline: "spin-up alone (2.58-8.58 min) exceeds the 0.0167 min deadline", "closest" an
    A100 at 8.58 min of spin-up (the fastest to run) and no "to fix"."""
    cat = small_catalog()
    curves = [cpu_curve("c.2x", 10.0, 10.0), gpu_curve("T4", 5.0, 0.5)]
    one_s = 1 / 3600
    cands = plan_batch(
        pair_options(cat.instances, curves, cat.accelerators), BatchTarget(items=10, deadline_hours=one_s)
    )
    assert cands and all(not c.feasible for c in cands)
    cpu = next(c for c in cands if c.device_class == "cpu")
    assert cpu.reasons == [
        "spin-up alone (155 s) exceeds the 1 s deadline"
    ]  # one unit, not "2.58 min" and "0.0167 min"
    why, *_ = explain("batch", cands)
    assert why[0].endswith("spin-up alone (155-515 s) exceeds the 1 s deadline (2)"), why
    assert why[1].startswith("closest: 1 instance on 1x") and "vCPU" in why[1], why  # 155 s, not the GPU's 515 s
    assert (
        why[2] == "to fix: raise deadline_hours to more than 0.0431: the shortest spin-up is 2.58 min, before any work"
    )
    assert format_hours_apart(2.93, one_s) == ("2.93 h", "1 s")  # hours stay hours


def test_a_missed_deadline_names_the_deadline_that_buys_the_closest() -> None:
    """bert_big_d8: the closest, one A100 at 6.69 h median, 11.5 h at the band's slow edge, named no fix."""
    c = dataclasses.replace(_l4_x2(), band=(0.6, 1.74), cost_usd_per_hour=3.67)
    finish(c, 6.69, 8.0, None, fixed_hours=0.143)
    assert c.runtime_hours_at_edge is not None and round(c.runtime_hours_at_edge, 2) == 11.53
    why, *_ = explain("training", [c], global_batch=32)
    assert why[-1] == "to fix: raise deadline_hours to 11.6 or more, which buys it (11.5 h at the band's slow edge)"
    assert missed_words(c) == ["the deadline at the band's slow edge: 11.5 h"]
    finish(c, 6.69, 11.6, None, fixed_hours=0.143)
    assert c.feasible


def test_a_host_bound_gpu_row_says_a_faster_gpu_will_not_help() -> None:
    """bert_big_d24: A100-40GB, A100-80GB and H100 all read 857 samples/s (tf32) with nothing saying the step is the
    host's dispatch, while an H100 cost 1.9x an A100."""
    curve = gpu_curve("A100", 37.0, 0.01)
    base = dict(instance="a", provider="aws", region="r", device_class="gpu", device="A100", count=1, precision="tf32",
                purchase="on-demand", cost_usd_per_hour=3.67, feasible=True, provenance="projected",
                price_date="2025-06", runtime_hours=6.69, cost_usd_total=24.58, batching=Batching(32, 0.0))  # fmt: skip
    bound = Candidate(**base, curve=dataclasses.replace(curve, device_share=(0.4,) * len(curve.batch_sizes)))  # type: ignore[arg-type]
    free = Candidate(**base, curve=curve)  # type: ignore[arg-type]
    note = host_bound_note(bound, [bound], "training")
    assert note == ("host-bound: this step is limited by Python/dispatch on the host (~37 ms/step on A100); a faster "
                    "GPU will not speed it up; a larger batch per GPU or torch.compile/CUDA graphs would")  # fmt: skip
    assert host_bound_note(free, [free], "training") is None  # only when true
    assert (
        host_bound_note(free, [free, dataclasses.replace(bound, runtime_hours=5.0)], "training") == note
    )  # the fastest row's, when the pick is device-bound
    assert host_bound_note(bound, [bound], "online") is None
