"""Load everything the reference fit needs (published rows, traces, local anchors) and run it.

    ev = run_reference_evaluation(load_catalog(""))      # torch: traces the reference models; ~1 minute on 2 cores

Used by ``scripts/fit_projection.py`` (writes ``calibration/projection_fit.json``) and by
``benchmarks/projection_vs_published.py`` (prints the leave-one-source-out table).
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rightsize.catalog import Catalog, match_cpu_family
from rightsize.estimate.bands import Evaluation, evaluate
from rightsize.estimate.calibration import CalibrationSet, load_calibration
from rightsize.estimate.reference import (
    Anchor,
    ReferenceRow,
    anchors_from,
    device_runs_path,
    load_reference,
    needed_works,
    reference_path,
)
from rightsize.profile import WorkProfile

__all__ = ["fit_payload", "local_anchors", "run_reference_evaluation"]


def local_anchors(sets: Sequence[CalibrationSet], catalog: Catalog, works: dict[str, WorkProfile]) -> dict[str, Anchor]:
    """Anchors from CPU calibration sets; sets of one CPU family pool their measurements per model
    (the first family seen wins for a model measured on two)."""
    by_family: dict[str, tuple[Any, list[Any]]] = {}
    for s in sets:
        fam = match_cpu_family(catalog.cpus, s.env)
        if fam is None or s.meta.get("device_class") == "gpu":
            continue
        by_family.setdefault(fam.name, (fam, []))[1].extend(s.measurements)
    out: dict[str, Anchor] = {}
    for fam, ms in by_family.values():
        for model, anchor in anchors_from(ms, fam, works).items():
            out.setdefault(model, anchor)
    return out


def run_reference_evaluation(
    catalog: Catalog,
    reference: str | Path | None = None,
    calibration: Path | None = None,
    rows: Sequence[ReferenceRow] | None = None,
) -> tuple[Evaluation, list[ReferenceRow], dict[str, Any]]:
    """(evaluation, rows, inputs description) over ``catalog`` (the caller loads it: the shipped tables for the
    shipped fit) and the shipped (or given) reference and calibration files."""
    from rightsize.estimate.work import trace_works

    rows = list(rows) if rows is not None else load_reference(reference)
    runs = load_reference(device_runs_path(), run=True) if device_runs_path().exists() else []
    sets = load_calibration(calibration)
    ms = [m for s in sets for m in s.measurements]
    works = trace_works(needed_works([*rows, *runs], ms))
    anchors = local_anchors(sets, catalog, works)
    ev = evaluate(rows, works, anchors, catalog, runs)
    path = Path(reference or reference_path())
    inputs = {
        "reference_file": path.name,
        "reference_sha256": hashlib.sha256(path.read_bytes()).hexdigest()[:16],
        "device_runs_file": device_runs_path().name if runs else None,
        "calibration_files": [Path(s.path).name for s in sets],
        "anchor_models": sorted(anchors),
        "traced": sorted(works),
    }
    return ev, rows, inputs


def fit_payload(ev: Evaluation, inputs: dict[str, Any]) -> dict[str, Any]:
    """The JSON ``load_projection_model`` reads: fitted parameters, bands, and what they came from."""
    n_src = len({h.row.source for h in ev.held})
    return {
        "gpu": ev.fit.gpu.to_dict(),
        "cpu": ev.fit.cpu.to_dict(),
        "bands": {k: b.to_dict() for k, b in ev.bands.items()},
        "source": f"time models fitted to {ev.fit.rows} reference results from {len(ev.fit.sources)} sources",
        "fitted": dt.date.today().isoformat(),
        "script": "scripts/fit_projection.py",
        "inputs": inputs,
        "held_out": {
            "sources": n_src,
            "summary": {dc: ev.summary(dc) for dc in ("gpu", "cpu")} | {"all": ev.summary()},
            "rows": [{"id": h.row.id, "ratio": round(h.ratio, 4)} for h in ev.held],
        },
        "device_runs": {  # real GPU runs, predicted by the fit on every row (never fitted to them); in the bands
            "n": len(ev.runs),
            "runs": sorted({h.row.source for h in ev.runs}),
            "rows": [{"id": h.row.id, "ratio": round(h.ratio, 4)} for h in ev.runs],
        },
    }
