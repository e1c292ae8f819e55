"""How trustworthy a set of measurements is: contended or unconverged configs, in one summary.

    q = measurement_quality(profile.measurements)
    if q.problems:
        print(q.summary, q.likely_effect)     # or q.to_dict() into a JSON report

Torch-free: ``bench``, ``plan`` and the report read it. The facts come from ``Measurement.extra``,
written by the measuring child and the sweep (docs/measuring.md):

- ``contended`` (bool): the timing was disturbed; ``contention`` (0..1): share of the threads'
  runnable time spent waiting for a CPU; ``gflops_vs_best``: achieved GFLOP/s over the best this
  machine reached on the same work, when known; ``attempts``: how many times it was measured.
- ``ci_converged`` (bool): the median's confidence interval met the target before the time cap.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from rightsize.measure.conditions import CONTENTION_THRESHOLD, SLOW_VS_BEST
from rightsize.profile import Measurement

__all__ = ["CONTENTION_THRESHOLD", "SLOW_VS_BEST", "Quality", "is_contended", "measurement_quality", "slowdown"]


def is_contended(m: Measurement) -> bool:
    """Timed while other work held the CPU (``extra.contended``: run-queue wait above
    ``CONTENTION_THRESHOLD`` of its runnable time, or under ``SLOW_VS_BEST`` of this machine's best
    GFLOP/s on the same work)."""
    return bool(m.extra.get("contended"))


def slowdown(m: Measurement) -> float:
    """Estimated factor by which a timing reads slower than this machine runs it (1.0: undisturbed).

    The larger of 1 / (1 − contention) — the CPU its threads got over the CPU they were ready to
    use — and best / achieved GFLOP/s when a best is known. Calls longer than a scheduler slice
    lose about this much; threads that wait on each other lose more (2-thread DistilBERT beside two
    CPU hogs: contention 50%, estimate 2.0x, measured 2.2-3.7x); a single-threaded call much
    shorter than a slice may keep its median and lose its tail instead.
    """
    share = min(0.999, max(0.0, float(m.extra.get("contention") or 0.0)))
    factor = 1.0 / (1.0 - share)
    ratio = m.extra.get("gflops_vs_best")
    if ratio:
        factor = max(factor, 1.0 / float(ratio))
    return max(1.0, factor)


@dataclass(frozen=True)
class Quality:
    """Summary of a set of measurements' timing conditions (only ``ok`` configs count)."""

    measured: int  # ok configs
    contended: int  # of them, flagged contended
    not_converged: int  # of them, stopped by max_time_s before the CI target
    worst_contention: float  # largest share of runnable time spent waiting for a CPU (0..1)
    worst_slowdown: float  # largest ``slowdown`` estimate among contended configs (1.0 when none)
    summary: str  # one line; says "all converged" when nothing is off
    likely_effect: str  # what that does to the numbers and what to do ("" when nothing is off)

    @property
    def problems(self) -> bool:
        return self.contended > 0 or self.not_converged > 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"problems": self.problems}


def measurement_quality(measurements: Iterable[Measurement]) -> Quality:
    """Count contended and unconverged ``ok`` measurements and say what they do to the numbers."""
    ok = [m for m in measurements if m.status == "ok"]
    bad = [m for m in ok if is_contended(m)]
    loose = [m for m in ok if m.extra.get("ci_converged") is False]
    worst = max((float(m.extra.get("contention") or 0.0) for m in ok), default=0.0)
    worst_bad = max((float(m.extra.get("contention") or 0.0) for m in bad), default=0.0)
    slow = max((slowdown(m) for m in bad), default=1.0)
    parts, effects = [], []
    if bad:
        by_rate = sum(1 for m in bad if float(m.extra.get("gflops_vs_best") or 1.0) < SLOW_VS_BEST)
        part = f"timings of {len(bad)} of {len(ok)} configs were disturbed: they waited up to {worst_bad:.0%} of " \
               "their run time for a CPU"  # fmt: skip
        if by_rate:
            part += f" ({by_rate} ran under a third of this machine's best GFLOP/s)"
        parts.append(part)
        effects.append(
            f"they read about {slow:.1f}x slower than this machine can run them, or more with several threads; "
            "re-run `rightsize bench --fresh` on a quiet machine"
        )
    if loose:
        parts.append(f"{len(loose)} of {len(ok)} configs did not reach the timing's confidence target (stopped by "
                     "max_time_s or max_repeats)")  # fmt: skip
        effects.append("unconverged medians are noisier than target_ci; raise timing.max_time_s or max_repeats")
    summary = "; ".join(parts) if parts else f"{len(ok)} configs timed on a quiet CPU, all converged"
    return Quality(len(ok), len(bad), len(loose), worst, slow, summary, "; ".join(effects))
