"""Reports and the dashboard: what a plan recommends and the evidence behind it, at a glance.

    from rightsize.report import write_report
    write_report(result, Path("out.html"), profile=profile, curves=curves, sweep=sweep)   # or out.md

``rightsize report [RUN] -o out.html`` renders a plan stored in the results store;
``rightsize dashboard`` serves the store read-only on 127.0.0.1 (``rightsize.report.dashboard``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from rightsize.errors import SpecError
from rightsize.inputfile import short, write_whole
from rightsize.plan.result import Candidate, PlanResult
from rightsize.profile import Environment, Measurement, Profile, ServiceCurve
from rightsize.report.data import ReportData, build_report_data
from rightsize.report.html import render_html
from rightsize.report.markdown import render_markdown

__all__ = [
    "SUFFIXES",
    "ReportData",
    "build_report_data",
    "check_report_path",
    "render_html",
    "render_markdown",
    "write_report",
]

SUFFIXES = (".html", ".htm", ".md", ".markdown")


def check_report_path(path: Path, option: str) -> None:
    """A SpecError naming ``option`` unless ``path`` ends in .html or .md (the path as given: `-o /dev/full` read
    "got 'full'")."""
    if Path(path).suffix.lower() not in SUFFIXES:
        raise SpecError(option, f"must end in .html or .md, got {short(str(path))}")


def write_report(
    result: PlanResult | Mapping[str, Any],
    path: Path,
    *,
    profile: Profile | None = None,
    curves: Sequence[ServiceCurve] = (),
    memory: Any = None,
    env: Environment | dict[str, Any] | None = None,
    sweep: Callable[[Candidate, list[float]], list[float]] | None = None,
    measurements: Sequence[Measurement] = (),
    tiers: Sequence[Any] = (),
) -> Path:
    """Write the one-page report of ``result`` to ``path``: HTML (``.html``) or Markdown (``.md``).

    ``memory``: a MemoryEstimate, ``{"breakdown": {component: bytes}, "tiers": [GiB, ...]}`` or a plain
    ``{component: bytes}``; ``sweep(candidate, rates_per_s) -> p95_ms`` draws p95 vs request rate; ``tiers``:
    GPU memory tiers (``catalog.gpu_memory_tiers``) for a memory breakdown that names none.
    Returns ``path``. Raises SpecError for an unknown suffix, RightsizeError when it cannot write.
    """
    path = Path(path)
    check_report_path(path, "--report")
    suffix = path.suffix.lower()
    data = build_report_data(
        result,
        profile=profile,
        measurements=measurements,
        curves=curves,
        memory=memory,
        env=env,
        sweep=sweep,
        tiers=tiers,
    )
    text = render_markdown(data) if suffix in (".md", ".markdown") else render_html(data)
    write_whole(path, text, "--report")
    return path
