"""Rank candidates, find the Pareto frontier, and say in plain words why the pick and why not the best
alternative of the other device class, flagging the seed article's common mistakes:

- overbuying GPUs: a GPU busy < 20% of the time serving a small model ("try CPU autoscaling");
- no batching strategy on a GPU ("add a small batch window, e.g. 5-10 ms");
- memory headroom (OOM risk);
- CPU-bound input pipelines (a GPU fed by few vCPUs).
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Sequence
from datetime import date

from rightsize.catalog.model import is_unverified, unverified_note
from rightsize.plan.checks import GPU_IDLE_UTILIZATION, band_words, check_warnings, host_bound_note
from rightsize.plan.closest import (
    budget_fix,
    closest,
    cost_of,
    deadline_fix,
    other_class_example,
    speed_of,
    target_ms,
)
from rightsize.plan.energy import energy_line
from rightsize.plan.job_costs import missed_targets
from rightsize.plan.result import MEASURED_WORDS, Candidate, PlanKind
from rightsize.plan.rules import rules_choice
from rightsize.plan.training import SMALL_WORKER_BATCH
from rightsize.plan.verify import spare_instances
from rightsize.units import format_hours, format_share, format_usd

__all__ = ["explain", "infeasible_summary", "pareto", "rank", "target_ms"]


def _price_key(c: Candidate, kind: PlanKind) -> float:
    """``cost_of`` to seven significant digits (relative 1e-6): one price reached two ways (1 x $0.20528, 2 x
    $0.10264) is one price to the ranking, whatever the float sums leave in the last bits."""
    cost = cost_of(c, kind)
    return float(f"{cost:.7g}") if math.isfinite(cost) else cost


# Speeds at one price within this share of the fastest are one speed to the ranking: a long run's p95 near
# saturation moves ~10% with the arrival draw (plan/verify._long_run), a job's runtime less.
SPEED_NOISE = 0.15
# A frontier point must be this much faster than the cheaper one before it (jobs, online): a $55/h p5 had stood on
# the frontier for 0.0015 ms of a screening p95 (3000 simulated requests) over a $22/h p4d.
PARETO_STEP = (0.01, 0.05)


def _width(c: Candidate) -> float:
    """How uncertain the candidate's times are: the band's hi / lo, rounded so that only a real difference
    (a precision extrapolated here, with its band no narrower, against one measured) breaks a cost tie."""
    lo, hi = c.band
    return round(hi / lo, 1) if lo > 0 else math.inf


def rank(cands: Sequence[Candidate], kind: PlanKind, listed: Collection[str] = ()) -> list[Candidate]:
    """Feasible first by cost (then a verified price, a precision the spec lists (``listed``), the narrower band,
    anchored on its own precision rather than extrapolated, faster beyond the simulation's noise, measured rather
    than projected, fewer machines); infeasible after (a job's rows that miss only a target before those no target
    setting buys).

    At the same price the better-known plan wins: the image example once recommended int8 MobileNetV2,
    extrapolated from fp32 and 0.4 ms faster at the band's slow edge, over the fp32 this machine measured; and a
    price read off a price list beats the same price the catalog marks for re-checking (for the purchase planned:
    a row whose spot price alone is marked is verified for an on-demand plan)."""
    if kind == "rules":
        return list(cands)  # the rules planner ranks by family fit, not price alone
    fastest: dict[tuple[bool, float], float] = {}
    for c in cands:
        key = (c.feasible, _price_key(c, kind))
        fastest[key] = min(fastest.get(key, math.inf), speed_of(c, kind))

    def speed(c: Candidate) -> float:  # fp32 (72 ms) and int8 (77 ms) on one c7a.large had swapped with --seed;
        t = speed_of(c, kind)  # within the noise the keys after decide (machines, name), none moved by a draw
        return 0.0 if t <= fastest[(c.feasible, _price_key(c, kind))] * (1 + SPEED_NOISE) else t

    return sorted(
        cands,
        key=lambda c: (
            not c.feasible,
            # an infeasible job row no looser target buys (a spot row without an interruption estimate) after the
            # ones that miss only a target: the table had led with never-plannable spot rows
            not c.feasible and kind != "online" and missed_targets(c) is None,
            _price_key(c, kind),
            is_unverified(c.price_source, c.purchase),
            bool(listed) and c.precision not in listed,  # at one price, bf16 as asked before an unasked fp16
            _width(c),
            c.curve is not None and c.curve.extrapolated,
            speed(c),
            # measured before projected at one price and speed: 1 x c7a.xlarge (projected, $0.20528/h) had beaten
            # 2 x c7a.large (measured, 2 x $0.10264) on fewer machines, and the plan then asked to validate it
            c.provenance != "measured",
            c.count,
            c.instance,
        ),
    )


def pareto(cands: Sequence[Candidate], kind: PlanKind) -> list[Candidate]:
    """Non-dominated candidates on (cost, latency) for online, (total cost, runtime) for jobs.

    Online uses feasible candidates only; jobs use every candidate with numbers that is feasible or misses only
    a target (``job_costs.missed_targets``), so the frontier shows what a later deadline, a bigger budget or more
    instances would buy, and never an option no target buys (a spot row without an interruption estimate)."""
    if kind == "rules":
        return []
    pool = [
        c
        for c in cands
        if (
            c.feasible
            if kind == "online"
            else c.runtime_hours is not None and c.cost_usd_total is not None and missed_targets(c) is not None
        )
        and math.isfinite(speed_of(c, kind))
    ]
    pool.sort(key=lambda c: (cost_of(c, kind), speed_of(c, kind)))
    step = 1.0 - PARETO_STEP[kind == "online"]
    out: list[Candidate] = []
    best = math.inf
    for c in pool:
        if speed_of(c, kind) < best * step:
            out.append(c)
            best = speed_of(c, kind)
    return out


_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def _whole(v: float) -> str:
    """A number read off a reason, as written there: 52046400, not 5.20464e+07."""
    return str(int(v)) if v.is_integer() and abs(v) < 1e18 else f"{v:g}"


def infeasible_summary(cands: Sequence[Candidate]) -> dict[str, int]:
    """Reason kind -> number of infeasible candidates, most first. A kind is the reason's text before its first
    colon with its numbers as ranges over the candidates: "needs 74-1304 instances > max_instances 64", not one
    kind per instance count."""
    groups: dict[str, list[list[float]]] = {}
    for c in cands:
        if c.feasible or not c.reasons:
            continue
        head = c.reasons[0].split(":")[0]
        groups.setdefault(_NUMBER.sub("#", head), []).append([float(x) for x in _NUMBER.findall(head)])
    out: dict[str, int] = {}
    for template, values in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        pieces = template.split("#")
        text = pieces[0]
        for vs, piece in zip(zip(*values, strict=True), pieces[1:], strict=True):
            lo, hi = min(vs), max(vs)
            text += (_whole(lo) if lo == hi else f"{_whole(lo)}-{_whole(hi)}") + piece
        out[text] = len(values)
    return out


def _who(c: Candidate) -> str:
    layout = f", {c.workers_per_instance} worker(s) x {c.threads_per_worker} thread(s)" if c.threads_per_worker else ""
    each = f"{max(1, c.gpus // max(1, c.count))}x {c.device}" if c.device_class == "gpu" else f"{c.vcpus} vCPU{layout}"
    if c.device_class == "gpu" and not c.gpus:
        each = c.device
    what = f"{c.provider} {c.instance} ({each}, {c.precision}, {c.purchase})"
    if c.count <= 0 or c.kind_hint == "rules":  # infeasible before sizing, or a single rule-sized instance
        return what
    n = c.replicas if c.replicas else c.count
    unit = "replica" if c.kind_hint == "online" else "node" if c.kind_hint == "training" else "instance"
    return f"{n} {unit}{'s' if n != 1 else ''} on {c.count}x {what}"


def _money(c: Candidate, kind: PlanKind) -> str:
    if kind in ("online", "rules"):
        extra = f", {format_usd(c.cost_usd_per_1m_requests)} per 1M requests" if c.cost_usd_per_1m_requests else ""
        # an idle policy prices the day: not what the instances cost while they run
        averaged = " averaged over the day" if c.idle_policy else ""
        return f"{format_usd(c.cost_usd_per_hour)}/h{averaged}{extra}"
    averaged = " averaged over the run" if c.purchase == "mixed" else ""  # spot hours, then on-demand ones
    return f"{format_usd(c.cost_usd_total or 0.0)} total ({format_usd(c.cost_usd_per_hour)}/h{averaged})"


def ms(value: float) -> str:
    """Milliseconds to read: whole numbers from 10 ms, two significant digits below (a tiny model's 0.42 ms
    must not print as 0)."""
    if value >= 10 or value == 0:
        return f"{value:.0f}"
    return f"{value:.2g}"


def _perf(c: Candidate, kind: PlanKind, q: float) -> str:
    if kind == "online" and c.latency is not None:
        band = ""
        if c.latency.band_ms:
            band = f" (band {ms(c.latency.band_ms[0])}-{ms(c.latency.band_ms[1])} ms)"
        b = c.batching
        pol = f"; batching max {b.max_batch}, wait {b.max_wait_ms:g} ms" if b else ""
        return (
            f"predicted p{q:g} {ms(target_ms(c))} ms{band}, busy {format_share(c.latency.utilization)}, "
            f"mean batch {c.latency.mean_batch:.1f}{pol}"
        )
    if kind in ("batch", "training") and c.runtime_hours is not None:
        odds = ""
        if c.spot and c.spot.p_meet_deadline is not None:
            odds = f", meets the deadline in {c.spot.p_meet_deadline:.0%} of simulated runs"
            lo, hi = c.band
            if (lo, hi) != (1.0, 1.0):  # each run draws its speed from the band: say so where the odds are read
                odds += f" (interruptions and the projection band x{lo:.2f}-x{hi:.2f})"
        acc = f", gradient accumulation x{c.grad_accumulation}" if c.grad_accumulation > 1 else ""
        up_to = "micro-batches of up to " if c.grad_accumulation > 1 else "batch "  # 32 in 5 runs 7, 7, 6, 6, 6
        size = f", {up_to}{c.batching.max_batch}" if c.batching else ""
        return f"{format_hours(c.runtime_hours)}{size}{acc}{odds}"
    return ""


def _small_rows(cands: Sequence[Candidate]) -> list[Candidate]:
    """Multi-worker rows whose batch per worker leaves most devices idle (``SMALL_WORKER_BATCH``)."""
    return [
        c for c in cands
        if c.batching is not None and max(c.gpus, c.count) > 1
        and c.batching.max_batch * c.grad_accumulation < SMALL_WORKER_BATCH
    ]  # fmt: skip


def _small_batch_hint(cands: Sequence[Candidate]) -> str | None:
    """A training plan with no answer whose multi-worker rows ran tiny batches per worker: the global batch is the
    lever (a fixed global batch spread over 8 GPUs leaves each a few samples, and adding GPUs slows it)."""
    small = [c.batching.max_batch * c.grad_accumulation for c in _small_rows(cands) if c.batching is not None]
    if not small:
        return None
    return (
        f"multi-worker plans ran as little as {min(small)} sample(s) per worker: a larger training.batch_size lets "
        "added GPUs and nodes speed the job up"
    )


def _batch_lever(cands: Sequence[Candidate], global_batch: int | None) -> str | None:
    """The global batch as a deadline's other lever, named on the fastest multi-worker row that ran a tiny batch per
    worker: "raise training.batch_size (now 32: 4 per GPU on 8 GPUs)"."""
    small = _small_rows(cands)
    if not small:
        return None
    c = min(small, key=lambda x: (speed_of(x, "training"), cost_of(x, "training")))
    workers = c.gpus or c.count
    each = math.ceil(global_batch / workers) if global_batch else (c.batching.max_batch if c.batching else 0)
    now = f"now {global_batch}: " if global_batch else ""
    unit = "GPU" if c.gpus else "worker"
    return (f"raise training.batch_size ({now}{each} per {unit} on {workers} {unit}s): larger global batches scale "
            f"across {unit}s")  # fmt: skip


NEAR_TIE_COST = 1.05  # a job that costs at most this much more ...
NEAR_TIE_SPEEDUP = 1.5  # ... and finishes at least this much sooner is worth a line beside the cheapest


def _near_tie(rec: Candidate, feasible: Sequence[Candidate]) -> str | None:
    """A line on the fastest feasible job within NEAR_TIE_COST of the recommendation's total that finishes at least
    NEAR_TIE_SPEEDUP times sooner: with prices linear in size, a 4-vCPU and a 16-vCPU run cost nearly the same
    (the spin-up billed at each size apart), and the cheapest by a cent may take 4x as long."""
    cost, hours = rec.cost_usd_total, rec.runtime_hours
    if not cost or not hours:
        return None
    quick = [
        c for c in feasible
        if c.cost_usd_total and c.runtime_hours and c.cost_usd_total <= cost * NEAR_TIE_COST
        and c.runtime_hours * NEAR_TIE_SPEEDUP <= hours
    ]  # fmt: skip
    if not quick:
        return None
    c = min(quick, key=lambda x: (x.runtime_hours or 0.0, x.cost_usd_total or 0.0))
    more = (c.cost_usd_total or 0.0) / cost - 1.0
    return (
        f"nearly as cheap and faster: {_who(c)} finishes in {format_hours(c.runtime_hours or 0.0)} instead of "
        f"{format_hours(hours)} for {more:+.0%} ({format_usd(c.cost_usd_total or 0.0)})"
    )


def alternative_lines(alt: Candidate, rec: Candidate, kind: PlanKind, percentile: float) -> list[str]:
    """Why not ``alt``, the best feasible plan of the other device class: its cost against ``rec``'s, its speed, and
    a GPU that would sit under 20% busy."""
    ratio = cost_of(alt, kind) / max(1e-9, cost_of(rec, kind))
    lines = [f"best {alt.device_class.upper()} plan: {_who(alt)}: {_money(alt, kind)} ({ratio:.1f}x the cost); "
             f"{_perf(alt, kind, percentile)}"]  # fmt: skip
    if alt.device_class == "gpu" and alt.latency and alt.latency.utilization < GPU_IDLE_UTILIZATION:
        lines.append(f"its GPU would be busy {alt.latency.utilization:.0%} of the time: under 20% is overbuying "
                     "(a powerful GPU serving a small model at low QPS)")  # fmt: skip
    return lines


def explain(
    kind: PlanKind,
    ranked: Sequence[Candidate],
    percentile: float = 95.0,
    bound_ms: float | None = None,
    request_samples: int = 1,
    input_measured: bool = False,
    smallest_request: int | None = None,
    samples_per_s: float | None = None,
    global_batch: int | None = None,
) -> tuple[list[str], list[str], Candidate | None, list[str]]:
    """(why, why_not, alternative, warnings) for the top-ranked feasible candidate; ``input_measured``: the plan
    bounded each instance by a measured input stage (``rightsize pipeline``), or the model reads text (tokenizing
    is far cheaper than the JPEG decode the rule assumes), so the rule-of-thumb warning on it is left out.
    ``request_samples``: the largest request; ``smallest_request``: a request mix's smallest (a batch bigger than it
    holds several requests); ``samples_per_s``: an online target's rate in samples; ``global_batch``: a training
    target's batch_size."""
    feas = [c for c in ranked if c.feasible]
    rec = feas[0] if feas else None
    if rec is None:
        summary = infeasible_summary(ranked)
        top = ", ".join(f"{k} ({v})" for k, v in summary.items())  # most first already
        near = closest([c for c in ranked if c.reasons], kind, request_samples)
        why = [f"no candidate meets every target; reasons: {top or 'none evaluated'}"]
        hint = _small_batch_hint(ranked) if kind == "training" else None
        if near:
            why.append(f"closest: {_who(near)}: {'; '.join(near.reasons)}")
            if all(r.startswith("over budget") for r in near.reasons):
                why.append(budget_fix(near, kind))
            elif kind != "online" and (fix := deadline_fix(near, hint and _batch_lever(ranked, global_batch))):
                why.append(fix)
                hint = None  # named in the fix, or not the lever: no plan even starts in time
        if hint:
            why.append(hint)
        host = host_bound_note(None, ranked, kind)
        return why, [], None, [host] if host else []
    perf = _perf(rec, kind, percentile)
    source = {
        "measured": MEASURED_WORDS,
        "projected": f"times projected from the measured profile ({band_words(rec.band)})",
        "rule": "sized by rules, not measured",
    }[rec.provenance]
    why = [
        f"{_who(rec)}: {_money(rec, kind)}" + (f"; {perf}" if perf else ""),
        f"cheapest of {len(feas)} feasible plans ({len(ranked)} evaluated)"
        if kind != "rules"
        else rules_choice(rec, len(feas)),
        f"{source}; price {rec.price_date}{price_age(rec.price_date)} ({rec.price_source})",
    ]
    if kind == "online" and bound_ms is not None:
        why.insert(1, f"meets p{percentile:g} <= {bound_ms:g} ms with {rec.replicas} replica(s){_spares(rec)}")
    if kind in ("batch", "training") and (quick := _near_tie(rec, feas)) is not None:
        why.insert(2, quick)
    if rec.idle_policy:
        always = (rec.idle or {}).get("always_on_usd_per_day")
        why.append(f"idle policy: {rec.idle_policy}" + (f"; always-on would be ${always:.2f}/day" if always else ""))
    if rec.energy is not None:
        why.append(energy_line(rec.energy))
    other = "gpu" if rec.device_class == "cpu" else "cpu"
    alt = next((c for c in feas if c.device_class == other), None)
    why_not: list[str] = []
    if alt is not None:
        why_not += alternative_lines(alt, rec, kind, percentile)
    else:
        alt, planned = other_class_example([c for c in ranked if c.device_class == other], kind, request_samples)
        if alt is None:
            why_not.append(f"no {other.upper()} candidates were evaluated (catalog filters or no curve for them)")
        elif not planned:  # a rule left them all out (classic ML on a GPU, spot with no interruption estimate)
            why_not.append(f"{other.upper()} rows not planned: {alt.reasons[0]} (e.g. {_who(alt)})")
        else:
            # its own reasons: the most common one among the class's rows quoted another instance's price
            why_not.append(f"no {other.upper()} plan is feasible; the closest, {_who(alt)}: "
                           f"{'; '.join(alt.reasons) if alt.reasons else 'not feasible'}")  # fmt: skip
    warnings = check_warnings(kind, rec, bound_ms, smallest_request or request_samples, input_measured, samples_per_s)
    if host := host_bound_note(rec, ranked, kind):
        warnings.append(host)
    fragile = _fragile_choice(kind, rec, alt)
    if fragile:
        warnings.append(fragile)
    if is_unverified(rec.price_source, rec.purchase):
        v = next((c for c in feas if not is_unverified(c.price_source, c.purchase)), None)
        said = None if v is None else f"{_who(v)}: {_money(v, kind)}"
        ratio = 1.0 if v is None else cost_of(v, kind) / max(1e-9, cost_of(rec, kind))
        warnings.insert(0, unverified_note(rec.instance, rec.price_source, said, ratio))
    return why, why_not, alt, warnings


def _spares(rec: Candidate) -> str:
    """The spot spare among an online plan's replicas, in words: "2 replica(s)" had counted it as serving."""
    if not spare_instances(rec):
        return ""
    # the spare is an instance: every worker process (CPU) or GPU on it (``verify.spot_spare``)
    k = max(1, rec.gpus // max(1, rec.count)) if rec.device_class == "gpu" else max(1, rec.workers_per_instance)
    return ", one of them a spare for interruptions" if k == 1 else \
        f", {k} of them (one instance) spares for interruptions"  # fmt: skip


def price_age(price_date: str, today: date | None = None) -> str:
    """``", 17 months old"`` for a ``YYYY-MM`` price date (nothing when unparseable or under a month)."""
    try:
        year, month = (int(x) for x in price_date.split("-")[:2])
    except ValueError:
        return ""
    now = today or date.today()
    months = (now.year - year) * 12 + now.month - month
    if months < 1:
        return ""
    return f", {months} months old" if months < 24 else f", {months / 12:.1f} years old"


def _fragile_choice(kind: PlanKind, rec: Candidate, alt: Candidate | None) -> str | None:
    """A job whose bill grows with its run time (batch, training) won on a projection whose band reaches past
    the other device class's cost: at the band's slow edge the answer would flip, so say so (an online plan is
    already sized at the slow edge)."""
    if kind not in ("batch", "training") or alt is None or not alt.feasible or rec.provenance != "projected":
        return None
    hi = rec.band[1]
    cost, other = cost_of(rec, kind), cost_of(alt, kind)
    if hi <= 1.0 or not math.isfinite(cost * other) or cost * hi <= other:
        return None
    return (
        f"the choice over {alt.device_class.upper()} rests on the projection: at the slow edge of its band (x{hi:.2f}) "
        f"{rec.instance} would run for about {format_hours((rec.runtime_hours or 0.0) * hi)} and cost about "
        f"{format_usd(cost * hi)}, more than {_who(alt)} ({format_usd(other)}); time the model on a {rec.instance} "
        "(`rightsize bench` there) before committing"
    )
