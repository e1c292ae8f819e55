"""Knee search: the highest open-loop rate whose p95 latency meets an SLO.

MLPerf LoadGen's Server scenario finds its metric the same way (docs/sources.md `load-generation`):
  1. run at ``start``; if it meets the SLO, double until a run violates it, else halve until one meets;
  2. binary-search between the last rate that met and the first that did not, until the bracket is
     within ``tolerance`` (relative) or ``max_steps`` runs were made.
Each step is one bounded run made by ``measure(rate) -> LoadResult``; the search itself is pure, so
tests can drive it with a synthetic ``measure``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from rightsize.loadgen.result import GENERATOR_BEHIND, LoadResult

__all__ = ["KneeResult", "KneeStep", "find_knee", "meets_slo"]


@dataclass(frozen=True)
class KneeStep:
    rate_per_s: float
    meets_slo: bool
    reason: str  # why it failed ("" when it met the SLO)
    result: LoadResult


@dataclass(frozen=True)
class KneeResult:
    """``rate_per_s`` is the highest rate that met the SLO (None when even the lowest tried failed)."""

    rate_per_s: float | None
    slo_p95_ms: float
    lower_per_s: float | None  # bracket: the knee lies in [lower, upper)
    upper_per_s: float | None  # None when no run violated the SLO up to max_rate_per_s
    generator_limited: bool  # the first failing rate failed because the generator fell behind (its run invalid)
    steps: list[KneeStep] = field(default_factory=list)
    tolerance: float | None = None  # the bracket's width the search bisects down to; None: not recorded

    @property
    def stopped_short(self) -> bool:
        """The search ran out of steps (``max_steps``) with the bracket still wider than ``tolerance``."""
        lo, hi = self.lower_per_s, self.upper_per_s
        return self.tolerance is not None and lo is not None and hi is not None and (hi - lo) / lo > self.tolerance

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"stopped_short": self.stopped_short}

    def render(self) -> str:
        lines = [f"knee search, SLO p95 <= {self.slo_p95_ms:g} ms"]
        for s in self.steps:
            lat = s.result.latency_ms
            p95 = f"{lat.p95:9.2f}" if lat else "        -"
            verdict = "meets" if s.meets_slo else f"fails: {s.reason}"
            lines.append(
                f"  rate {s.rate_per_s:10.1f}/s  achieved {s.result.achieved_rate_per_s:10.1f}/s  "
                f"p95 {p95} ms  {verdict}"
            )
        if self.rate_per_s is None:
            lines.append("no rate met the SLO")
        else:
            upper = "not found" if self.upper_per_s is None else f"{self.upper_per_s:.1f}/s"
            lines.append(f"knee: {self.rate_per_s:.1f}/s (first failing rate {upper})")
        if self.generator_limited:
            lines.append("warning: the generator fell behind at a failing rate; the knee may be the generator's")
        if self.stopped_short and self.lower_per_s is not None and self.upper_per_s is not None:
            width = (self.upper_per_s - self.lower_per_s) / self.lower_per_s
            lines.append(f"warning: the steps ran out (--max-steps) with the knee between {self.lower_per_s:.1f} and "
                         f"{self.upper_per_s:.1f}/s ({width:.0%} apart, --tolerance {self.tolerance:.0%}); give "
                         "more steps or a --start-rate nearer the knee")  # fmt: skip
        return "\n".join(lines)


def meets_slo(result: LoadResult, slo_p95_ms: float, max_error_fraction: float = 0.01) -> tuple[bool, str]:
    """(ok, reason): valid run, errors within ``max_error_fraction``, p95 of successes within the SLO."""
    if not result.valid:
        return False, "invalid run: " + "; ".join(result.problems)
    if result.error_fraction > max_error_fraction:
        return False, f"errors {result.error_fraction:.1%} > {max_error_fraction:.1%}"
    if result.latency_ms is None:
        return False, "no successful response"
    if result.latency_ms.p95 > slo_p95_ms:
        return False, f"p95 {result.latency_ms.p95:.1f} ms > {slo_p95_ms:g} ms"
    return True, ""


def _generator_behind(result: LoadResult) -> bool:
    return any(p.startswith(GENERATOR_BEHIND) for p in result.problems)


def find_knee(
    measure: Callable[[float], LoadResult],
    slo_p95_ms: float,
    *,
    start_rate_per_s: float = 10.0,
    tolerance: float = 0.05,
    max_steps: int = 16,
    max_error_fraction: float = 0.01,
    min_rate_per_s: float | None = None,
    max_rate_per_s: float = 1e6,
    pause_s: float = 0.0,
    retry_invalid: int = 1,
    confirm_failures: int = 0,
    on_step: Callable[[KneeStep], None] | None = None,
) -> KneeResult:
    """Widen ×2 from ``start_rate_per_s`` until the SLO breaks, then bisect; see the module docstring.

    A step whose run is invalid because the generator fell behind (e.g. a CPU hiccup on a shared machine)
    is re-run up to ``retry_invalid`` times before it counts as a failure; one the server made invalid (most
    requests shed or failed) counts at once. With ``confirm_failures``
    = k, a rate that misses the SLO is re-run up to k times and passes if any re-run meets it:
    noise on a shared machine (stalls, preemption) only ever adds latency, so a pass is trustworthy
    and a lone failure may not be. Every run is kept in ``steps``; ``max_steps`` bounds the runs,
    re-runs included.
    """
    if start_rate_per_s <= 0 or slo_p95_ms <= 0 or tolerance <= 0:
        raise ValueError("start_rate_per_s, slo_p95_ms and tolerance must be > 0")
    floor = min_rate_per_s if min_rate_per_s is not None else start_rate_per_s / 1024
    steps: list[KneeStep] = []

    def run(rate: float) -> KneeStep:
        if steps and pause_s:
            time.sleep(pause_s)  # let the server drain what an overloaded step left behind
        result = measure(rate)
        ok, reason = meets_slo(result, slo_p95_ms, max_error_fraction)
        s = KneeStep(rate, ok, reason, result)
        steps.append(s)
        if on_step is not None:
            on_step(s)
        return s

    def step(rate: float) -> bool:
        s = run(rate)
        invalid_left, confirm_left = retry_invalid, confirm_failures
        while not s.meets_slo and len(steps) < max_steps:
            if _generator_behind(s.result) and invalid_left > 0:  # the server's own failures are not re-run
                invalid_left -= 1
            elif s.result.valid and confirm_left > 0:
                confirm_left -= 1
            else:
                break
            s = run(rate)
        return s.meets_slo

    lo: float | None = None
    hi: float | None = None
    rate = start_rate_per_s
    # 1. widen
    if step(rate):
        lo = rate
        while len(steps) < max_steps and rate * 2 <= max_rate_per_s:
            rate *= 2
            if step(rate):
                lo = rate
            else:
                hi = rate
                break
    else:
        hi = rate
        while len(steps) < max_steps and rate / 2 >= floor:
            rate /= 2
            if step(rate):
                lo = rate
                break
            hi = rate
    # 2. bisect
    while lo is not None and hi is not None and (hi - lo) / lo > tolerance and len(steps) < max_steps:
        mid = (lo + hi) / 2
        if step(mid):
            lo = mid
        else:
            hi = mid
    # The search is generator-limited when its first failing rate failed because the generator fell behind (a run
    # invalid for the server's own failures, all 500s, is the server's: it had been put on the generator too)
    at_hi = [s for s in steps if s.rate_per_s == hi]
    generator_limited = bool(at_hi) and _generator_behind(at_hi[-1].result)
    return KneeResult(
        rate_per_s=lo,
        slo_p95_ms=slo_p95_ms,
        lower_per_s=lo,
        upper_per_s=hi,
        generator_limited=generator_limited,
        steps=steps,
        tolerance=tolerance,
    )
