"""Closed forms and the fluid approximation: the checks the simulator must reproduce, and a fast pre-filter.

Times in milliseconds, rates in events per millisecond unless a name says ``_per_s``.

    mm1_sojourn_quantile_ms   M/M/1 FCFS: sojourn ~ Exp(mu - lambda)          (Kleinrock, Queueing Systems I, §3.2)
    md1_mean_sojourn_ms       M/D/1: Pollaczek-Khinchine mean wait rho D / (2 (1 - rho)) + D
    md1_wait_cdf              M/D/1 waiting-time CDF, Erlang's (Crommelin 1932) finite sum
    erlang_c                  M/M/c probability of waiting (Erlang C)
    fluid_batching            docs/sources.md `inoue-2019` (Inoue, arXiv 1912.06322): steady batch of a batching server
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

__all__ = [
    "FluidResult",
    "erlang_c",
    "fluid_batching",
    "md1_mean_sojourn_ms",
    "md1_sojourn_quantile_ms",
    "md1_wait_cdf",
    "mm1_sojourn_quantile_ms",
    "mmc_sojourn_quantile_ms",
]


def mm1_sojourn_quantile_ms(rate_per_ms: float, service_mean_ms: float, q: float) -> float:
    """q-quantile (0..1) of the M/M/1 FCFS sojourn time: -ln(1 - q) / (mu - lambda)."""
    mu = 1.0 / service_mean_ms
    if rate_per_ms >= mu:
        return math.inf
    return -math.log(1.0 - q) / (mu - rate_per_ms)


def md1_mean_sojourn_ms(rate_per_ms: float, service_ms: float) -> float:
    """Mean M/D/1 sojourn: D + rho D / (2 (1 - rho)) (Pollaczek-Khinchine with zero service variance)."""
    rho = rate_per_ms * service_ms
    return math.inf if rho >= 1 else service_ms + rho * service_ms / (2.0 * (1.0 - rho))


def md1_wait_cdf(t_ms: float, rate_per_ms: float, service_ms: float) -> float:
    """P(W <= t) for M/D/1 FCFS: (1 - rho) sum_{k=0}^{floor(t/D)} (lambda (k D - t))^k / k! e^{-lambda (k D - t)}.

    Erlang's formula; stable in float64 for t up to ~20 service times at rho <= 0.9.
    """
    rho = rate_per_ms * service_ms
    if t_ms < 0:
        return 0.0
    total = 0.0
    for k in range(math.floor(t_ms / service_ms) + 1):
        x = rate_per_ms * (k * service_ms - t_ms)  # <= 0
        total += x**k / math.factorial(k) * math.exp(-x)
    return min(1.0, max(0.0, (1.0 - rho) * total))


def md1_sojourn_quantile_ms(rate_per_ms: float, service_ms: float, q: float) -> float:
    """q-quantile of the M/D/1 sojourn (wait + D), by bisection on ``md1_wait_cdf``."""
    if md1_wait_cdf(0.0, rate_per_ms, service_ms) >= q:
        return service_ms
    lo, hi = 0.0, service_ms
    while md1_wait_cdf(hi, rate_per_ms, service_ms) < q:
        hi *= 2.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if md1_wait_cdf(mid, rate_per_ms, service_ms) < q else (lo, mid)
    return hi + service_ms


def erlang_c(servers: int, offered_load: float) -> float:
    """Probability an arrival waits in M/M/c with offered load a = lambda / mu (Erlang C)."""
    c, a = servers, offered_load
    if a >= c:
        return 1.0
    term, s = 1.0, 1.0  # a^k / k! for k = 0
    for k in range(1, c):
        term *= a / k
        s += term
    last = term * a / c * c / (c - a)  # a^c / c! * c / (c - a)
    return last / (s + last)


def mmc_sojourn_quantile_ms(servers: int, rate_per_ms: float, service_mean_ms: float, q: float) -> float:
    """q-quantile of the M/M/c FCFS sojourn time (service Exp(mu) convolved with the Erlang-C wait), by bisection."""
    mu = 1.0 / service_mean_ms
    pw = erlang_c(servers, rate_per_ms / mu)
    theta = servers * mu - rate_per_ms

    def cdf(t: float) -> float:
        # P(S + W <= t) with S ~ Exp(mu), W = 0 w.p. 1 - pw, else Exp(theta)
        no_wait = 1.0 - math.exp(-mu * t)
        if abs(theta - mu) < 1e-12:
            wait = 1.0 - math.exp(-mu * t) * (1.0 + mu * t)
        else:
            wait = 1.0 - (theta * math.exp(-mu * t) - mu * math.exp(-theta * t)) / (theta - mu)
        return (1.0 - pw) * no_wait + pw * wait

    lo, hi = 0.0, service_mean_ms
    while cdf(hi) < q:
        hi *= 2.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if cdf(mid) < q else (lo, mid)
    return hi


@dataclass(frozen=True)
class FluidResult:
    """Deterministic steady state of one batching replica (fluid limit)."""

    stable: bool  # the largest allowed batch keeps up with the arrival rate
    batch: float  # steady samples per batch
    cycle_ms: float  # time between batch starts
    mean_latency_ms: float  # ~ wait for the next batch + one batch (~1.5 cycles when busy; sources.md inoue-2019)
    utilization: float  # busy fraction


def fluid_batching(
    t_ms: Callable[[float], float], rate_per_ms: float, max_batch: int, max_wait_ms: float = 0.0
) -> FluidResult:
    """Fluid approximation of a replica with batch time ``t_ms(b)`` (samples) at ``rate_per_ms`` samples/ms.

    With t(b) = c + a b and rho = lambda a < 1 the greedy fixed point b = lambda t(b) gives
    b* = lambda c / (1 - rho) and cycle c / (1 - rho) (docs/sources.md `inoue-2019`, Inoue arXiv 1912.06322); we
    iterate the fixed point on the curve itself. A batching window W makes an idle server collect
    ~1 + lambda W samples first.
    """
    lam = rate_per_ms
    t_max = t_ms(max_batch)
    if lam * t_max / max_batch >= 1.0:
        return FluidResult(False, float(max_batch), t_max, math.inf, 1.0)
    b = 1.0
    for _ in range(60):  # b <- clamp(lambda t(b)); monotone, converges when stable
        nb = min(float(max_batch), max(1.0, lam * t_ms(b)))
        if abs(nb - b) < 1e-6:
            break
        b = nb
    cycle = t_ms(b)
    util = min(1.0, lam * cycle / b)
    # busy regime: arrivals wait ~half a cycle, then one cycle; mostly idle: a short residual wait
    mean = 1.5 * cycle if lam * cycle >= 1.0 else cycle * (1.0 + 0.5 * util)
    if max_wait_ms > 0 and b < max_batch:
        bw = min(float(max_batch), 1.0 + lam * max_wait_ms)
        if bw > b:  # the window collects more than greedy batching would
            fill_ms = (bw - 1.0) / lam
            b = bw
            cycle = max(t_ms(b), fill_ms)
            util = min(1.0, lam * t_ms(b) / b)
            mean = 0.5 * fill_ms + t_ms(b) * (1.0 + 0.5 * util)
    return FluidResult(True, b, cycle, mean, util)
