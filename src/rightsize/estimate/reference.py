"""Published results as the projection's ground truth: load them, fit the time models, measure the error.

    rows = load_reference(path)                                   # catalog/data/reference/published.csv
    fit = fit_params(rows, works, anchors, catalog)               # GpuParams + CpuParams over all rows
    # estimate/bands.py: each source predicted by the others' fit, and the bands that error makes

Each row is one published figure (model, batch, precision, device, software, value, source URL, date).
GPU rows are predicted from the model's traced ops alone (``timemodel.gpu_time_ms``); CPU rows from
the traced ops anchored to this machine's own measurement of the model (``anchor_factor``). The fit
minimises squared log error, each source weighted equally (1/√rows), and is pulled gently towards the
priors in timemodel so a parameter no remaining source constrains stays sane. The error of the
leave-one-source-out predictions is what the projection's band is made of (``estimate/bands.py``), together with
the error of the fit on real GPU runs of ``rightsize bench`` (``device_runs.csv``: never fitted, only measured against).
"""

from __future__ import annotations

import csv
import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any

from rightsize.catalog.model import Catalog, CpuFamily
from rightsize.estimate.timemodel import (
    CpuParams,
    GpuParams,
    cpu_time_ms,
    gpu_time_ms,
    gpu_time_split_ms,
    regime_of,
    same_kernel_path,
    shared_socket,
)
from rightsize.profile import Measurement, WorkProfile

__all__ = [
    "Anchor",
    "Fit",
    "ReferenceRow",
    "anchor_factor",
    "anchors_from",
    "device_runs_path",
    "fit_params",
    "json_input",
    "load_reference",
    "needed_works",
    "parse_input",
    "predict_row",
    "probed_core_gflops",
    "reference_path",
    "row_regime",
    "work_key",
]

GPU_FIT = ("gemm_fp32", "gemm_tf32", "gemm_half", "conv_fp32", "conv_tf32", "conv_half", "attention",
           "eff_memory", "kernel_us", "host_us", "host_us_training", "host_conv", "peak_exponent")  # fmt: skip
# sync_exponent is held at its prior (1.0, the linear cost of libgomp's centralised barrier), not fitted: only one
# source (Packrat) runs more than 4 threads, so held out the fit pushed the exponent to its bound (1.5) and its
# 16-thread rows came out 1.4-2.4x slow; with it, 1.19. A parameter one source alone identifies is not fitted.
CPU_FIT = ("gemm", "conv", "low_precision", "core_bw_gbps", "op_us", "sync_us", "intensity_half",
           "wide_vector", "amx", "amx_repack")  # fmt: skip
BENCH_SOURCE_PREFIX = "rightsize-bench-"  # reference rows this project measured on lent machines (real runs)
PRIOR_WEIGHT = 0.25  # residual weight of log(θ/θ_prior): a soft pull, ~1/4 of one source's row
# Parameter bounds (efficiencies are shares of peak; times in microseconds).
_BOUNDS = {"peak_exponent": (0.01, 0.8), "kernel_us": (0.5, 30.0), "host_us": (2.0, 80.0),
           "host_us_training": (2.0, 120.0), "host_conv": (1.0, 8.0), "core_bw_gbps": (2.0, 60.0), "op_us": (0.5, 60.0),
           "sync_us": (0.1, 60.0), "intensity_half": (0.5, 200.0),
           "sync_exponent": (0.1, 1.5), "wide_vector": (0.05, 1.0), "amx_repack": (0.25, 8.0)}  # fmt: skip


def reference_path() -> Path:
    return Path(str(resources.files("rightsize.catalog") / "data" / "reference" / "published.csv"))


def checks_path() -> Path:
    """Published results kept OUT of the fit (same columns as published.csv): GPUs the product never plans
    (desktop GeForce cards, no cloud instance), read only by benchmarks/projection_vs_published.py as a check of
    how far the fitted model carries beyond the cards it was fitted on."""
    return reference_path().with_name("published_checks.csv")


def device_runs_path() -> Path:
    """Real GPU runs of ``rightsize bench`` on lent machines (same columns as published.csv; written from
    benchmarks/gpu/results by ``benchmarks/gpu_vs_device.py --write-reference``): never fitted, their error under the
    fit joins the published rows' held-out error in the GPU band (``bands.evaluate``)."""
    return reference_path().with_name("device_runs.csv")


def with_check_devices(catalog: Catalog) -> Catalog:
    """``catalog`` plus the cards only the checks run on (reference/check_accelerators.csv, each with its
    datasheet source), which the planner's catalog leaves out: no instance carries them."""
    from rightsize.catalog.load import read_accelerators

    extra = read_accelerators(reference_path().with_name("check_accelerators.csv"))
    return replace(catalog, accelerators={**catalog.accelerators, **extra})


@dataclass(frozen=True)
class ReferenceRow:
    id: str
    source: str
    model: str
    mode: str
    batch_size: int
    input: dict[str, int]
    precision: str
    device_class: str  # gpu | cpu
    device: str  # catalog accelerator or CPU family name
    gpus: int
    cores: int | None
    threads: int | None
    software: str
    metric: str  # throughput_per_s | latency_ms
    value: float
    source_url: str
    published: str
    notes: str = ""
    instances: int = 1  # CPU: processes running side by side on the socket, each on ``cores`` cores
    clock_ghz: float | None = None  # CPU: the named SKU's all-core clock when it differs from its family's
    run: bool = False  # a real run of ``rightsize bench`` (device_runs.csv), not a published figure

    @property
    def latency_ms(self) -> float:
        """Time of one batch on one device (one GPU, or one process on the stated cores), milliseconds."""
        if self.metric == "latency_ms":
            return self.value
        per_device = self.value / max(1, self.gpus if self.device_class == "gpu" else self.instances)
        return self.batch_size / per_device * 1e3

    @property
    def cpu_threads(self) -> int:
        return int(self.threads or self.cores or 1)

    @property
    def benched(self) -> bool:
        """A result of ``rightsize bench`` on a machine lent to this project (its source is named
        ``rightsize-bench-...`` and cites the committed measurements file), not a figure someone published."""
        return self.run or self.source.startswith(BENCH_SOURCE_PREFIX)


def _int(v: str | None) -> int | None:
    v = (v or "").strip()
    return int(float(v)) if v else None


def load_reference(path: str | Path | None = None, run: bool = False) -> list[ReferenceRow]:
    """Every row of the published-results CSV (see docs/reference-set.md for the columns); ``run``: the file holds
    real runs of ``rightsize bench`` (device_runs.csv)."""
    rows = []
    with open(path or reference_path(), encoding="utf-8", newline="") as f:
        for r in csv.DictReader(f):
            sizes = (("seq_len", _int(r.get("seq_len"))), ("image_size", _int(r.get("image_size"))))
            rows.append(
                ReferenceRow(
                    id=r["id"],
                    source=r["source"],
                    model=r["model"],
                    mode=r["mode"],
                    batch_size=int(float(r["batch_size"])),
                    input={k: v for k, v in sizes if v is not None},
                    precision=r["precision"],
                    device_class=r["device_class"],
                    device=r["device"],
                    gpus=_int(r.get("gpus")) or 1,
                    cores=_int(r.get("cores")),
                    threads=_int(r.get("threads")),
                    software=r.get("software", ""),
                    metric=r["metric"],
                    value=float(r["value"]),
                    source_url=r["source_url"],
                    published=r.get("published", ""),
                    notes=r.get("notes", ""),
                    instances=_int(r.get("instances")) or 1,
                    clock_ghz=float(r["clock_ghz"]) if (r.get("clock_ghz") or "").strip() else None,
                    run=run,
                )
            )
    return rows


def work_key(model: str, mode: str, inp: Mapping[str, int]) -> str:
    return f"{model}|{mode}|" + ",".join(f"{k}={v}" for k, v in sorted(inp.items()))


# ---------------------------------------------------------------------------------------------
# Anchoring the CPU model to this machine


# A 512³ single-thread SGEMM (measure/probe.py) reaches about this share of a core's fp32 FMA peak on a
# healthy machine (MKL / oneDNN on AVX2 and AVX-512 cores: 80-90%).
PROBE_EFFICIENCY = 0.85


@dataclass(frozen=True)
class Anchor:
    """Local CPU measurements of one model (any input) and the family of the machine that took them.

    ``core_gflops``: the single-thread GEMM rate probed on that machine while it measured
    (``extra.core_gemm_gflops``); the local family's clock is scaled to it, so a VM whose cores run
    below their datasheet (a busy host, a slower physical CPU) does not make every target look slow.
    """

    family: CpuFamily
    measurements: tuple[Measurement, ...]
    works: Mapping[str, WorkProfile] = field(default_factory=dict)  # work_key -> trace of each input
    core_gflops: float | None = None
    cores: int | None = None  # the measuring machine's physical cores: what a point of threads None ("all") ran on

    def threads_of(self, m: Measurement) -> int:
        """The threads point ``m`` ran on: its config's, else the count the sweep recorded (``extra.threads``),
        else the machine's cores (torch's default is one thread per physical core); 1 when nothing says."""
        return int(m.threads or m.extra.get("threads") or self.cores or 1)

    @property
    def effective_family(self) -> CpuFamily:
        """The local family at the probed speed (its datasheet when nothing was probed)."""
        peak = self.family.peak_flops_per_s("fp32", 1) / 1e9
        if not self.core_gflops or peak <= 0:
            return self.family
        scale = self.core_gflops / (peak * PROBE_EFFICIENCY)
        return replace(self.family, sustained_ghz=self.family.sustained_ghz * scale)

    @property
    def speed_note(self) -> str:
        if not self.core_gflops:
            return "local core speed from the datasheet (no probe recorded)"
        eff = self.effective_family
        return (
            f"local cores probed at {self.core_gflops:.0f} GFLOP/s ({eff.sustained_ghz / self.family.sustained_ghz:.0%}"
            " of the datasheet)"
        )


def probed_core_gflops(measurements: Sequence[Measurement]) -> float | None:
    """Median ``extra.core_gemm_gflops`` of the measurements that recorded it."""
    vals = [float(m.extra["core_gemm_gflops"]) for m in measurements if m.extra.get("core_gemm_gflops")]
    return statistics.median(vals) if vals else None


_FACTORS: dict[tuple[int, str, str, CpuParams, bool], tuple[Anchor, tuple[float, str, int, bool] | None]] = {}


def anchor_factor(
    anchor: Anchor, mode: str, precision: str, params: CpuParams, allow_contended: bool = False
) -> tuple[float, str, int, bool] | None:
    """(k, precision used, points, contended): measured / modelled time on this machine, geometric mean over the
    uncontended local points of ``precision`` (else fp32). The target is projected as k × model(target).

    ``allow_contended``: when no uncontended point exists, anchor on the contended ones (timed while the machine
    was busy, so k reads high: the projection errs slow); ``contended`` is then True and the caller says so.

    Kept per (anchor, mode, precision, params): a fit asks it again for every CPU row of the model at each step
    (two thirds of the refit's time), and the answer depends on nothing else."""
    key = (id(anchor), mode, precision, params, allow_contended)
    kept = _FACTORS.get(key)
    if kept is not None and kept[0] is anchor:
        return kept[1]
    if len(_FACTORS) >= 4096:
        _FACTORS.clear()
    found = _anchor_factor(anchor, mode, precision, params, allow_contended)
    _FACTORS[key] = (anchor, found)
    return found


def _anchor_factor(
    anchor: Anchor, mode: str, precision: str, params: CpuParams, allow_contended: bool
) -> tuple[float, str, int, bool] | None:
    passes = (False, True) if allow_contended else (False,)
    for contended in passes:
        for prec in (precision, "fp32"):
            ks = []
            for m in anchor.measurements:
                if m.status != "ok" or m.device != "cpu" or m.mode != mode or m.precision != prec or not m.latency_ms:
                    continue
                if bool(m.extra.get("contended")) != contended:
                    continue
                w = anchor.works.get(work_key(m.model, m.mode, m.input))
                if w is None:
                    continue
                static = m.extra.get("int8_scheme") == "static"
                t = cpu_time_ms(w, m.batch_size, anchor.effective_family, anchor.threads_of(m), prec, params, static)
                if 0 < t < math.inf:
                    ks.append(math.log(m.latency_ms.p50 / t))
            if ks:
                return math.exp(statistics.fmean(ks)), prec, len(ks), contended
    return None


def int8_convs(measurements: Iterable[Measurement]) -> bool:
    """True when this machine's int8 measurements of a model quantized its convolutions too (static
    quantization, ``measure.precision``): the int8 scheme a projection of that model assumes."""
    return any(m.precision == "int8" and m.extra.get("int8_scheme") == "static" for m in measurements)


def predict_row(
    row: ReferenceRow,
    works: Mapping[str, WorkProfile],
    anchors: Mapping[str, Anchor],
    catalog: Catalog,
    gpu: GpuParams,
    cpu: CpuParams,
) -> float | None:
    """Projected time of one batch for a reference row (ms), or None when it cannot be projected."""
    work = works.get(work_key(row.model, row.mode, row.input))
    if work is None:
        return None
    if row.device_class == "gpu":
        acc = catalog.accelerators.get(row.device)
        if acc is None:
            return None
        t = gpu_time_ms(work, row.batch_size, acc, row.precision, gpu)
        return t if t < math.inf else None
    fam = catalog.cpus.get(row.device)
    anchor = anchors.get(row.model)
    if fam is None or anchor is None:
        return None
    # The same rule as the planner's projection: a precision on another ISA path is anchored on fp32.
    convs = int8_convs(anchor.measurements)
    same = same_kernel_path(anchor.family, fam, row.precision, convs)
    k = anchor_factor(anchor, row.mode, row.precision if same else "fp32", cpu)
    if k is None:
        return None
    fam = shared_socket(fam, row.instances)  # processes side by side share the socket's memory bandwidth
    if row.clock_ghz:
        fam = replace(fam, sustained_ghz=row.clock_ghz)
    t = cpu_time_ms(work, row.batch_size, fam, row.cpu_threads, row.precision, cpu, convs)
    return k[0] * t if t < math.inf else None


# A CPU projection's regime: its precision anchored on a local measurement of itself (same ISA path here and there),
# or extrapolated from fp32 (AMX bf16 from a machine without AMX): each carries the band of its own held-out error.
ANCHORED, EXTRAPOLATED = "anchored", "extrapolated"


def cpu_regime(row: ReferenceRow, anchors: Mapping[str, Anchor], catalog: Catalog, cpu: CpuParams) -> str:
    """ANCHORED or EXTRAPOLATED for a CPU row (the rule ``predict_row`` and the planner anchor by); "" when it is
    not a CPU row or cannot be anchored."""
    fam, anchor = catalog.cpus.get(row.device), anchors.get(row.model)
    if row.device_class != "cpu" or fam is None or anchor is None:
        return ""
    same = same_kernel_path(anchor.family, fam, row.precision, int8_convs(anchor.measurements))
    found = anchor_factor(anchor, row.mode, row.precision if same else "fp32", cpu)
    if found is None:
        return ""
    return ANCHORED if found[1] == row.precision else EXTRAPOLATED


def row_regime(row: ReferenceRow, works: Mapping[str, WorkProfile], catalog: Catalog, gpu: GpuParams) -> str:
    """A GPU row's regime under ``gpu`` (``timemodel.regime_of``); "" for CPU rows or when it cannot be projected."""
    work = works.get(work_key(row.model, row.mode, row.input))
    acc = catalog.accelerators.get(row.device)
    if row.device_class != "gpu" or work is None or acc is None:
        return ""
    device, host, _ = gpu_time_split_ms(work, row.batch_size, acc, row.precision, gpu)
    return regime_of(device, host)


# ---------------------------------------------------------------------------------------------
# Fitting


@dataclass(frozen=True)
class Fit:
    gpu: GpuParams
    cpu: CpuParams
    rows: int
    sources: tuple[str, ...]


def _fit_class(rows: Sequence[ReferenceRow], predict: Any, prior: Any, names: tuple[str, ...]) -> Any:
    import numpy as np
    from scipy.optimize import least_squares

    if not rows:
        return prior
    per_source: dict[str, int] = {}
    for r in rows:
        per_source[r.source] = per_source.get(r.source, 0) + 1
    x0 = np.array([math.log(getattr(prior, n)) for n in names])
    lo = np.array([math.log(_BOUNDS.get(n, (0.02, 1.0))[0]) for n in names])
    hi = np.array([math.log(_BOUNDS.get(n, (0.02, 1.0))[1]) for n in names])
    x0 = np.clip(x0, lo + 1e-9, hi - 1e-9)

    def resid(x: Any) -> Any:
        p = prior.with_vector(names, [math.exp(v) for v in x])
        out = []
        for r in rows:
            t = predict(r, p)
            err = math.log(t / r.latency_ms) if t and 0 < t < math.inf else 3.0
            out.append(err / math.sqrt(per_source[r.source]))
        out += [PRIOR_WEIGHT * (v - v0) for v, v0 in zip(x, x0, strict=True)]
        return np.array(out)

    res = least_squares(resid, x0, bounds=(lo, hi), x_scale=1.0, max_nfev=400)
    return prior.with_vector(names, [math.exp(v) for v in res.x])


def fit_params(
    rows: Sequence[ReferenceRow],
    works: Mapping[str, WorkProfile],
    anchors: Mapping[str, Anchor],
    catalog: Catalog,
    *,
    exclude_source: str | None = None,
    gpu_prior: GpuParams | None = None,
    cpu_prior: CpuParams | None = None,
) -> Fit:
    """GPU and CPU parameters fitted to ``rows`` (minus ``exclude_source``) that can be projected."""
    gp, cp = gpu_prior or GpuParams(), cpu_prior or CpuParams()
    use = [r for r in rows if r.source != exclude_source and predict_row(r, works, anchors, catalog, gp, cp)]
    gpu_rows = [r for r in use if r.device_class == "gpu"]
    cpu_rows = [r for r in use if r.device_class == "cpu"]
    gpu = _fit_class(gpu_rows, lambda r, p: predict_row(r, works, anchors, catalog, p, cp), gp, GPU_FIT)
    cpu = _fit_class(cpu_rows, lambda r, p: predict_row(r, works, anchors, catalog, gpu, p), cp, CPU_FIT)
    return Fit(gpu, cpu, len(use), tuple(sorted({r.source for r in use})))


# ---------------------------------------------------------------------------------------------
# Putting it together (the fit script and the accuracy benchmark share this)


def anchors_from(
    measurements: Sequence[Measurement], family: CpuFamily, works: Mapping[str, WorkProfile]
) -> dict[str, Anchor]:
    """One Anchor per model from local CPU measurements taken on ``family``."""
    by_model: dict[str, list[Measurement]] = {}
    for m in measurements:
        if m.status == "ok" and m.device == "cpu" and not m.tiny:
            by_model.setdefault(m.model, []).append(m)
    return {k: Anchor(family, tuple(v), works, probed_core_gflops(v)) for k, v in by_model.items()}


def needed_works(rows: Sequence[ReferenceRow], measurements: Sequence[Measurement]) -> set[tuple[str, str, str]]:
    """(model, mode, input key) of every trace the rows and the anchors' measurements need."""
    keys = {(r.model, r.mode, json_input(r.input)) for r in rows}
    keys |= {(m.model, m.mode, json_input(m.input)) for m in measurements if m.status == "ok" and not m.tiny}
    return keys


def json_input(inp: Mapping[str, int]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(inp.items()))


def parse_input(text: str) -> dict[str, int]:
    return {k: int(v) for k, v in (p.split("=") for p in text.split(",") if p)}
