"""The projection's error and its bands: each source of the reference set predicted by a fit that never saw it.

    ev = evaluate(rows, works, anchors, catalog, runs)   # the fit, held-out predictions, real runs, bands
    ev.bands["gpu"]                                      # truth / projection within [lo, hi] for 90% of them

``leave_one_source_out`` predicts every published source from the fit on the others; real GPU runs
(``device_runs.csv``) are predicted by the fit on every row, never fitted to. ``bands_from`` turns both errors into
one band per device class, which the planner judges "meets the SLO" at, and for GPUs one per regime
(``timemodel.regime_of``): a batch whose projected time is the host's (the GPU waits for eager dispatch) errs about
half as widely again as one whose time is the GPU's kernels (host speed, Python and driver versions vary from machine
to machine; the kernels' arithmetic and bytes do not), so each projected batch carries the band of its own regime
(``band_for``). CPU rows have two regimes (``reference.cpu_regime``): a precision anchored on a local measurement of
itself, and one extrapolated from fp32 onto an ISA path the anchoring machine lacks (AMX bf16 from a machine without
AMX), each with the band of its own held-out error.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rightsize.catalog.model import Catalog
from rightsize.estimate.reference import (
    Anchor,
    Fit,
    ReferenceRow,
    cpu_regime,
    fit_params,
    predict_row,
    row_regime,
    work_key,
)
from rightsize.estimate.timemodel import CpuParams, GpuParams
from rightsize.measure.timing import percentile
from rightsize.profile import WorkProfile

__all__ = [
    "Band",
    "Evaluation",
    "Held",
    "band_for",
    "band_key",
    "bands_from",
    "evaluate",
    "leave_one_source_out",
]

# A regime's own band only with this many rows behind it; fewer fall back to the device class's band.
MIN_REGIME_ROWS = 10


def band_key(device_class: str, regime: str = "") -> str:
    """The key of a band in ``bands_from``'s mapping: ``"gpu"`` for the class, ``"gpu:host"`` for one regime."""
    return f"{device_class}:{regime}" if regime else device_class


@dataclass(frozen=True)
class Held:
    """One reference row predicted by a fit that never saw its source."""

    row: ReferenceRow
    predicted_ms: float
    regime: str = ""  # GPU: HOST_BOUND or DEVICE_BOUND at the predicting fit (regime_of); CPU: ANCHORED, EXTRAPOLATED

    @property
    def ratio(self) -> float:
        """predicted / published time (> 1: we project it slower than published)."""
        return self.predicted_ms / self.row.latency_ms


def leave_one_source_out(
    rows: Sequence[ReferenceRow], works: Mapping[str, WorkProfile], anchors: Mapping[str, Anchor], catalog: Catalog
) -> list[Held]:
    out = []
    for src in sorted({r.source for r in rows}):
        fit = fit_params(rows, works, anchors, catalog, exclude_source=src)
        for r in rows:
            if r.source == src and (h := _held(r, works, anchors, catalog, fit.gpu, fit.cpu)) is not None:
                out.append(h)
    return out


def _held(
    row: ReferenceRow,
    works: Mapping[str, WorkProfile],
    anchors: Mapping[str, Anchor],
    catalog: Catalog,
    gpu: GpuParams,
    cpu: CpuParams,
) -> Held | None:
    """``row`` predicted by the fit (``gpu``, ``cpu``) with its regime, or None when it cannot be projected."""
    t = predict_row(row, works, anchors, catalog, gpu, cpu)
    if t is None:
        return None
    return Held(row, t, row_regime(row, works, catalog, gpu) or cpu_regime(row, anchors, catalog, cpu))


@dataclass(frozen=True)
class Band:
    """Multipliers on a projected time that bound the truth: truth ∈ [t × lo, t × hi] for ``coverage``
    of the held-out published rows of this device class."""

    lo: float
    hi: float
    coverage: float
    n: int
    median_abs_error: float
    source: str

    def to_dict(self) -> dict[str, Any]:
        return {"lo": self.lo, "hi": self.hi, "coverage": self.coverage, "n": self.n,
                "median_abs_error": self.median_abs_error, "source": self.source}  # fmt: skip


def bands_from(held: Sequence[Held], coverage: float = 0.9, floor: float = 0.05) -> dict[str, Band]:
    """Per device class, and per regime within it (``band_key``), the narrowest band around 1 holding ``coverage``
    of truth/prediction ratios. A regime with fewer than ``MIN_REGIME_ROWS`` rows gets no band of its own.

    truth / pred = 1 / ratio; lo and hi are the (1 − c)/2 and (1 + c)/2 empirical quantiles of it,
    widened by ``floor`` (measurement noise of the published figure itself)."""
    groups: dict[str, list[Held]] = {}
    for h in held:
        groups.setdefault(band_key(h.row.device_class), []).append(h)
        if h.regime:
            groups.setdefault(band_key(h.row.device_class, h.regime), []).append(h)
    out: dict[str, Band] = {}
    for key in sorted(groups):
        hs = groups[key]
        if ":" in key and len(hs) < MIN_REGIME_ROWS:
            continue
        qs = sorted(1.0 / h.ratio for h in hs)
        n = len(qs)
        lo_q = percentile(qs, (1 - coverage) / 2 * 100)
        hi_q = percentile(qs, (1 + coverage) / 2 * 100)
        lo, hi = min(lo_q, 1.0) * (1 - floor), max(hi_q, 1.0) * (1 + floor)
        inside = sum(1 for q in qs if lo <= q <= hi) / n
        mae = statistics.median(abs(h.ratio - 1.0) for h in hs)
        runs = sum(1 for h in hs if h.row.run)
        bench = sum(1 for h in hs if not h.row.run and h.row.benched)
        dc, _, regime = key.partition(":")
        what = (f"{regime}-bound {dc.upper()}" if dc == "gpu" else f"{regime} {dc.upper()}") if regime else dc.upper()
        src = f"leave-one-source-out error over {n - runs - bench} published {what} results"
        if bench:
            src += f" and {bench} {what} results of rightsize bench on lent machines"
        if runs:
            src += f" and the error over {runs} real {what} runs (never fitted)"
        out[key] = Band(lo, hi, inside, n, mae, src)
    return out


def band_for(bands: Mapping[str, Band], device_class: str, regime: str = "") -> Band | None:
    """The band a projection in ``regime`` of ``device_class`` carries: its regime's, else its class's."""
    return bands.get(band_key(device_class, regime)) or bands.get(band_key(device_class))


@dataclass(frozen=True)
class Evaluation:
    """The fit on every row, the held-out predictions, and the bands they imply."""

    fit: Fit
    held: tuple[Held, ...]
    bands: dict[str, Band]
    skipped: tuple[tuple[ReferenceRow, str], ...]  # rows that could not be projected, and why
    runs: tuple[Held, ...] = ()  # real GPU runs predicted by the fit on every row (never fitted): in the bands

    def summary(self, device_class: str | None = None) -> dict[str, float]:
        hs = [h for h in self.held if device_class is None or h.row.device_class == device_class]
        if not hs:
            return {"n": 0}
        errs = [abs(h.ratio - 1.0) for h in hs]
        worst = max(hs, key=lambda h: max(h.ratio, 1.0 / h.ratio))
        inside, widths = 0, []
        for h in hs:
            b = band_for(self.bands, h.row.device_class, h.regime)
            if b is None:
                continue
            widths.append(b.hi / b.lo)
            inside += int(b.lo <= 1.0 / h.ratio <= b.hi)
        return {
            "n": len(hs),
            "median_abs_error": statistics.median(errs),
            "worst_factor": max(worst.ratio, 1.0 / worst.ratio),
            "coverage": inside / len(hs),
            "coverage_out_of_source": self.out_of_source_coverage(hs),
            "median_band_width": statistics.median(widths) if widths else math.inf,
        }

    def out_of_source_coverage(self, hs: Sequence[Held]) -> float:
        """Share of ``hs`` inside a band built WITHOUT their own source's errors: the stricter test of a band,
        since ``coverage`` judges each row by a band its own error helped to set (in-sample by construction)."""
        inside = 0
        for src in sorted({h.row.source for h in hs}):
            bands = bands_from([h for h in (*self.held, *self.runs) if h.row.source != src])
            for h in hs:
                b = band_for(bands, h.row.device_class, h.regime) if h.row.source == src else None
                inside += int(b is not None and b.lo <= 1.0 / h.ratio <= b.hi)
        return inside / len(hs) if hs else 0.0


def evaluate(
    rows: Sequence[ReferenceRow],
    works: Mapping[str, WorkProfile],
    anchors: Mapping[str, Anchor],
    catalog: Catalog,
    runs: Sequence[ReferenceRow] = (),
) -> Evaluation:
    """Fit on all rows, predict each source from a fit without it, predict the real ``runs`` by the fit on all rows
    (never fitted to them), and derive the bands from both errors."""
    gp, cp = GpuParams(), CpuParams()
    skipped = []
    for r in rows:
        if predict_row(r, works, anchors, catalog, gp, cp) is None:
            why = "no trace" if work_key(r.model, r.mode, r.input) not in works else (
                "device not in the catalog" if r.device not in catalog.accelerators and r.device not in catalog.cpus
                else "no local measurement of this model to anchor the CPU model")  # fmt: skip
            skipped.append((r, why))
    held = leave_one_source_out(rows, works, anchors, catalog)
    fit = fit_params(rows, works, anchors, catalog)
    ran = [h for r in runs if (h := _held(r, works, anchors, catalog, fit.gpu, fit.cpu)) is not None]
    return Evaluation(fit, tuple(held), bands_from([*held, *ran]), tuple(skipped), tuple(ran))
