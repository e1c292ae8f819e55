"""Offline batch inference end to end: run the pipeline here (or on Ray), then cost the full job.

    result = run_and_project(workload, items=10_000, catalog=catalog, store=store)
    result.projection[0]          # the cheapest instance for ``result.full_items`` items

Measuring (``cluster.pipeline``) and costing (``cluster.forecast``) stay apart; this is where they meet.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rightsize.catalog import Catalog
    from rightsize.cluster.pipeline import PipelineResult
    from rightsize.spec import Workload
    from rightsize.store import Store

__all__ = ["run_and_project"]


def run_and_project(
    workload: Workload, *, catalog: Catalog | None = None, store: Store | None = None, **run: Any
) -> PipelineResult:
    """``cluster.pipeline.run_pipeline(workload, **run)``, then the full job's projection over ``catalog``
    (``store``: where the model's bench profile on this machine gives measured inference rates)."""
    from rightsize.cluster.forecast import project
    from rightsize.cluster.pipeline import run_pipeline

    res = run_pipeline(workload, **run)
    if res.items:
        res.projection, notes = project(res, workload, catalog, store)
        res.notes.extend(notes)
    return res
