"""Replaying a request mix lane by lane: the served batch times, the replay, its percentiles over draws.

The simulator side of ``rightsize validate`` on a request mix (``rightsize.workflows.validate_mix``):
``served_table`` turns a lane's logged batches into the service-time table ``run_sized`` draws from,
``replay_mix`` replays the classes' send schedules through each lane, and ``percentiles_over_draws``
reads each percentile per service-time draw.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from rightsize.profile import ServiceCurve

__all__ = ["DRAWS", "Lane", "percentiles_over_draws", "replay_mix", "served_table"]

DRAWS = 20  # service-time draws per replay: each percentile is their median, its range their 5-95%


@dataclass(frozen=True)
class Lane:
    """One served pool: its name, the sizes it takes, the precision it runs, and its measured curve."""

    name: str
    sizes: tuple[int, ...]
    precision: str
    curve: ServiceCurve
    planned: dict[str, Any] | None  # the fleet plan's pool (Candidate.to_dict) it stands for


def served_table(
    batches: list[tuple[int, float]], curve: ServiceCurve, max_batch: int, min_seen: int = 3
) -> tuple[np.ndarray, np.ndarray]:
    """Batch time (ms) and lognormal sigma per batch size 0..max_batch from a lane's logged (samples, busy ms).

    The spread is the scatter of each batch around its size's mean (sizes run ``min_seen`` times or more),
    and each size's median is set so the lognormal keeps the logged *mean*: near saturation the queue
    follows how busy the lane is, which a median with a long tail would overstate. A size the lane ran
    ``min_seen`` times or more takes its own mean; any other size the curve's t(n) scaled by the mean of
    busy / t(n) over every logged batch (how much slower or faster the server ran than its curve)."""
    from rightsize.plan.sim import lognormal_sigma

    by_n: dict[int, list[float]] = {}
    for n, ms in batches:
        if ms > 0:
            by_n.setdefault(int(n), []).append(float(ms))
    spread = [ms / statistics.mean(v) for v in by_n.values() if len(v) >= min_seen for ms in v]
    sigma = lognormal_sigma(float(np.std(spread))) if len(spread) > 2 else 0.0
    keep = math.exp(-0.5 * sigma * sigma)  # lognormal median / mean
    ratios = [ms / curve.t_ms(n) for n, v in by_n.items() for ms in v if curve.t_ms(n) > 0]
    scale = statistics.mean(ratios) * keep if ratios else 1.0
    t = np.array([curve.t_ms(max(n, 1)) * scale for n in range(max_batch + 1)])
    for n, v in by_n.items():
        if len(v) >= min_seen and n <= max_batch:
            t[n] = statistics.mean(v) * keep
    return t, np.full(max_batch + 1, sigma)


def replay_mix(
    schedules: dict[int, np.ndarray],
    lanes: list[Lane],
    tables: dict[str, tuple[np.ndarray, np.ndarray]],
    max_batch: int,
    max_wait_ms: float,
    warmup_ms: float | dict[int, float],
    overhead_ms: float | dict[int, float] = 0.0,
    draws: int = DRAWS,
    seed: int = 0,
) -> dict[int, list[np.ndarray]]:
    """Simulated latency (ms) of every request sent from ``warmup_ms`` on, per size class, one array per draw.

    ``schedules``: each class's intended send times (ms) on one clock (each generator's schedule shifted by
    when it started); ``warmup_ms`` one figure, or per size (a later generator's warm-up ends later); each
    lane replays
    the merged schedule of its classes with one replica (``run_sized``) and its ``tables[lane.name]``,
    ``draws`` times with different service-time draws, adding ``overhead_ms`` (one figure, or one per size)
    to every latency. On a few hundred requests one draw's p95 varies
    by tens of percent near saturation, so each percentile is read per draw (``_pcts``)."""
    from rightsize.plan.fleet import run_sized

    out: dict[int, list[np.ndarray]] = {s: [] for s in schedules}
    for lane in lanes:
        mine = [s for s in lane.sizes if s in schedules]
        if not mine:
            continue
        arrivals = np.concatenate([schedules[s] for s in mine])
        sizes = np.concatenate([np.full(len(schedules[s]), s) for s in mine])
        order = np.argsort(arrivals, kind="stable")
        arrivals, sizes = arrivals[order], sizes[order]
        t, sig = tables[lane.name]
        for d in range(draws):
            lat, _, _ = run_sized(arrivals, sizes, 1, max_batch, max_wait_ms, t, sig, np.random.default_rng(seed + d))
            for s in mine:
                extra = overhead_ms.get(s, 0.0) if isinstance(overhead_ms, dict) else overhead_ms
                start = warmup_ms.get(s, 0.0) if isinstance(warmup_ms, dict) else warmup_ms
                out[s].append(lat[(arrivals >= start) & (sizes == s)] + extra)
    return out


def percentiles_over_draws(draws: list[np.ndarray]) -> dict[str, Any] | None:
    """The median over draws of each percentile, and the 5-95% range of the p95 over draws."""
    runs = np.array([np.percentile(lat, [50.0, 95.0, 99.0]) for lat in draws if lat.size])
    if runs.size == 0:
        return None
    p50, p95, p99 = np.median(runs, axis=0)
    lo, hi = np.percentile(runs[:, 1], [5.0, 95.0])
    return {"p50": float(p50), "p95": float(p95), "p99": float(p99), "p95_range": [float(lo), float(hi)]}
