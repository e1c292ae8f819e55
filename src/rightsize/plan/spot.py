"""Spot (preemptible) runs with checkpointing: Young/Daly interval, expected wall time, deadline odds,
and the mixed policy (spot until the slack runs out, then on-demand). Times in hours.

Sources (docs/sources.md `young-daly`):
- Young (1974): tau ~ sqrt(2 delta M); Daly (2006): tau* = sqrt(2 delta M)[1 + (1/3) sqrt(delta / 2M)
  + (1/9)(delta / 2M)] - delta, expected wall time T_w = M e^{R/M} (e^{(tau* + delta)/M} - 1) T0 / tau*.
  Worked check: T0 = 100 h, delta = 5 min, R = 15 min, M = 24 h -> tau* ~117 min, T_w ~110 h.
- "Can't Be Late" (NSDI'24): switch from spot to on-demand when the remaining slack runs out.
- A job on n nodes stops when any node is interrupted: rate n / M (co-interruptions within a few
  minutes make this pessimistic).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = [
    "SpotOutcome",
    "daly_interval_hours",
    "daly_wall_hours",
    "simulate_spot",
    "young_interval_hours",
]


# Bounds that keep every loop finite whatever the spec says (docs/spec.md, "Limits").
MAX_EXPONENT = 50.0  # e^{R/M} past e^50: the job never finishes; report infinity instead of overflowing
MAX_SEGMENTS = 2000  # simulated checkpoint segments per run (longer jobs use coarser segments)
MAX_ATTEMPTS = 1000  # interrupted attempts of one segment before a run counts as never finishing
MIXED_ATTEMPT_BUDGET = 20_000  # attempts over all segments of a mixed-policy simulation
MAX_SIM_HOURS = 1e7  # expected wall time past ~1,100 years is not simulated: it never meets a deadline


def young_interval_hours(checkpoint_hours: float, mtbi_hours: float) -> float:
    """Young's first-order optimum sqrt(2 delta M)."""
    return math.sqrt(2.0 * checkpoint_hours * mtbi_hours)


def daly_interval_hours(checkpoint_hours: float, mtbi_hours: float) -> float:
    """Daly's higher-order optimum tau*; falls back to M when delta >= 2M (checkpoints cost more than they save).
    0 when delta is 0: a free checkpoint is worth taking at every step (it had read infinity, "no checkpoint needed",
    which the plan then told as "an interruption restarts it" while costing it as losing nothing)."""
    d, m = checkpoint_hours, mtbi_hours
    if d <= 0:
        return 0.0
    if d >= 2.0 * m:
        return m
    x = d / (2.0 * m)
    return math.sqrt(2.0 * d * m) * (1.0 + math.sqrt(x) / 3.0 + x / 9.0) - d


def daly_wall_hours(work_hours: float, checkpoint_hours: float, restart_hours: float, mtbi_hours: float) -> float:
    """Expected wall time of ``work_hours`` of work on a machine interrupted every ``mtbi_hours`` on average."""
    if not math.isfinite(mtbi_hours):
        return work_hours
    if mtbi_hours <= 0 or restart_hours / mtbi_hours > MAX_EXPONENT:
        return math.inf
    tau = daly_interval_hours(checkpoint_hours, mtbi_hours)
    if tau <= 0:  # free checkpoints, saved at every step: lose nothing but the restarts
        return work_hours * math.exp(restart_hours / mtbi_hours)
    m = mtbi_hours
    if work_hours <= tau:  # it ends before its first checkpoint: none is written, an interruption restarts it
        # (Daly's expression with one segment of the whole work and no checkpoint cost; it had been charged the
        # checkpoints and interval-sized losses of a job that never reaches one: 12% high on an 18-minute job)
        if work_hours / m > MAX_EXPONENT:
            return math.inf
        return m * math.exp(restart_hours / m) * math.expm1(work_hours / m)
    if (tau + checkpoint_hours) / m > MAX_EXPONENT:
        return math.inf
    return m * math.exp(restart_hours / m) * math.expm1((tau + checkpoint_hours) / m) * work_hours / tau


@dataclass(frozen=True)
class SpotOutcome:
    """Monte Carlo summary of one policy."""

    policy: str  # spot | mixed
    interval_hours: float  # checkpoint interval used
    expected_hours: float
    p_meet_deadline: float | None
    expected_cost_usd: float
    expected_spot_hours: float  # time billed at the spot price
    p95_hours: float


def simulate_spot(
    work_hours: float,
    rate_per_hour: float,
    checkpoint_hours: float,
    restart_hours: float,
    spot_usd_per_hour: float,
    on_demand_usd_per_hour: float,
    deadline_hours: float | None = None,
    policy: str = "spot",
    samples: int = 2000,
    seed: int = 0,
    band: tuple[float, float] = (1.0, 1.0),
) -> SpotOutcome:
    """Simulate ``samples`` runs segment by segment (vectorised over runs).

    A segment is tau* of work plus one checkpoint; an interruption inside it loses the segment so far
    and costs a restart (which may itself be interrupted). ``policy="mixed"``: before each segment, if a
    failed segment plus a restart would leave too little time to finish on on-demand, switch to
    on-demand for the rest (one more restart, then no interruptions).

    ``band`` (lo, hi): the projection's uncertainty on ``work_hours``. Each run draws its own speed from
    a lognormal whose 5th and 95th percentiles are lo and hi (stratified, ``_speed_strata``), and its work is
    scaled by it before it runs (interruptions, checkpoints and restarts are not), so the deadline odds include
    "the projection was optimistic", not just interruptions, and the mixed policy switches on its run's real work.
    """
    rng = np.random.default_rng(seed)
    lo, hi = band
    if rate_per_hour <= 0 and not hi > lo > 0:
        cost = work_hours * spot_usd_per_hour
        return SpotOutcome(
            policy, math.inf, work_hours, _meet(work_hours, deadline_hours), cost, work_hours, work_hours
        )
    if rate_per_hour <= 0:  # never interrupted: the projection band alone sets the odds
        return _outcome(policy, math.inf, np.full(samples, work_hours), np.full(samples, work_hours), band, rng,
                        samples, spot_usd_per_hour, on_demand_usd_per_hour, deadline_hours)  # fmt: skip
    m = 1.0 / rate_per_hour
    tau = daly_interval_hours(checkpoint_hours, m)
    if not daly_wall_hours(work_hours, checkpoint_hours, restart_hours, m) <= MAX_SIM_HOURS:
        never = math.inf  # hopeless (or infinite): nothing to simulate
        return SpotOutcome(policy, tau, never, None if deadline_hours is None else 0.0, never, never, never)
    mixed = policy == "mixed" and deadline_hours is not None
    due = deadline_hours if deadline_hours is not None else math.inf
    # Each run's work is the projected work x a speed drawn from the band (stratified: SPEED_STRATA quantiles of
    # the lognormal whose 5th-95th percentiles are lo-hi), drawn before the run, so the mixed policy switches on
    # the work its run really has. Scaling each run's wall clock afterwards (as before) let mixed switch too late
    # on a slow run: its deadline odds came out below pure spot's on the same fleet.
    speeds = _speed_strata(band, samples)
    ts, spots = [], []
    for speed, k in speeds:
        work = work_hours * speed
        expected = daly_wall_hours(work, checkpoint_hours, restart_hours, m)
        if not expected <= MAX_SIM_HOURS:
            t, spot_t = np.full(k, math.inf), np.full(k, math.inf)
        elif tau <= 0:  # free checkpoints at every step: an interruption loses its restart, no work
            t, spot_t = _free_checkpoints(rng, work, m, restart_hours, k, mixed, due)
        elif work / tau > MAX_SEGMENTS:
            # Thousands of short segments: each run's wall time concentrates at the expectation (law of
            # large numbers), so take it instead of simulating every segment. Mixed switches at once
            # when even the expectation is late.
            if mixed and expected > due:
                t, spot_t = np.full(k, work + restart_hours), np.zeros(k)
            else:
                t, spot_t = np.full(k, expected), np.full(k, expected)
        else:
            t, spot_t = _segments(rng, work, tau, m, checkpoint_hours, restart_hours, k, mixed, due)
        ts.append(t)
        spots.append(spot_t)
    return _outcome(policy, tau, np.concatenate(ts), np.concatenate(spots), (1.0, 1.0), rng, samples,
                    spot_usd_per_hour, on_demand_usd_per_hour, deadline_hours)  # fmt: skip


SPEED_STRATA = 20  # speeds drawn from the projection band per spot simulation (equal-probability strata)


def _speed_strata(band: tuple[float, float], samples: int) -> list[tuple[float, int]]:
    """(speed, runs) pairs: the band's lognormal (5th-95th percentile = lo-hi) at SPEED_STRATA equal-probability
    quantiles, the ``samples`` runs shared among them; [(1.0, samples)] without a band."""
    from statistics import NormalDist

    lo, hi = band
    if not hi > lo > 0:
        return [(1.0, samples)]
    mu, sigma = (math.log(lo) + math.log(hi)) / 2, (math.log(hi) - math.log(lo)) / (2 * 1.645)
    n = min(SPEED_STRATA, samples)
    z = [NormalDist().inv_cdf((i + 0.5) / n) for i in range(n)]
    counts = [samples // n + (1 if i < samples % n else 0) for i in range(n)]
    return [(math.exp(mu + sigma * zi), k) for zi, k in zip(z, counts, strict=True) if k > 0]


def _outcome(
    policy: str, tau: float, t: np.ndarray, spot_t: np.ndarray, band: tuple[float, float], rng: np.random.Generator,
    samples: int, spot_usd_per_hour: float, on_demand_usd_per_hour: float, deadline_hours: float | None,
) -> SpotOutcome:  # fmt: skip
    """The runs' wall clocks (``t``, of which ``spot_t`` on spot), each scaled by a speed drawn from the projection
    band, as an outcome: deadline odds, expected cost and hours."""
    lo, hi = band
    if hi > lo > 0:  # per-run speed from the projection band (5th-95th percentile = lo-hi)
        speed = np.exp(
            rng.normal((math.log(lo) + math.log(hi)) / 2, (math.log(hi) - math.log(lo)) / (2 * 1.645), samples)
        )
        t, spot_t = t * speed, spot_t * speed
    with np.errstate(invalid="ignore"):  # a run that never finishes (inf - inf): costs infinity
        run_cost = spot_t * spot_usd_per_hour + (t - spot_t) * on_demand_usd_per_hour
    run_cost = np.where(np.isfinite(t), run_cost, math.inf)
    return SpotOutcome(
        policy=policy,
        interval_hours=tau,
        expected_hours=float(t.mean()),
        p_meet_deadline=None if deadline_hours is None else float((t <= deadline_hours + 1e-9).mean()),
        expected_cost_usd=float(run_cost.mean()),
        expected_spot_hours=float(spot_t.mean()),
        p95_hours=float(np.percentile(t, 95, method="higher")),  # no interpolation: inf stays inf
    )


def _segments(
    rng: np.random.Generator,
    work_hours: float,
    tau: float,
    m: float,
    ckpt: float,
    restart_hours: float,
    samples: int,
    mixed: bool,
    due: float,
) -> tuple[np.ndarray, np.ndarray]:
    """(wall clock, hours on spot) of ``samples`` runs, segment by segment (vectorised over runs)."""
    n_seg = max(1, math.ceil(work_hours / tau - 1e-9))
    t = np.zeros(samples)  # wall clock
    spot_t = np.zeros(samples)
    on_demand = np.zeros(samples, dtype=bool)
    done_work = 0.0
    for seg in range(n_seg):
        seg_work = min(tau, work_hours - seg * tau)
        seg_len = seg_work + (ckpt if seg < n_seg - 1 else 0.0)
        remaining = work_hours - done_work  # on-demand needs only the work (no interruptions to insure)
        extra = np.where(on_demand, seg_work, 0.0)
        if mixed:
            late = ~on_demand & (t + seg_len + 2.0 * restart_hours + remaining > due)
            # a run that has not started yet starts on on-demand: no spot instance to leave, no restart to pay (a
            # tight deadline switched every run before its first segment and charged it a restart: mixed then met
            # the deadline in 5% of runs where spot met it in 94%, and cost more than on-demand)
            extra[late] = np.where(t[late] > 0, restart_hours, 0.0) + seg_work
            on_demand |= late
        pending = ~on_demand
        if not mixed:  # no decision between attempts: the segment's time in closed form
            t_seg = np.zeros(samples)
            t_seg[pending] = _until_done(rng, seg_len, restart_hours, m, int(pending.sum()))
        else:
            tries = max(10, MIXED_ATTEMPT_BUDGET // n_seg)  # all segments together stay bounded
            t_seg = _attempts(
                rng, seg_len, seg_work, restart_hours, m, pending, t, remaining, due, extra, on_demand, tries
            )
        t += t_seg + extra
        spot_t += t_seg
        done_work += seg_work
    return t, spot_t


def _free_checkpoints(
    rng: np.random.Generator, work_hours: float, m: float, restart_hours: float, k: int, mixed: bool, due: float
) -> tuple[np.ndarray, np.ndarray]:
    """(wall clock, hours on spot) of ``k`` runs that save at every step for free: Poisson(W/M) interruptions, each
    a restart (retried when interrupted: negative binomial failures of p = e^{-R/M}), no work lost. Mixed: after
    an interruption, on-demand for the rest when one more restart on spot would leave too little time."""
    p = math.exp(-restart_hours / m)
    lost_each = m - restart_hours * p / (1.0 - p) if p < 1.0 else 0.0

    def restarts(n: np.ndarray) -> np.ndarray:
        fails = rng.negative_binomial(np.maximum(n, 1), p) * (n > 0) if p < 1.0 else np.zeros(len(n))
        return n * restart_hours + fails * lost_each

    if not mixed:
        t = work_hours + restarts(rng.poisson(work_hours / m, k))
        return t, t.copy()
    # mixed, event by event: an interruption (of the work or of a restart) is where a run may leave spot; it stays
    # only while one more restart on spot and one on on-demand would still finish the work in time
    t, spot_t, left = np.zeros(k), np.zeros(k), np.full(k, work_hours)
    pending = np.full(k, work_hours + 2.0 * restart_hours <= due)  # hopeless on spot from the start: on-demand
    t[~pending] = work_hours
    restarting = np.zeros(k, dtype=bool)
    for _ in range(MIXED_ATTEMPT_BUDGET // 10):
        if not pending.any():
            break
        hit = np.full(k, math.inf)
        hit[pending] = rng.exponential(m, int(pending.sum()))
        need = np.where(restarting, restart_hours, left)
        step = np.where(pending, np.minimum(hit, need), 0.0)
        t += step
        spot_t += step
        left = np.where(pending & ~restarting, left - step, left)
        restarting = pending & ((restarting & (hit < need)) | (~restarting & (left > 1e-12)))
        late = restarting & (t + left + 2.0 * restart_hours > due)
        t[late] += restart_hours + left[late]  # on-demand: one restart, then no interruptions
        pending &= (left > 1e-12) & ~late
        restarting &= pending
    t[pending] += restart_hours + left[pending]  # bad luck without end: on-demand from here
    return t, spot_t


def _until_done(rng: np.random.Generator, length: float, restart_hours: float, m: float, k: int) -> np.ndarray:
    """Time to get ``length`` hours done without an interruption: failed tries are geometric with
    p = e^{-L/M}, each costing E[T | T < L] plus a restart (mean M (e^{R/M} - 1) with its own retries)."""
    if math.exp(-length / m) < 1.0 / MAX_ATTEMPTS:  # ~never gets through: counts as never finishing
        return np.full(k, math.inf)
    failures, lost_each = _failed_tries(rng, length, m, k)
    restart_each = m * math.expm1(restart_hours / m)
    return length + failures * (lost_each + restart_each)


def _failed_tries(rng: np.random.Generator, length: float, m: float, k: int) -> tuple[np.ndarray, float]:
    """(failed tries before the first that lasts ``length`` hours uninterrupted, mean hours each lasts):
    geometric with p = e^{-L/M} (drawn from logs: no int64 overflow), E[T | T < L] = M - L p / (1 - p)."""
    p = math.exp(-length / m)
    if p >= 1.0:
        return np.zeros(k), 0.0
    return np.floor(np.log1p(-rng.random(k)) / math.log1p(-p)), m - length * p / (1.0 - p)


def _attempts(
    rng: np.random.Generator,
    seg_len: float,
    seg_work: float,
    restart_hours: float,
    m: float,
    pending: np.ndarray,
    t: np.ndarray,
    remaining: float,
    due: float,
    extra: np.ndarray,
    on_demand: np.ndarray,
    tries: int = MAX_ATTEMPTS,
) -> np.ndarray:
    """One segment attempt by attempt, switching a run to on-demand as soon as its slack is gone
    (the mixed policy); a run still stuck after ``tries`` attempts switches too."""
    t_seg = np.zeros(len(t))
    pending = pending.copy()
    for _ in range(tries):
        if not pending.any():
            return t_seg
        k = int(pending.sum())
        hit = rng.exponential(m, k)
        ok = hit >= seg_len
        t_seg[pending] += np.where(ok, seg_len, hit + _restart(rng, restart_hours, m, k))
        still = pending.copy()
        still[pending] = ~ok
        pending = still
        late = pending & (t + t_seg + seg_len + 2.0 * restart_hours + remaining > due)
        extra[late] = restart_hours + seg_work
        on_demand |= late
        pending &= ~late
    extra[pending] = restart_hours + seg_work  # bad luck without end: on-demand from here
    on_demand |= pending
    return t_seg


def _restart(rng: np.random.Generator, restart_hours: float, m: float, k: int) -> np.ndarray:
    """Time to get going again: R, retried when an interruption lands inside it (mean M (e^{R/M} - 1)).

    Sampled in closed form, not attempt by attempt (a long restart on a flaky instance can need
    thousands of tries): the failed tries before the first that lasts R are geometric with
    p = e^{-R/M}, and each costs on average E[T | T < R] = M - R p / (1 - p) for T ~ Exp(mean M).
    """
    if restart_hours <= 0:
        return np.zeros(k)
    failures, lost_each = _failed_tries(rng, restart_hours, m, k)
    return restart_hours + failures * lost_each


def _meet(hours: float, deadline: float | None) -> float | None:
    return None if deadline is None else float(hours <= deadline)
