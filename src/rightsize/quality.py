"""How trustworthy a set of measurements is: contended or unconverged configs, in one summary.

    q = measurement_quality(profile.measurements)
    if q.problems: print(q.summary, q.likely_effect)

Torch-free: ``bench``, ``plan`` and the report read it. The facts come from ``Measurement.extra``
(``measure/conditions.py``: ``contention``, ``contended``; ``measure/timing.py``: ``ci_converged``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from rightsize.profile import Measurement

__all__ = ["Quality", "is_contended", "measurement_quality"]


def is_contended(m: Measurement) -> bool:
    """Timed while other work held the CPU (run-queue wait above ``CONTENTION_THRESHOLD``)."""
    return bool(m.extra.get("contended"))


@dataclass(frozen=True)
class Quality:
    measured: int  # ok configs
    contended: int
    not_converged: int
    worst_contention: float  # share of runnable time spent waiting for a CPU, worst config
    summary: str
    likely_effect: str

    @property
    def problems(self) -> bool:
        return self.contended > 0 or self.not_converged > 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"problems": self.problems}


def measurement_quality(measurements: Iterable[Measurement]) -> Quality:
    ok = [m for m in measurements if m.status == "ok"]
    bad = [m for m in ok if is_contended(m)]
    loose = [m for m in ok if m.extra.get("ci_converged") is False]
    worst = max((float(m.extra.get("contention") or 0.0) for m in ok), default=0.0)
    parts = []
    if bad:
        parts.append(f"{len(bad)} of {len(ok)} configs were timed while the CPU was busy (up to {worst:.0%} of their "
                     "run time waiting for a core)")  # fmt: skip
    if loose:
        parts.append(f"{len(loose)} of {len(ok)} did not reach the timing's confidence target (capped by time)")
    summary = "; ".join(parts) if parts else f"{len(ok)} configs timed on a quiet CPU, all converged"
    effect = ""
    if bad:
        slow = 1.0 / max(1e-3, 1.0 - worst)
        effect = (
            f"contended timings read up to {slow:.1f}x slower than this machine runs them; the projection does not "
            "anchor on them where a clean point exists; re-run `rightsize bench --fresh` on a quiet machine"
        )
    elif loose:
        effect = "unconverged medians carry more than the target's noise; raise timing.max_time_s"
    return Quality(len(ok), len(bad), len(loose), worst, summary, effect)
