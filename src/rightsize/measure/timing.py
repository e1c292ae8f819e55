"""Adaptive timing: repeat until the median's 95% confidence interval is tight, or a cap is hit.

The median's CI comes from order statistics (distribution-free): with n sorted samples the ranks
n/2 ± 1.96·sqrt(n)/2 bound the median at ~95% (Conover, *Practical Nonparametric Statistics*, §3.2).
CUDA calls are timed with events around the call and a synchronize; CPU calls with perf_counter.
"""

from __future__ import annotations

import contextlib
import math
import statistics
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass

from rightsize.profile import Latency


@dataclass(frozen=True)
class TimingPolicy:
    warmup: int = 3
    min_repeats: int = 5
    max_repeats: int = 200
    target_ci: float = 0.05  # relative half-width of the median's 95% CI
    max_time_s: float = 10.0


def median_ci_halfwidth(samples: list[float]) -> float:
    """Relative half-width of the ~95% CI of the median (inf when too few samples)."""
    n = len(samples)
    if n < 3:
        return math.inf
    s = sorted(samples)
    half = 1.96 * math.sqrt(n) / 2
    lo = max(0, math.floor(n / 2 - half))
    hi = min(n - 1, math.ceil(n / 2 + half) - 1)
    med = statistics.median(s)
    return (s[hi] - s[lo]) / 2 / med if med > 0 else math.inf


def percentile(sorted_samples: list[float], q: float) -> float:
    """Linear-interpolated percentile (q in 0..100) of already sorted samples."""
    if not sorted_samples:
        return math.nan
    k = (len(sorted_samples) - 1) * q / 100
    f, c = math.floor(k), math.ceil(k)
    return sorted_samples[f] + (sorted_samples[c] - sorted_samples[f]) * (k - f)


def summarize(samples_ms: list[float]) -> Latency:
    s = sorted(samples_ms)
    return Latency(
        p50=percentile(s, 50),
        p95=percentile(s, 95),
        p99=percentile(s, 99),
        mean=statistics.fmean(s),
        std=statistics.pstdev(s) if len(s) > 1 else 0.0,
        n=len(s),
    )


def cpu_timer(fn: Callable[[], object]) -> float:
    """One call's wall time in milliseconds."""
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1e3


def cuda_timer(fn: Callable[[], object]) -> float:
    """One call's GPU time in milliseconds: CUDA events around the call, then synchronize."""
    import torch

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    return float(start.elapsed_time(end))


def time_adaptive(
    fn: Callable[[], object],
    policy: TimingPolicy,
    timer: Callable[[Callable[[], object]], float] = cpu_timer,
    conditions: AbstractContextManager[object] | None = None,
) -> tuple[Latency, bool]:
    """Time ``fn`` adaptively. Returns the stats and whether the CI target was met (False: capped).

    ``conditions`` (e.g. ``measure.conditions.RunConditions``) is entered around the timed samples
    only, after the warm-up, so what it records describes exactly the calls the stats come from.
    """
    warm_until = time.perf_counter() + policy.max_time_s  # the cap bounds the warm-up too (after one call)
    for _ in range(policy.warmup):
        fn()
        if time.perf_counter() >= warm_until:
            break
    samples: list[float] = []
    converged = False
    with conditions if conditions is not None else contextlib.nullcontext():
        deadline = time.perf_counter() + policy.max_time_s
        while len(samples) < policy.max_repeats:
            samples.append(timer(fn))
            if len(samples) >= policy.min_repeats and median_ci_halfwidth(samples) <= policy.target_ci:
                converged = True
                break
            if time.perf_counter() >= deadline and len(samples) >= 3:
                break
    return summarize(samples), converged
