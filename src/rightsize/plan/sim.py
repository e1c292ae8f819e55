"""Simulate micro-batched serving: latency percentiles, utilisation and mean batch of one deployment.

    from rightsize.plan.sim import SimConfig, simulate
    res = simulate(curve, SimConfig(rate_per_s=40, replicas=2, max_batch=8, max_wait_ms=5))
    res.latency.p95, res.utilization, res.mean_batch

Engines (``engine="auto"`` picks the first that applies):
    lindley  one server, batch 1: departures by a cumulative max, D_n = C_n + max_{k<=n}(a_k - C_{k-1})
             with C the cumulative service times (Lindley's recursion, vectorised); millions of requests/s
    lanes    balancer "central" (one queue shared by the replicas, Triton) or long runs: the run is split
             into independent replications advanced side by side (``lanes.py``); millions of requests/s
    events   per-replica batchers behind "jsq", "p2c" or "random" (``events.py``), and short runs;
             exact, ~0.3 M requests/s

Service time of a batch of b samples is the curve's median t(b) times lognormal noise whose
coefficient of variation is the curve's cv (sigma = sqrt(ln(1 + cv^2))); ``service="exponential"``
(mean t) and ``"deterministic"`` exist for the closed-form checks. ``service_ratios`` replaces the
lognormal noise by draws from measured ratios (served batch time / t(b)): the spread a server really had.

``arrivals_ms`` replays given arrival times instead of drawing them (lindley and events engines), keeping
the requests that arrive from ``record_from_ms`` on: ``rightsize validate`` feeds the load generator's own
schedule, so a 10-second run is predicted as that run, not as the steady state (at 80% load the p95 of
one 10-second Poisson run varies about 2x from schedule to schedule; docs/loadtesting.md).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields

import numpy as np

from rightsize.plan.arrivals import arrival_times_ms
from rightsize.plan.events import ratio_draws, run_balanced
from rightsize.plan.lanes import run_lanes
from rightsize.profile import Latency, ServiceCurve

__all__ = ["SimConfig", "SimResult", "lognormal_sigma", "service_tables", "sim_key", "simulate"]

ServiceFn = Callable[[float], float]  # samples -> ms


@dataclass(frozen=True)
class SimConfig:
    """One serving deployment under one load."""

    rate_per_s: float  # requests per second, whole deployment
    replicas: int = 1
    max_batch: int = 1  # samples per batch (whole requests only; at least one request)
    max_wait_ms: float = 0.0  # Triton max_queue_delay: from the oldest queued request's arrival
    request_samples: int = 1
    arrival: str = "poisson"  # poisson | bursty | constant
    burstiness: float = 4.0  # bursty: peak-to-mean rate
    burst_s: float = 1.0  # bursty: mean ON period, seconds
    balancer: str = "jsq"  # jsq | p2c | random | central (one shared queue)
    service: str = "lognormal"  # lognormal | exponential | deterministic

    @property
    def max_requests(self) -> int:
        return max(1, self.max_batch // self.request_samples)


@dataclass(frozen=True)
class SimResult:
    """Request latency (every percentile asked for: ``latency.at(q)``), busy fraction per replica,
    samples per batch."""

    latency: Latency
    utilization: float
    mean_batch: float
    n_requests: int
    engine: str


# What a curve says about itself, not about its service times: the device it runs on, the instance it was built for,
# where its numbers came from, what a row built on it must say.
CURVE_LABELS = frozenset({"device", "instance", "source", "caveats"})


def sim_key(curve: ServiceCurve) -> tuple[object, ...]:
    """Every field of ``curve`` but its labels (``CURVE_LABELS``): curves with equal keys simulate alike, so the
    planner simulates them once. A catalog of 1,000 rows of one size and price had projected 1,000 equal curves,
    each simulated on its own: minutes of planning."""
    return tuple(getattr(curve, f.name) for f in fields(curve) if f.name not in CURVE_LABELS)


def lognormal_sigma(cv: float) -> float:
    """Sigma of a lognormal with coefficient of variation ``cv``."""
    return math.sqrt(math.log1p(cv * cv)) if cv > 0 else 0.0


def service_tables(
    service: ServiceCurve | ServiceFn, max_requests: int, request_samples: int, cv: float | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """``(K+1,)`` time (ms) and lognormal sigma for k = 0..K requests per batch (index 0 unused).

    A curve is evaluated for every k at once (``curve_arrays``): a request mix with a 1,000,000-sample
    request needs a table that long for every option it plans."""
    t = np.zeros(max_requests + 1)
    s = np.zeros(max_requests + 1)
    if isinstance(service, ServiceCurve):
        t[1:], cvs = curve_arrays(service, np.arange(1, max_requests + 1) * request_samples)
        s[1:] = np.sqrt(np.log1p(np.square(cvs))) if cv is None else lognormal_sigma(cv)
    else:
        for k in range(1, max_requests + 1):
            t[k] = service(k * request_samples)
            s[k] = lognormal_sigma(cv or 0.0)
    t[0], s[0] = t[1], s[1]
    return t, s


def curve_arrays(curve: ServiceCurve, batch: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``curve.t_ms`` and ``curve.cv_at`` for many batch sizes at once (same rules: linear between measured
    sizes, the smallest size's time below it, the extrapolation slope past the largest, the nearest size's cv)."""
    b = np.asarray(batch, dtype=float)
    bs = np.asarray(curve.batch_sizes, dtype=float)
    ts = np.asarray(curve.latency_ms, dtype=float)
    t = np.interp(b, bs, ts)
    past = b > bs[-1]
    if past.any():
        if len(bs) == 1:
            t[past] = ts[0] * b[past] / bs[0]
        else:
            slope = max((ts[-1] - ts[-2]) / (bs[-1] - bs[-2]), ts[-1] / bs[-1] * 0.5, 0.0)
            t[past] = ts[-1] + slope * (b[past] - bs[-1])
    # Nearest measured size (ties to the smaller, as cv_at): midpoints between sizes split the axis.
    nearest = np.searchsorted((bs[:-1] + bs[1:]) / 2.0, b, side="left")
    return t, np.asarray(curve.cv, dtype=float)[nearest]


def simulate(
    service: ServiceCurve | ServiceFn,
    config: SimConfig,
    n_requests: int = 100_000,
    seed: int = 0,
    warmup: float = 0.1,
    percentiles: Sequence[float] = (50.0, 95.0, 99.0),
    engine: str = "auto",
    cv: float | None = None,
    arrivals_ms: np.ndarray | None = None,
    record_from_ms: float | None = None,
    service_ratios: np.ndarray | None = None,
    ratios_in_order: bool = False,
) -> SimResult:
    """Simulate ``n_requests`` requests (after ``warmup`` of each replication is dropped) of ``config``.

    ``cv`` overrides the curve's spread (a plain function ``service`` has cv 0 unless given).
    ``arrivals_ms`` (sorted) replaces the drawn arrivals, ``n_requests`` and ``config.arrival``; requests
    arriving before ``record_from_ms`` (default: the first ``warmup`` share) are served but not counted.
    ``service_ratios`` (> 0) are multipliers on t(k) drawn per batch instead of the lognormal noise;
    ``ratios_in_order`` takes them in their given order (from the first, cycling) instead of at random:
    a server's slow spells come in runs, and near saturation a run of slow batches is what builds the queue.
    """
    rng = np.random.default_rng(seed)
    k_cap = config.max_requests
    t_tab, s_tab = service_tables(service, k_cap, config.request_samples, cv)
    if config.service == "deterministic":
        s_tab = np.zeros_like(s_tab)
    dist = "exponential" if config.service == "exponential" else "lognormal"
    if service_ratios is not None:
        service_ratios = np.asarray(service_ratios, dtype=np.float64)
        if service_ratios.size == 0 or not np.all(np.isfinite(service_ratios)) or np.any(service_ratios <= 0):
            raise ValueError("service_ratios must be a non-empty array of finite values > 0")
        dist = "empirical"
    replay = arrivals_ms is not None
    if replay:
        arrivals_ms = np.asarray(arrivals_ms, dtype=np.float64)
        if arrivals_ms.ndim != 1 or arrivals_ms.size == 0 or np.any(np.diff(arrivals_ms) < 0):
            raise ValueError("arrivals_ms must be a non-empty sorted 1-D array")
        n_requests = int(arrivals_ms.size)
    if engine == "auto":
        if config.replicas == 1 and k_cap == 1:
            engine = "lindley"
        elif config.balancer == "central":
            engine = "lanes"
        elif config.replicas > 1 or n_requests <= 200_000:
            engine = "events"  # exact per-replica batchers; a short run is faster here than many lane steps
        else:
            engine = "lanes"
    if engine == "lanes" and (replay or dist == "empirical"):
        raise ValueError("the lanes engine draws its own arrivals and lognormal times; use lindley or events")

    def arrivals() -> np.ndarray:
        if arrivals_ms is not None:
            return arrivals_ms
        drawn = arrival_times_ms(rng, n_requests, config.rate_per_s, config.arrival, config.burstiness, config.burst_s)
        return drawn[0]

    def first_kept(a: np.ndarray) -> int:
        if replay and record_from_ms is not None:
            return int(np.searchsorted(a, record_from_ms))
        return int(n_requests * warmup)

    qs = sorted({50.0, 95.0, 99.0, *map(float, percentiles)})
    if engine == "lindley":
        a = arrivals()
        svc = _draw(rng, t_tab[1], s_tab[1], dist, n_requests, service_ratios, ratios_in_order)
        c = np.cumsum(svc)
        dep = c + np.maximum.accumulate(a - (c - svc))
        lat = (dep - a)[first_kept(a) :]
        busy, batches, span = float(svc.sum()), n_requests, float(dep[-1] - a[0])
        util = busy / span
    elif engine == "events":
        if config.balancer == "central" and config.replicas > 1:
            raise ValueError("the events engine has no shared queue; use engine='lanes' for balancer 'central'")
        balancer = config.balancer if config.replicas > 1 else "jsq"
        a = arrivals()
        lat_all, busy, batches = run_balanced(
            a,
            config.replicas,
            k_cap,
            config.max_wait_ms,
            t_tab,
            s_tab,
            rng,
            balancer,
            dist,
            service_ratios,
            ratios_in_order,
        )
        lat = lat_all[first_kept(a) :]
        util = busy / (config.replicas * float(np.max(a + lat_all) - a[0]))
    elif engine == "lanes":
        lat, util, batches = _lanes(rng, config, n_requests, warmup, t_tab, s_tab, dist)
    else:
        raise ValueError(f"unknown engine {engine!r}")
    values = np.percentile(lat, qs)
    pct = {q: float(v) for q, v in zip(qs, values, strict=True)}
    n_kept = int(lat.size)
    latency = Latency(
        p50=pct[50.0], p95=pct[95.0], p99=pct[99.0], mean=float(lat.mean()), n=n_kept,
        others={q: v for q, v in pct.items() if q not in (50.0, 95.0, 99.0)},
    )  # fmt: skip
    return SimResult(
        latency=latency,
        utilization=min(1.0, util),
        mean_batch=n_requests * config.request_samples / max(1, batches),
        n_requests=n_kept,
        engine=engine,
    )


def _draw(
    rng: np.random.Generator,
    t: float,
    sigma: float,
    dist: str,
    n: int,
    ratios: np.ndarray | None = None,
    in_order: bool = False,
) -> np.ndarray:
    if dist == "empirical" and ratios is not None:
        return t * ratio_draws(rng, ratios, n, in_order)
    if dist == "exponential":
        return t * rng.standard_exponential(n)
    if sigma > 0:
        return t * np.exp(sigma * rng.standard_normal(n))
    return np.full(n, t)


def _lanes(
    rng: np.random.Generator,
    config: SimConfig,
    n_requests: int,
    warmup: float,
    t_tab: np.ndarray,
    s_tab: np.ndarray,
    dist: str,
) -> tuple[np.ndarray, float, int]:
    """Independent replications side by side; "random" routing = each replica alone at rate / replicas."""
    per_replica = config.balancer == "random" and config.replicas > 1
    rate = config.rate_per_s / config.replicas if per_replica else config.rate_per_s
    servers = 1 if per_replica else config.replicas
    # Replications of >= 4000 requests each (>= 20x the M/M/1 relaxation time at rho 0.8), up to 256.
    lanes = int(min(256, max(1, n_requests // 4000)))
    if per_replica:
        lanes = max(lanes, config.replicas)
    per_lane = max(1, math.ceil(n_requests / lanes))
    a = arrival_times_ms(rng, per_lane, rate, config.arrival, config.burstiness, config.burst_s, lanes=lanes)
    out = run_lanes(
        a,
        np.full(lanes, servers),
        np.full(lanes, config.max_requests),
        np.full(lanes, config.max_wait_ms),
        np.tile(t_tab, (lanes, 1)),
        np.tile(s_tab, (lanes, 1)),
        rng,
        dist,
    )
    lat = out.latency_ms[:, int(per_lane * warmup) :].ravel()
    util = float(out.busy_ms.sum() / (servers * out.span_ms.sum()))
    return lat, util, int(out.batches.sum() * (n_requests / (lanes * per_lane)))
