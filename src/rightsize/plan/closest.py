"""The infeasible row nearest to meeting the targets, and the target setting that buys it: the closest plan when
none is feasible, and the other device class's example when only one class has a plan (``plan.explain``)."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from rightsize.plan.job_costs import missed_targets
from rightsize.plan.result import Candidate, PlanKind
from rightsize.units import ceil_hours, ceil_usd, format_hours, format_usd

__all__ = ["budget_fix", "closest", "cost_of", "deadline_fix", "other_class_example", "speed_of", "target_ms"]


def target_ms(c: Candidate) -> float:
    if c.latency is None:
        return math.inf
    return c.latency.p_target_ms if c.latency.p_target_ms is not None else c.latency.p95


def cost_of(c: Candidate, kind: PlanKind) -> float:
    if kind in ("online", "rules"):
        return c.cost_usd_per_hour
    return c.cost_usd_total if c.cost_usd_total is not None else math.inf


def speed_of(c: Candidate, kind: PlanKind) -> float:
    """What "faster" means for a candidate: its SLO percentile online, its runtime for a job (smaller is faster)."""
    if kind == "online":
        return target_ms(c)
    return c.runtime_hours if c.runtime_hours is not None else math.inf


def closest(infeasible: Sequence[Candidate], kind: PlanKind, request_samples: int) -> Candidate | None:
    """The infeasible candidate nearest to meeting the target: the fastest (online: its predicted latency, else
    one request's service time at the band's slow edge; jobs: the runtime), the cheaper on a tie. A job's closest
    is one a looser target would buy (``job_costs.missed_targets``) when there is one: a spot row without an
    interruption estimate, fastest of all, can be planned under no deadline."""
    if kind != "online" and (buyable := [c for c in infeasible if missed_targets(c) is not None]):
        infeasible = buyable
    # one that misses nothing but the budget is nearest at the lowest price (the fastest had named an 8x H200
    # against a $0.1/h budget a c7a.large misses by $0.003); nothing but max_instances, with the fewest instances
    if over := [c for c in infeasible if c.reasons and all(r.startswith("over budget") for r in c.reasons)]:
        return min(over, key=lambda c: (budget_needed(c, kind), speed_of(c, kind)))
    # every one misses on its spin-up alone: nearest is the one that starts soonest (the fastest to run named an A100
    # at 8.58 min of spin-up where a CPU row's was 2.58 min)
    if kind != "online" and infeasible and all(misses_on_spin_up(c) for c in infeasible):
        # one that misses nothing but the deadline is nearest at its time at the band's slow edge, spin-up included:
        # the deadline that buys it is one edit (the soonest to start had named 0.144 h, then 0.258 h on re-run)
        if timed := [c for c in infeasible if _deadline_only(c) and c.runtime_hours_at_edge is not None]:
            return min(timed, key=lambda c: (c.runtime_hours_at_edge or 0.0, cost_of(c, kind)))
        return min(infeasible, key=lambda c: (c.cold_start_s or 0.0, speed_of(c, kind), cost_of(c, kind)))
    if kind != "online" and (many := [c for c in infeasible if missed_targets(c) == ["max_instances"]]):
        return min(many, key=lambda c: (instances_needed(c), cost_of(c, kind)))

    def speed(c: Candidate) -> float:
        t = speed_of(c, kind)
        if math.isinf(t) and kind == "online" and c.curve is not None:
            t = c.curve.t_ms(request_samples) * max(1.0, c.band[1])
        return t

    return min(infeasible, key=lambda c: (speed(c), cost_of(c, kind)), default=None)


def budget_needed(c: Candidate, kind: PlanKind) -> float:
    """The budget that buys ``c``: a job's total at the band's slow edge, where its budget is judged
    (``job_costs.over_budget``); an online plan's price per hour."""
    if kind in ("online", "rules"):
        return c.cost_usd_per_hour
    return c.cost_usd_total_at_edge if c.cost_usd_total_at_edge is not None else cost_of(c, kind)


def budget_fix(c: Candidate, kind: PlanKind) -> str:
    """The budget that buys ``c``, the closest plan when it misses nothing else, named by the spec field to raise."""
    field = "budget_usd_per_hour" if kind in ("online", "rules") else "budget_usd"
    return f"to fix: raise {field} to {format_usd(ceil_usd(budget_needed(c, kind)))} or more, which buys it"


def misses_on_spin_up(c: Candidate) -> bool:
    """Its spin-up alone outlasts the deadline: whatever else it misses, no other setting starts it in time."""
    return any(r.startswith("spin-up alone") for r in c.reasons)


def deadline_fix(c: Candidate, small_batch: str | None) -> str | None:
    """The deadline that buys ``c``, the closest job when it misses nothing else (its time at the band's slow edge,
    where the deadline is judged, spin-up included), or, when every plan misses on its spin-up and none was timed
    (a batch row is not sized past it), the shortest spin-up, which no plan starts within; ``small_batch``: the
    global batch as the other lever."""
    if (
        misses_on_spin_up(c)
        and c.cold_start_s is not None
        and not (_deadline_only(c) and c.runtime_hours_at_edge is not None)
    ):
        start = c.cold_start_s / 3600.0
        return (f"to fix: raise deadline_hours to more than {ceil_hours(start):g}: the shortest spin-up is "
                f"{format_hours(start)}, before any work")  # fmt: skip
    if not c.reasons or not _deadline_only(c):
        return None
    need = c.runtime_hours_at_edge if c.runtime_hours_at_edge is not None else c.runtime_hours
    if need is None:
        return None
    lever = f"; or {small_batch}" if small_batch else ""
    edge = " at the band's slow edge" if need > (c.runtime_hours or 0.0) else ""
    if misses_on_spin_up(c) and c.cold_start_s:
        edge += f", {format_hours(c.cold_start_s / 3600.0)} of it spin-up"
    return (f"to fix: raise deadline_hours to {ceil_hours(need):g} or more, which buys it ({format_hours(need)}{edge})"
            f"{lever}")  # fmt: skip


def _deadline_only(c: Candidate) -> bool:
    """Every reason is the deadline's (missed at the median, at the band's edge, or by the spin-up alone)."""
    return bool(c.reasons) and all(r.startswith(("misses the deadline", "spin-up alone")) for r in c.reasons)


def instances_needed(c: Candidate) -> float:
    """The instances a candidate's "needs N instances > max_instances" reason asks for (its count otherwise)."""
    for r in c.reasons:
        if m := re.match(r"needs (\d+)", r):
            return float(m.group(1))
    return float(c.count)


# Reasons that leave a row out by a blanket rule, whatever the workload's speed: not what a closer look would change.
RULED_OUT = ("no interruption estimate", "no spot offer", "GPU rarely helps")


def ruled_out(c: Candidate) -> bool:
    """Left out by a blanket rule (``RULED_OUT``), not found too slow or too dear."""
    return any(r.startswith(RULED_OUT) for r in c.reasons)


def other_class_example(
    pool: Sequence[Candidate], kind: PlanKind, request_samples: int
) -> tuple[Candidate | None, bool]:
    """The other device class's row to name when none of its rows is feasible, and whether it was planned: the one
    closest to meeting the targets (``closest``) among the rows no blanket rule left out; when a rule left them all
    out, the cheapest (False). The cheapest row had been named whatever its shortfall: a $0.011/h spot D2s_v5 that
    no spot plan takes ("375 h > 12 h") over a 3 x c7i.12xlarge at 7.46 h that missed only at its band's edge."""
    if not pool:
        return None, False
    planned = [c for c in pool if not ruled_out(c)]
    if not planned:
        return min(pool, key=lambda c: c.cost_usd_per_hour), False
    return closest(planned, kind, request_samples) or min(planned, key=lambda c: c.cost_usd_per_hour), True
