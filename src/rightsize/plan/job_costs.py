"""Pieces shared by the job planners (offline batch and training): deadline/budget checks and spot
variants with Young/Daly expected time, Monte Carlo deadline odds and the mixed policy.
"""

from __future__ import annotations

import math
from dataclasses import replace

from rightsize.catalog.model import Instance
from rightsize.plan.result import Candidate, SpotPlan
from rightsize.plan.spot import daly_interval_hours, daly_wall_hours, simulate_spot
from rightsize.plan.verify import NO_SPOT_RATE
from rightsize.units import format_hours, format_hours_apart, format_usd, format_usd_apart

__all__ = [
    "MIN_P_MEET", "copy_candidate", "finish", "missed_targets", "missed_words", "spin_up_miss", "spot_odds",
    "spot_variant", "unrated_spot_note",
]  # fmt: skip

MIN_P_MEET = 0.9  # a spot plan must meet the deadline in at least 90% of simulated runs


# A job candidate's reasons that a looser target lifts (a later deadline, a bigger budget, more instances), by the
# words they start with; any other reason (no spot estimate, no memory, ...) no target setting lifts.
_TARGET_REASONS = (
    ("misses the deadline", "the deadline"),
    ("spin-up alone", "the deadline"),
    ("spot meets the deadline in only", "the deadline"),
    ("mixed policy meets the deadline in only", "the deadline"),
    ("over budget", "the budget"),
    ("needs ", "max_instances"),  # "needs 12 instances > max_instances 8"
)


def missed_targets(c: Candidate) -> list[str] | None:
    """The targets an infeasible job candidate misses ("the deadline", "the budget", "max_instances"), once each in
    order; [] for a feasible one; None when some reason is not a missed target: a looser target would not buy it,
    so a job's Pareto frontier leaves it out."""
    if not c.feasible and not c.reasons:
        return None  # infeasible for no stated reason: not a target it misses
    out: list[str] = []
    for reason in c.reasons:
        target = next((t for head, t in _TARGET_REASONS if reason.startswith(head)), None)
        if target is None or (target == "max_instances" and "max_instances" not in reason):
            return None
        out.append(target)
    return list(dict.fromkeys(out))


def missed_words(c: Candidate) -> list[str]:
    """``missed_targets`` in words, naming the band's slow edge where a target is missed only there: "$2.47,
    misses the budget" against a $3.00 budget read as a contradiction; "misses the budget at the band's slow edge:
    $3.74" does not."""
    out: list[str] = []
    for reason in c.reasons:
        target = next((t for head, t in _TARGET_REASONS if reason.startswith(head)), None)
        if target == "the budget" and "pessimistic edge" in reason and c.cost_usd_total_at_edge is not None:
            target = f"the budget at the band's slow edge: {format_usd(c.cost_usd_total_at_edge)}"
        elif target == "the deadline" and "pessimistic edge" in reason and c.runtime_hours_at_edge is not None:
            target = f"the deadline at the band's slow edge: {format_hours(c.runtime_hours_at_edge)}"
        if target is not None:
            out.append(target)
    return list(dict.fromkeys(out))


def copy_candidate(c: Candidate, purchase: str, price_per_hour: float) -> Candidate:
    return replace(c, purchase=purchase, cost_usd_per_hour=price_per_hour, reasons=list(c.reasons), notes=list(c.notes))


def finish(
    c: Candidate, hours: float, deadline_hours: float | None, budget_usd: float | None, fixed_hours: float = 0.0
) -> None:
    """Set runtime and total cost; infeasible (with the reason) past the deadline or the budget.

    A projected time must meet the deadline at the slow edge of its band (``c.band[1]``): the runtime
    shown is the median, the deadline check uses median x band_hi, and the note says so. The band is on the
    projected speed, so it stretches the work only: ``fixed_hours`` of ``hours`` (spin-up) stay as they are."""
    c.runtime_hours = hours
    c.cost_usd_total = hours * c.cost_usd_per_hour
    c.feasible = True
    edge = max(1.0, c.band[1])
    fixed = min(max(0.0, fixed_hours), hours)
    c.runtime_hours_at_edge = _stretched(hours, fixed, edge)
    c.cost_usd_total_at_edge = c.runtime_hours_at_edge * c.cost_usd_per_hour
    if deadline_hours is not None and fixed >= deadline_hours:
        c.feasible = False
        c.reasons.append(spin_up_miss(fixed, deadline_hours))
    elif deadline_hours is not None and (why := deadline_miss(hours, fixed, edge, deadline_hours)) is not None:
        c.feasible = False
        c.reasons.append(why)
    elif deadline_hours is not None and edge > 1.0:
        note = f"meets the deadline at the pessimistic edge of the projection band (x{edge:.2f})"
        if note not in c.notes:  # finished again (a spot variant, a re-costed plan): one note
            c.notes.append(note)
    if budget_usd is not None and (why := over_budget(c, budget_usd)) is not None:
        c.feasible = False
        c.reasons.append(why)


def spin_up_miss(spin_up_hours: float, deadline_hours: float) -> str:
    """The reason a job's spin-up alone outlasts its deadline, both in one unit ("155 s > 1 s", not "2.58 min" and
    "0.0167 min")."""
    took, due = format_hours_apart(spin_up_hours, deadline_hours)
    return f"spin-up alone ({took}) exceeds the {due} deadline"


def _stretched(hours: float, fixed_hours: float, edge: float) -> float:
    """``hours`` at the band's slow edge: the work stretched by ``edge``, its ``fixed_hours`` of spin-up as they are."""
    fixed = min(max(0.0, fixed_hours), hours)
    return fixed + (hours - fixed) * edge


def deadline_miss(hours: float, fixed_hours: float, edge: float, deadline_hours: float) -> str | None:
    """Why a run of ``hours`` (``fixed_hours`` of them spin-up) misses ``deadline_hours``: at its median, or at the
    band's slow edge (``edge`` x the work, the spin-up as it is); None when it meets both. The one rule for every
    purchase option: a mixed row had dropped the slow-edge reason with its spot row's odds, and was recommended
    at 15.9 min past a 15 min deadline that refused the same instance on-demand and on spot."""
    fixed = min(max(0.0, fixed_hours), hours)
    at_edge = _stretched(hours, fixed, edge)
    if hours > deadline_hours:
        took, due = format_hours_apart(hours, deadline_hours)
        return f"misses the deadline: {took} > {due}"
    if at_edge > deadline_hours:
        kept = f", spin-up {format_hours(fixed)} as is" if fixed > 0 else ""
        took, due = format_hours_apart(at_edge, deadline_hours)
        return (f"misses the deadline at the pessimistic edge of the projection band (x{edge:.2f} on the work{kept}): "
                f"{took} > {due} (median {format_hours(hours)})")  # fmt: skip
    return None


def spot_variant(
    base: Candidate,
    inst: Instance,
    nodes: int,
    compute_hours: float,
    spin_up_hours: float,
    checkpoint_hours: float,
    restart_hours: float,
    rate_per_node_hour: float | None,
    deadline_hours: float | None,
    budget_usd: float | None,
    independent: bool = False,
) -> Candidate | None:
    """The spot version of ``base`` (None when the instance has no spot offer).

    A synchronous job (training) stops on any node's interruption: it stalls at the fleet's rate. With
    ``independent`` items (batch inference) an interruption stalls only its own instance while the others go on
    and take over its unfinished items from the shared queue: the wall time stretches as one instance's does,
    at one instance's rate (a fleet of 8 had read slower than a fleet of 4)."""
    price = inst.price_usd_per_hour("spot")
    if price is None:
        return None
    if rate_per_node_hour is None:  # no interruption estimate with a source: not planned as spot, and it says so
        c = copy_candidate(base, "spot", price * nodes)
        # judged uninterrupted, at the spot price the row shows: a row that also misses the deadline or the budget
        # says so (``unrated_spot_note`` had offered 904 such rows as "meeting every target")
        finish(c, compute_hours + spin_up_hours, deadline_hours, budget_usd, fixed_hours=spin_up_hours)
        c.feasible = False
        c.reasons.append(NO_SPOT_RATE)
        return c
    rate = rate_per_node_hour * nodes
    stalls = rate_per_node_hour if independent else rate
    mtbi = 1.0 / stalls if stalls > 0 else math.inf
    wall = daly_wall_hours(compute_hours, checkpoint_hours, restart_hours, mtbi) + spin_up_hours
    c = copy_candidate(base, "spot", price * nodes)
    c.spot = SpotPlan(
        interruptions_per_hour=rate,
        checkpoint_interval_min=daly_interval_hours(checkpoint_hours, mtbi) * 60.0 if math.isfinite(mtbi) else math.inf,
        expected_hours=wall,
        p_meet_deadline=None,
        policy="spot",
        expected_cost_usd=wall * price * nodes,
        stalls_per_hour=stalls,
        work_hours=compute_hours,
    )
    c.notes.append(
        f"spot: {format_hours(compute_hours)} of work, interruptions {rate:.2g}/h"
        + (f" over the fleet, each stalling only its own instance ({stalls:.2g}/h)" if independent and nodes > 1
           else "")
        + f", expected wall time (Young/Daly) {format_hours(wall)}"
    )  # fmt: skip
    finish(c, wall, deadline_hours, budget_usd, fixed_hours=spin_up_hours)
    return c


# reasons a spot plan's mixed variant judges anew (``spot_odds``): its own deadline odds and its own expected cost
_REJUDGED_BY_MIXED = ("misses the deadline", "spot meets the deadline", "over budget")


def over_budget(c: Candidate, budget_usd: float) -> str | None:
    """Why a job row is over ``budget_usd``, or None: judged at the band's slow edge, where its deadline is
    (``cost_usd_total_at_edge``: its work stretched, not its spin-up, at the row's own mean price per hour, so a mixed
    row's spot and on-demand hours count as they are billed). Quoted there even when the median is over too: "over
    budget: $2.47 > $2.00" had led to a "to fix" of $2.48, and at $3.00 the same row was over at $3.74."""
    total = c.cost_usd_total or 0.0
    at_edge = max(total, c.cost_usd_total_at_edge if c.cost_usd_total_at_edge is not None else total)
    if at_edge <= budget_usd:
        return None
    if at_edge == total:
        cost, budget = format_usd_apart(total, budget_usd)
        return f"over budget: {cost} > {budget}"
    cost, budget = format_usd_apart(at_edge, budget_usd)
    return (f"over budget at the pessimistic edge of the projection band (x{max(1.0, c.band[1]):.2f} on the work): "
            f"{cost} > {budget} (median {format_usd(total)})")  # fmt: skip


def spot_odds(
    cands: list[Candidate],
    work_hours: dict[int, float],
    deadline_hours: float | None,
    budget_usd: float | None,
    checkpoint_hours: float,
    restart_hours: float | None,
    top: int = 16,
    seed: int = 0,
) -> list[Candidate]:
    """Deadline odds (Monte Carlo) for the cheapest spot plans; returns mixed-policy variants to add.

    ``work_hours`` maps id(candidate) to compute hours without spin-up or interruptions;
    ``restart_hours`` None: each candidate's own spin-up. Cheapest first, until ``top`` rows still feasible after
    their odds (at most ``4 x top`` rows): a row the odds refuse passes the check on to the next, so the cheapest
    feasible spot plans, the recommendation among them, always carry odds (a feasible row had been left without
    any once the 16 cheapest were spent on refused ones).
    """
    spot = sorted((c for c in cands if c.purchase == "spot" and c.spot), key=lambda c: c.cost_usd_total or math.inf)
    on_demand = {
        (c.provider, c.region, c.instance, c.precision, c.count): c for c in cands if c.purchase == "on-demand"
    }
    mixed: list[Candidate] = []
    kept = 0
    for c in spot[: 4 * top]:
        if kept >= top:
            break
        assert c.spot is not None
        up_h = (c.cold_start_s or 0.0) / 3600.0
        od = on_demand.get((c.provider, c.region, c.instance, c.precision, c.count))
        due = None if deadline_hours is None else deadline_hours - up_h
        rate = c.spot.interruptions_per_hour if c.spot.stalls_per_hour is None else c.spot.stalls_per_hour
        od_price = od.cost_usd_per_hour if od else c.cost_usd_per_hour
        work = work_hours[id(c)]
        restart = up_h if restart_hours is None else restart_hours
        args = (work, rate, checkpoint_hours, restart, c.cost_usd_per_hour, od_price, due)
        run = simulate_spot(*args, policy="spot", samples=1000, seed=seed, band=c.band)
        if c.band != (1.0, 1.0):
            c.notes.append(f"deadline odds include the projection band (x{c.band[0]:.2f}-x{c.band[1]:.2f} on speed)")
        c.spot = replace(c.spot, p_meet_deadline=run.p_meet_deadline)
        if run.p_meet_deadline is not None and run.p_meet_deadline < MIN_P_MEET and c.feasible:
            c.feasible = False
            c.reasons.append(f"spot meets the deadline in only {run.p_meet_deadline:.0%} of simulated runs")
        kept += c.feasible
        if od is None or due is None or run.p_meet_deadline is None or run.p_meet_deadline >= 0.999:
            continue
        mix = simulate_spot(*args, policy="mixed", samples=1000, seed=seed, band=c.band)
        # the policy's difference at the median speed, the spot row's own basis (its odds stay the band's): across the
        # band, the slow runs' restarts from scratch (e^{W/M}) made spot's mean 4.61 h against 3.51 h at the median,
        # and the difference read a mixed row at 2.34 h, faster than its 2.57 h of work uninterrupted
        run_m, mix_m = (run, mix) if c.band == (1.0, 1.0) else (
            simulate_spot(*args, policy=p, samples=1000, seed=seed) for p in ("spot", "mixed"))  # fmt: skip
        m = copy_candidate(c, "mixed", c.cost_usd_per_hour)
        # the mixed policy re-judges the deadline and the budget; what it cannot change stays (more instances than
        # max_instances, a spin-up past the deadline: a 1e12-item job had 8,262 "feasible" mixed instances)
        m.reasons = [r for r in c.reasons if not r.startswith(_REJUDGED_BY_MIXED)]
        m.notes.append(
            f"mixed: spot until the slack runs out, then on-demand at ${od_price:.2f}/h "
            f"(expected {format_hours(mix_m.expected_spot_hours)} on spot)"
        )
        # On the spot row's own basis (its runtime and cost: the closed form at the median speed) plus what the
        # policy changes, mixed minus spot, both simulated on the same draws at the median speed. Mixed's simulated
        # mean alone carried the band's mean slow-down (x1.06) that the spot row does not, and read 5% slower and
        # dearer.
        # The first spin-up stays billed at the spot price, as the spot row bills it.
        base_h = c.runtime_hours if c.runtime_hours is not None else run.expected_hours + up_h
        base_usd = c.cost_usd_total
        if base_usd is None:
            base_usd = run.expected_cost_usd + up_h * c.cost_usd_per_hour
        m.runtime_hours = base_h + (mix_m.expected_hours - run_m.expected_hours)
        m.cost_usd_total = base_usd + (mix_m.expected_cost_usd - run_m.expected_cost_usd)
        if m.runtime_hours > 0:  # its $/h is the run's average (spot, then on-demand): $/h x hours read as the total
            m.cost_usd_per_hour = m.cost_usd_total / m.runtime_hours
        # judged there as below: the deadline on its work uninterrupted, the budget as finish() does
        edge = max(1.0, m.band[1])
        m.runtime_hours_at_edge = max(m.runtime_hours, _stretched(work + up_h, up_h, edge))
        m.cost_usd_total_at_edge = _stretched(m.runtime_hours, up_h, edge) * m.cost_usd_per_hour
        m.spot = replace(c.spot, expected_hours=m.runtime_hours, p_meet_deadline=mix.p_meet_deadline, policy="mixed",
                         expected_cost_usd=m.cost_usd_total)  # fmt: skip
        m.feasible = not m.reasons
        # at its median, its own expected time; at the band's slow edge, the work uninterrupted (what on-demand
        # takes): switching to on-demand cannot make slow work faster, but the interruptions' overhead is what the
        # policy stops paying when the slack runs out (the simulated odds, on the band, judge that part). Stretching
        # the whole expected mixed time by the edge had refused a mixed row at 5.03 h > 5 h whose odds were 98.7%.
        if (
            deadline_hours is not None
            and (
                miss := deadline_miss(m.runtime_hours, up_h, 1.0, deadline_hours)
                or deadline_miss(work + up_h, up_h, max(1.0, m.band[1]), deadline_hours)
            )
            is not None
        ):
            m.feasible = False  # as finish() judges
            m.reasons.append(miss)
        if (mix.p_meet_deadline or 0.0) < MIN_P_MEET:
            m.feasible = False
            m.reasons.append(f"mixed policy meets the deadline in only {mix.p_meet_deadline or 0.0:.0%} of runs")
        if budget_usd is not None and (why := over_budget(m, budget_usd)) is not None:  # as finish() judges
            m.feasible = False
            m.reasons.append(why)
        mixed.append(m)
    return mixed


def unrated_spot_note(rec: Candidate | None, ranked: list[Candidate], kind: str) -> str | None:
    """A check line on spot rows left out for want of an interruption estimate (``NO_SPOT_RATE``: the catalog's
    Spot Advisor buckets cover three AWS instance types), which the table (feasible rows first) hid: a job's when
    one would have cost less than the recommendation, or met every target when nothing did, at its uninterrupted
    time (a T4 spot job at $0.05 lost to an L4 one at $0.29 without a word); a spot-only online plan's, whose rows
    are left unsized, by their count."""
    unrated = [c for c in ranked if c.reasons == [NO_SPOT_RATE]]
    fix = "set targets.interruptions_per_hour to a rate you trust to plan them"
    why = "the catalog has no interruption estimate for them (its Spot Advisor buckets cover three AWS types)"
    if kind == "online":
        n = len({(c.provider, c.region, c.instance) for c in unrated})
        if rec is None or not n:
            return None
        return f"spot: {n} instance type(s) with a spot price were left out of this spot-only plan, unsized: " \
               f"{why}; {_cheapest_unsized(rec, unrated)}; {fix} (or add on_demand to targets.purchase)"  # fmt: skip
    mine = math.inf if rec is None or rec.cost_usd_total is None else rec.cost_usd_total
    cheaper = sorted((c for c in unrated if c.cost_usd_total is not None and c.cost_usd_total < mine),
                     key=lambda c: c.cost_usd_total or 0.0)  # fmt: skip
    if not cheaper:
        return None
    c = cheaper[0]
    types = len({(x.provider, x.region, x.instance) for x in cheaper})
    n_of = f" x{c.count}" if c.count > 1 else ""
    against = f", against {format_usd(mine)}" if rec is not None else ""
    what = "cheaper spot row(s)" if rec is not None else "spot row(s) meeting every target"
    return (f"spot: {len(cheaper)} {what} ({types} instance type(s)) were left out: {why}; the cheapest, {c.provider} "
            f"{c.instance}{n_of} ({c.device}, {c.precision}), would cost {format_usd(c.cost_usd_total or 0.0)} if "
            f"never interrupted{against}; {fix}")  # fmt: skip


def _cheapest_unsized(rec: Candidate, unrated: list[Candidate]) -> str:
    """The cheapest instance a spot-only online plan left unsized, its spot price and the least a plan on it would
    cost (one serving instance and the spare): a sentiment API asking for spot to save money got 2 x g6.xlarge at
    $0.81/h while a 2-vCPU instance at $0.011/h spot went unnamed (3 of them served it at $0.032/h)."""
    c = min(unrated, key=lambda c: (c.cost_usd_per_hour, c.instance, c.precision))
    each = f"{max(1, c.gpus)}x {c.device}" if c.device_class == "gpu" else f"{c.vcpus} vCPU"
    start = 2 * c.cost_usd_per_hour  # a spot-only online plan runs at least a serving instance and its spare
    against = f", against the recommendation's {format_usd(rec.cost_usd_per_hour)}/h" \
        if start < rec.cost_usd_per_hour else ""  # fmt: skip
    return (
        f"the cheapest, {c.provider} {c.instance} ({each}), costs {format_usd(c.cost_usd_per_hour)}/h spot, so a "
        f"plan on it would start at {format_usd(start)}/h (a serving instance and the spare){against}"
    )
