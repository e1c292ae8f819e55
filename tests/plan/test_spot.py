"""Spot math against docs/sources.md `young-daly`'s worked check (Young/Daly), and the mixed policy."""

from __future__ import annotations

import math

import pytest

from rightsize.plan.spot import daly_interval_hours, daly_wall_hours, simulate_spot, young_interval_hours

DELTA_H, RESTART_H, WORK_H = 5 / 60, 15 / 60, 100.0


@pytest.mark.parametrize(
    ("mtbi_h", "tau_min", "wall_h"),
    [(24.0, 117.0, 110.0), (6.0, 57.0, 124.0), (2.0, 31.0, 154.0)],  # docs/sources.md `young-daly` worked check
)
def test_daly_matches_the_worked_check(mtbi_h: float, tau_min: float, wall_h: float) -> None:
    assert daly_interval_hours(DELTA_H, mtbi_h) * 60 == pytest.approx(tau_min, abs=1.0)
    assert daly_wall_hours(WORK_H, DELTA_H, RESTART_H, mtbi_h) == pytest.approx(wall_h, abs=1.0)


def test_young_is_the_first_order_term() -> None:
    assert young_interval_hours(DELTA_H, 24.0) == pytest.approx(math.sqrt(2 * DELTA_H * 24.0))
    assert daly_interval_hours(DELTA_H, 24.0) < young_interval_hours(DELTA_H, 24.0)  # minus delta, plus small terms


@pytest.mark.parametrize("mtbi_h", [24.0, 6.0, 2.0])
def test_monte_carlo_agrees_with_daly(mtbi_h: float) -> None:
    run = simulate_spot(WORK_H, 1 / mtbi_h, DELTA_H, RESTART_H, 1.0, 3.0, samples=1500, seed=1)
    assert run.expected_hours == pytest.approx(daly_wall_hours(WORK_H, DELTA_H, RESTART_H, mtbi_h), rel=0.02)
    assert run.expected_cost_usd == pytest.approx(run.expected_hours * 1.0, rel=1e-9)  # all of it at the spot price


def test_deadline_odds_and_the_mixed_policy() -> None:
    # M = 2 h: spot alone needs ~154 h on average; with a 130 h deadline it almost never makes it
    spot = simulate_spot(WORK_H, 0.5, DELTA_H, RESTART_H, 1.0, 3.0, deadline_hours=130, samples=800, seed=2)
    assert spot.p_meet_deadline is not None and spot.p_meet_deadline < 0.05
    mixed = simulate_spot(
        WORK_H, 0.5, DELTA_H, RESTART_H, 1.0, 3.0, deadline_hours=130, policy="mixed", samples=800, seed=2
    )
    assert mixed.p_meet_deadline is not None and mixed.p_meet_deadline > 0.95
    # cheaper than all on-demand (100 h x $3) because part of the work ran on spot
    assert mixed.expected_cost_usd < 300.0
    assert 0 < mixed.expected_spot_hours < mixed.expected_hours


def test_no_interruptions_means_no_overhead() -> None:
    run = simulate_spot(10.0, 0.0, DELTA_H, RESTART_H, 1.0, 3.0, deadline_hours=10.0)
    assert run.expected_hours == 10.0 and run.p_meet_deadline == 1.0
    assert daly_wall_hours(10.0, DELTA_H, RESTART_H, math.inf) == 10.0


def test_deadline_odds_fall_as_the_projection_band_widens() -> None:
    from rightsize.plan.spot import simulate_spot

    args = (10.0, 1 / 24.0, 5 / 60.0, 0.25, 1.0, 3.0, 12.0)
    bands = ((1.0, 1.0), (0.7, 1.5), (0.5, 2.0))
    odds = [simulate_spot(*args, samples=4000, seed=1, band=b).p_meet_deadline or 0.0 for b in bands]
    assert odds[0] > odds[1] + 0.05 and odds[1] > odds[2]  # an uncertain projection misses deadlines more often


def test_a_spot_row_never_interrupted_still_carries_the_projection_band() -> None:
    """With no interruption rate the odds are the band's alone (they had dropped it: 100% whatever the band)."""
    sure = simulate_spot(10.0, 0.0, DELTA_H, RESTART_H, 1.0, 3.0, deadline_hours=12.0, samples=4000, seed=1)
    unsure = simulate_spot(10.0, 0.0, DELTA_H, RESTART_H, 1.0, 3.0, deadline_hours=12.0, samples=4000, seed=1,
                           band=(0.7, 1.5))  # fmt: skip
    assert sure.p_meet_deadline == 1.0
    assert unsure.p_meet_deadline is not None and 0.5 < unsure.p_meet_deadline < 0.95


def test_the_spot_odds_line_says_the_band_is_in_them() -> None:
    from rightsize.plan.explain import _perf
    from rightsize.plan.result import Candidate, SpotPlan

    c = Candidate(instance="g5.xlarge", provider="aws", region="us-east-1", device_class="gpu", device="A10G", count=1,
                  precision="fp16", purchase="spot", cost_usd_per_hour=0.4, feasible=True, provenance="projected",
                  price_date="2026-01-01", runtime_hours=3.0, band=(0.69, 1.54),
                  spot=SpotPlan(0.05, 30.0, 3.2, 0.97, "spot", 1.3))  # fmt: skip
    assert _perf(c, "batch", 95).endswith(
        "meets the deadline in 97% of simulated runs (interruptions and the projection band x0.69-x1.54)"
    )


def test_a_job_shorter_than_the_checkpoint_interval_is_told_it_needs_none() -> None:
    """A 24-minute job on spot had been told to checkpoint every 1,315 min."""
    from rightsize.plan.checks import check_warnings
    from rightsize.plan.result import Candidate, SpotPlan

    def spot(runtime_hours: float) -> Candidate:
        return Candidate(instance="g6.xlarge", provider="aws", region="us-east-1", device_class="gpu", device="L4",
                         count=1, precision="fp16", purchase="spot", cost_usd_per_hour=0.4, feasible=True,
                         provenance="projected", price_date="2026-01-01", runtime_hours=runtime_hours,
                         spot=SpotPlan(3.5e-05, 1315.0, runtime_hours, 1.0, "spot", 0.2))  # fmt: skip

    short = [w for w in check_warnings("batch", spot(0.4), None, 1) if w.startswith("spot:")]
    assert short == ["spot: 3.5e-05 interruptions/h assumed; no checkpoint needed: Young/Daly's interval (1,315 min) "
                     "is longer than the job (24 min of work); an interruption restarts it"]  # fmt: skip
    long = [w for w in check_warnings("batch", spot(48.0), None, 1) if w.startswith("spot:")]
    assert long[0].endswith("checkpoint every 1315 min (Young/Daly)")


def test_odds_reach_the_cheapest_feasible_rows_past_refused_ones() -> None:
    """The 16 cheapest spot rows were all refused by their odds and the feasible ones after them had none."""
    from rightsize.plan.job_costs import spot_odds
    from rightsize.plan.result import Candidate, SpotPlan

    def row(i: int, work_h: float) -> Candidate:
        spot = SpotPlan(interruptions_per_hour=2.0, checkpoint_interval_min=5.0, expected_hours=work_h,
                        p_meet_deadline=None, policy="spot", expected_cost_usd=float(i))  # fmt: skip
        return Candidate(instance=f"c{i}", provider="aws", region="us-east-1", device_class="cpu", device="cpu",
                         count=1, precision="fp32", purchase="spot", cost_usd_per_hour=1.0, feasible=True,
                         provenance="measured", price_date="2025-06", cost_usd_total=float(i), spot=spot,
                         cold_start_s=0.0)  # fmt: skip

    tight = [row(i, 0.99) for i in range(18)]  # 0.99 h of work for a 1 h deadline at 2 interruptions/h: refused
    easy = [row(100 + i, 0.2) for i in range(2)]
    cands = [*tight, *easy]
    spot_odds(cands, {id(c): c.spot.expected_hours for c in cands}, 1.0, None, 0.01, 0.05, top=16)  # type: ignore[union-attr]
    assert not any(c.feasible for c in tight)
    assert all(c.feasible and c.spot is not None and c.spot.p_meet_deadline is not None for c in easy)


def test_switching_to_on_demand_never_lowers_the_deadline_odds_under_a_band() -> None:
    """Each run's wall clock was scaled by its drawn speed after the policy had decided on nominal work: a slow run
    switched too late, and mixed (spot, then on-demand when the slack runs out) met a 4.5 h deadline less often
    than pure spot on the same fleet (0.861 vs 0.878)."""
    args = (3.0, 0.5, 0.05, 0.1, 0.06, 0.53)
    for due in (3.6, 4.5, 5.0):
        spot = simulate_spot(*args, due, policy="spot", samples=1000, seed=0, band=(0.69, 1.54))
        mixed = simulate_spot(*args, due, policy="mixed", samples=1000, seed=0, band=(0.69, 1.54))
        assert (mixed.p_meet_deadline or 0.0) >= (spot.p_meet_deadline or 0.0), due
        assert mixed.expected_hours <= spot.expected_hours
    # it meets the deadline whenever the run's own work fits on on-demand: speed <= (4.5 - 0.1) / 3, ~93% of runs
    late = simulate_spot(*args, 4.5, policy="mixed", samples=1000, seed=0, band=(0.69, 1.54))
    assert (late.p_meet_deadline or 0.0) >= 0.9  # 0.72 when the policy switched on nominal work


def test_a_mixed_row_is_costed_on_its_spot_rows_basis() -> None:
    """The spot row's runtime is the closed form at the median speed, the mixed row's was the simulated mean over
    the band (x1.06 slower on average): mixed read 5% slower and dearer than spot for that alone."""
    from rightsize.plan.job_costs import spot_odds
    from rightsize.plan.result import Candidate, SpotPlan

    def row(purchase: str, price: float) -> Candidate:
        spot = SpotPlan(interruptions_per_hour=0.5, checkpoint_interval_min=5.0, expected_hours=3.335,
                        p_meet_deadline=None, policy="spot", expected_cost_usd=3.335 * price)  # fmt: skip
        return Candidate(instance="g", provider="aws", region="us-east-1", device_class="gpu", device="T4",
                         count=1, precision="fp16", purchase=purchase, cost_usd_per_hour=price, feasible=True,
                         provenance="projected", price_date="2025-06", runtime_hours=3.335,
                         cost_usd_total=3.335 * price, spot=spot if purchase == "spot" else None, cold_start_s=0.0,
                         band=(0.69, 1.54))  # fmt: skip

    spot, od = row("spot", 0.06), row("on-demand", 0.53)
    (mixed,) = spot_odds([spot, od], {id(spot): 3.0}, 6.0, None, 0.05, 0.1)
    assert mixed.runtime_hours is not None and mixed.cost_usd_total is not None
    # 3 h of slack at the median speed: the policy hardly ever switches, so mixed reads as spot (MC noise apart)
    assert mixed.runtime_hours == pytest.approx(spot.runtime_hours, abs=0.02)
    assert spot.cost_usd_total <= mixed.cost_usd_total  # type: ignore[operator]  # on-demand hours cost more
    # its $/h is the run's average: it had shown the spot price, and $/h x hours did not give the total
    assert mixed.cost_usd_per_hour * mixed.runtime_hours == pytest.approx(mixed.cost_usd_total)


def test_a_run_switched_before_it_starts_pays_no_restart() -> None:
    """A 0.26 h deadline for 0.2 h of work: the mixed rule switched every run before its first segment and charged
    it a restart it never had (10 min): it met the deadline in 5% of runs where spot met it in 94%."""
    args = (0.2, 0.5, 5 / 60, 10 / 60, 0.06, 0.53, 0.257)
    spot = simulate_spot(*args, policy="spot", samples=1000, seed=0, band=(0.69, 1.54))
    mixed = simulate_spot(*args, policy="mixed", samples=1000, seed=0, band=(0.69, 1.54))
    assert (mixed.p_meet_deadline or 0.0) >= (spot.p_meet_deadline or 0.0)
    assert mixed.expected_hours <= 0.2 * 1.6  # the work on on-demand, no restart


def test_a_mixed_rows_budget_is_judged_at_the_band_edge_too() -> None:
    """Every other job row met its budget at the band's slow edge; the mixed row dropped that reason with the
    others it re-judges and checked its median cost only, so a mixed plan over the budget there was recommended."""
    from rightsize.plan.job_costs import spot_odds
    from rightsize.plan.result import Candidate, SpotPlan

    def rows() -> tuple[Candidate, Candidate]:
        spot = SpotPlan(interruptions_per_hour=3.0, checkpoint_interval_min=5.0, expected_hours=2.0,
                        p_meet_deadline=None, policy="spot", expected_cost_usd=0.12)  # fmt: skip
        common = dict(instance="g", provider="aws", region="us-east-1", device_class="gpu", device="T4", count=1,
                      precision="fp16", feasible=True, provenance="projected", price_date="2025-06",
                      runtime_hours=2.0, cold_start_s=0.0, band=(0.69, 1.54))  # fmt: skip
        return (Candidate(purchase="spot", cost_usd_per_hour=0.06, cost_usd_total=0.12, spot=spot, **common),
                Candidate(purchase="on-demand", cost_usd_per_hour=0.53, cost_usd_total=1.06, **common))  # fmt: skip

    spot, od = rows()
    (free,) = spot_odds([spot, od], {id(spot): 1.6}, 3.0, None, 0.05, 0.1)
    assert free.feasible and free.cost_usd_total is not None
    spot, od = rows()
    (tight,) = spot_odds([spot, od], {id(spot): 1.6}, 3.0, free.cost_usd_total * 1.05, 0.05, 0.1)
    assert not tight.feasible
    assert tight.reasons[-1].startswith("over budget at the pessimistic edge of the projection band (x1.54")


def test_a_mixed_row_misses_a_deadline_at_the_band_edge_as_its_twins_do() -> None:
    """bert-finetune with a 15 min deadline: p4d on-demand and spot were refused at the band's slow edge (15.9 min),
    the mixed row dropped that reason with the spot odds it re-judges and was recommended at $3.07."""
    from rightsize.plan.job_costs import deadline_miss, spot_odds
    from rightsize.plan.result import Candidate, SpotPlan

    def rows(hours: float) -> tuple[Candidate, Candidate]:
        spot = SpotPlan(interruptions_per_hour=0.02, checkpoint_interval_min=5.0, expected_hours=hours,
                        p_meet_deadline=None, policy="spot", expected_cost_usd=hours * 0.06)  # fmt: skip
        common = dict(instance="g", provider="aws", region="us-east-1", device_class="gpu", device="T4", count=1,
                      precision="fp16", feasible=True, provenance="projected", price_date="2025-06",
                      runtime_hours=hours, cold_start_s=0.0, band=(0.69, 1.54))  # fmt: skip
        on_spot = Candidate(purchase="spot", cost_usd_per_hour=0.06, cost_usd_total=hours * 0.06, spot=spot, **common)
        return on_spot, Candidate(purchase="on-demand", cost_usd_per_hour=0.53, cost_usd_total=hours * 0.53, **common)

    spot, od = rows(1.96)  # 1.96 h x 1.54 = 3.0 h at the edge: past a 2.8 h deadline, inside it at the median
    (mixed,) = spot_odds([spot, od], {id(spot): 1.95}, 2.8, None, 0.05, 0.1)
    assert mixed.runtime_hours is not None and mixed.runtime_hours * 1.54 > 2.8 > mixed.runtime_hours
    assert not mixed.feasible
    assert any(r.startswith("misses the deadline at the pessimistic edge of the projection band (x1.54") for r in
               mixed.reasons)  # fmt: skip
    assert deadline_miss(1.0, 0.0, 1.54, 2.5) is None and deadline_miss(3.0, 0.0, 1.0, 2.5) == (
        "misses the deadline: 3 h > 2.5 h")  # fmt: skip


def test_a_mixed_row_is_judged_at_the_band_edge_on_its_work_not_its_interruptions() -> None:
    """A T4 fine-tune at 1.5 interruptions/h: its mixed row (expected 3.3 h) was refused at 5.03 h > 5 h, the whole
    expected time stretched by x1.54, though its simulated odds on the band were 98.7% and the work alone at the
    edge takes 2.1 h: the policy falls back to on-demand when the slack runs out."""
    from rightsize.plan.job_costs import spot_odds
    from rightsize.plan.result import Candidate, SpotPlan

    work, hours = 1.336, 3.318
    spot_plan = SpotPlan(interruptions_per_hour=1.5, checkpoint_interval_min=17.0, expected_hours=hours,
                         p_meet_deadline=None, policy="spot", expected_cost_usd=hours * 0.06)  # fmt: skip
    common = dict(instance="g", provider="aws", region="us-east-1", device_class="gpu", device="T4", count=1,
                  precision="fp16", feasible=True, provenance="projected", price_date="2025-06", cold_start_s=0.0,
                  band=(0.69, 1.54))  # fmt: skip
    spot = Candidate(purchase="spot", cost_usd_per_hour=0.06, cost_usd_total=hours * 0.06, runtime_hours=hours,
                     spot=spot_plan, **common)  # fmt: skip
    od = Candidate(purchase="on-demand", cost_usd_per_hour=0.53, cost_usd_total=work * 0.53, runtime_hours=work,
                   **common)  # fmt: skip
    (mixed,) = spot_odds([spot, od], {id(spot): work}, 4.5, None, 5 / 60, 0.25)
    assert mixed.runtime_hours is not None and mixed.runtime_hours * 1.54 > 4.5  # the old rule's refusal
    assert mixed.spot is not None and (mixed.spot.p_meet_deadline or 0) >= 0.9
    assert mixed.feasible, mixed.reasons


def test_a_job_that_ends_before_its_first_checkpoint_is_costed_as_restarted_not_checkpointed() -> None:
    """An 18-minute spot job (12 min of work, Young/Daly's interval 21 min) was told it needs no checkpoint, then
    costed with Daly's checkpointed formula: 0.3056 h expected against 0.2719 h for a job an interruption restarts
    (12% high); the note also compared the interval with the runtime, spin-up included."""
    import dataclasses

    from rightsize.plan.checks import check_warnings
    from rightsize.plan.result import Candidate, SpotPlan
    from rightsize.plan.spot import daly_interval_hours, daly_wall_hours

    work, ckpt, restart, mtbi = 0.2001, 2 / 60, 10 / 60, 2.0
    assert daly_interval_hours(ckpt, mtbi) > work
    restarted = mtbi * math.exp(restart / mtbi) * math.expm1(work / mtbi)
    assert daly_wall_hours(work, ckpt, restart, mtbi) == pytest.approx(restarted) == pytest.approx(0.2288, abs=1e-3)
    assert daly_wall_hours(5.0, ckpt, restart, mtbi) > 5.0 + ckpt * 5.0 / daly_interval_hours(
        ckpt, mtbi
    )  # long: as before
    job = Candidate(instance="g6.xlarge", provider="aws", region="us-east-1", device_class="gpu", device="L4", count=1,
                    precision="fp16", purchase="spot", cost_usd_per_hour=0.4, feasible=True, provenance="projected",
                    price_date="2026-01-01", runtime_hours=0.29, cold_start_s=515.0,
                    spot=SpotPlan(0.5, 26.0, 0.29, 1.0, "spot", 0.2))  # fmt: skip
    note = next(w for w in check_warnings("batch", job, None, 1) if w.startswith("spot:"))
    assert "no checkpoint needed" in note and "(9 min of work)" in note  # 17.4 min less 8.6 of spin-up
    often = dataclasses.replace(job, spot=dataclasses.replace(job.spot, checkpoint_interval_min=6.0))
    note = next(w for w in check_warnings("batch", often, None, 1) if w.startswith("spot:"))
    assert "checkpoint every 6 min (Young/Daly)" in note  # 6 min: inside the 9 minutes of work


def test_free_checkpoints_are_saved_every_step_and_lose_no_work() -> None:
    """checkpoint_minutes 0 (bl0.yaml: 60 BERT epochs, 1 interruption/h) read "no checkpoint needed: Young/Daly's
    interval (inf min) ... an interruption restarts it" while costed as losing nothing: sqrt(2 delta M) is 0."""
    from rightsize.plan.checks import check_warnings
    from rightsize.plan.result import Candidate, SpotPlan

    work, restart = 2.5738, 10 / 60  # bl0's T4 row: 2.57 h of work, restart_minutes 10, M = 1 h
    assert daly_interval_hours(0.0, 1.0) == 0.0
    assert (
        daly_wall_hours(work, 0.0, restart, 1.0)
        == pytest.approx(work * math.exp(restart))
        == pytest.approx(3.0406, abs=1e-3)
    )  # W e^{R/M}: each of the W/M interruptions costs a restart, M (e^{R/M} - 1) with its retries
    run = simulate_spot(work, 1.0, 0.0, restart, 1.0, 3.0, deadline_hours=8.0, samples=4000, seed=3)
    assert run.interval_hours == 0.0 and run.expected_hours == pytest.approx(3.0406, rel=0.02)
    assert run.p_meet_deadline == 1.0
    # free restarts too: nothing at all is lost (a 1/50-of-the-job grain had lost half a grain per interruption)
    exact = simulate_spot(3.0, 1.0, 0.0, 0.0, 1.0, 3.0, deadline_hours=3.0001, samples=500, seed=3)
    assert exact.expected_hours == pytest.approx(3.0) and exact.p_meet_deadline == 1.0
    mixed = simulate_spot(3.0, 1.0, 0.0, 0.5, 1.0, 3.0, deadline_hours=4.5, policy="mixed", samples=2000, seed=3)
    assert mixed.p_meet_deadline == 1.0 and 0 < mixed.expected_spot_hours < mixed.expected_hours
    job = Candidate(instance="Standard_NC4as_T4_v3", provider="azure", region="eastus", device_class="gpu",
                    device="T4", count=1, precision="fp16", purchase="spot", cost_usd_per_hour=0.063, feasible=True,
                    provenance="projected", price_date="2025-06-01", runtime_hours=3.18, cold_start_s=515.0,
                    spot=SpotPlan(1.0, 0.0, 3.18, 1.0, "spot", 0.2, 1.0, work))  # fmt: skip
    note = next(w for w in check_warnings("training", job, None, 1) if w.startswith("spot:"))
    assert note == ("spot: 1 interruptions/h assumed; checkpoints cost nothing (checkpoint_minutes 0): save every "
                    "step, an interruption loses only its restart")  # fmt: skip


def test_a_job_without_checkpoints_loses_all_its_work_at_each_interruption() -> None:
    """bertlong.yaml with checkpoint_minutes 120 at 0.2 interruptions/h: Young/Daly's interval (194 min) is longer
    than the 154 min of work, so an interruption restarts the job from scratch, in the closed form and the odds;
    the note weighs the interval against the work (it had used the expected wall time less spin-up: "182 min of
    work" at 1 interruption/h, "160" at 0.2/h for the same job)."""
    from rightsize.plan.checks import check_warnings
    from rightsize.plan.result import Candidate, SpotPlan

    work, ckpt, restart, mtbi = 2.5738, 2.0, 10 / 60, 5.0
    assert daly_interval_hours(ckpt, mtbi) * 60 == pytest.approx(194.3, abs=0.1)
    restarted = mtbi * math.exp(restart / mtbi) * math.expm1(work / mtbi)
    assert daly_wall_hours(work, ckpt, restart, mtbi) == pytest.approx(restarted) == pytest.approx(3.4803, abs=1e-3)
    run = simulate_spot(work, 1 / mtbi, ckpt, restart, 1.0, 3.0, deadline_hours=work + 0.1, samples=4000, seed=4)
    assert run.expected_hours == pytest.approx(3.4803, rel=0.03)
    # only an uninterrupted first try finishes within 0.1 h of the work: e^{-W/M} = 0.598
    assert run.p_meet_deadline == pytest.approx(math.exp(-work / mtbi), abs=0.03)
    job = Candidate(instance="Standard_NC4as_T4_v3", provider="azure", region="eastus", device_class="gpu",
                    device="T4", count=1, precision="fp16", purchase="spot", cost_usd_per_hour=0.063, feasible=True,
                    provenance="projected", price_date="2025-06-01", runtime_hours=3.62, cold_start_s=515.0,
                    spot=SpotPlan(0.2, 194.3, 3.62, 0.97, "spot", 0.23, 0.2, work))  # fmt: skip
    note = next(w for w in check_warnings("training", job, None, 1) if w.startswith("spot:"))
    assert note.endswith("Young/Daly's interval (194 min) is longer than the job (154 min of work); an interruption "
                         "restarts it")  # fmt: skip


def test_a_mixed_row_is_never_faster_than_its_work_uninterrupted() -> None:
    """bertlong.yaml with checkpoint_minutes 120 (no checkpoint, restarts from scratch): across the band x0.69-x1.54
    the slow runs' e^{W/M} made spot's mean 4.61 h against 3.51 h at the median, and the mixed row, costed as the
    spot row plus that band-wide difference, read 2.34 h: faster than its 2.57 h of work plus 8.6 min of spin-up."""
    from rightsize.plan.job_costs import spot_odds
    from rightsize.plan.result import Candidate, SpotPlan

    work, up_s, restart, ckpt = 2.5738, 515.0, 10 / 60, 2.0
    closed = daly_wall_hours(work, ckpt, restart, 5.0) + up_s / 3600  # 3.480 + 0.143 = 3.623 h

    def row(purchase: str, price: float, hours: float) -> Candidate:
        spot = SpotPlan(0.2, 194.3, hours, None, "spot", hours * price, 0.2, work)
        return Candidate(instance="Standard_NC4as_T4_v3", provider="azure", region="eastus", device_class="gpu",
                         device="T4", count=1, precision="fp16", purchase=purchase, cost_usd_per_hour=price,
                         feasible=True, provenance="projected", price_date="2025-06", runtime_hours=hours,
                         cost_usd_total=hours * price, spot=spot if purchase == "spot" else None, cold_start_s=up_s,
                         band=(0.6877, 1.5401))  # fmt: skip

    spot, od = row("spot", 0.063, closed), row("on-demand", 0.526, work + up_s / 3600)
    (mixed,) = spot_odds([spot, od], {id(spot): work}, 8.0, None, ckpt, restart)
    assert mixed.runtime_hours is not None and od.runtime_hours is not None
    assert mixed.runtime_hours >= od.runtime_hours  # 2.717 h: it had read 2.34
    assert mixed.runtime_hours == pytest.approx(3.44, abs=0.05)  # 3.623 + (3.32 - 3.51) at the median speed
    assert mixed.spot is not None and mixed.spot.p_meet_deadline == 1.0
