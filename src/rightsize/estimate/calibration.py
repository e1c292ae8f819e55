"""Device-class time models and their parameters, refitted from measured calibration files.

    t_gpu(b) = max(F(b) / (peak × eff_c(b)), B(b) / (bw × eff_mem)) + overhead        (roofline)
        eff_c(b) = eff_max[prec] × F(b) / (F(b) + peak × t_half)     (small batches leave the GPU idle)
    t_cpu(n) = T1 × ((1 − p) + p / n)                                (Amdahl over n physical cores)

Inputs: ``catalog/data/calibration/*.json``. A file with ``"kind": "prior"`` holds cited default
parameters for a device class; a file with ``"measurements"`` holds real Measurements and the
environment fingerprint that produced them. Fits are recomputed from those files on load, never typed in:
CPU — the Amdahl parallel fraction p per precision from pairs of thread counts of the same config;
GPU — eff_max per precision and the per-batch overhead by least squares on log time (only when CUDA
calibration exists; otherwise the prior with its wide band). Bands come from leave-one-model-out
residuals: ``band_lo``/``band_hi`` multiply a prediction to bound the truth.
"""

from __future__ import annotations

import functools
import json
import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any

from rightsize.profile import Measurement

__all__ = [
    "BYTES_PER_ELEMENT",
    "CalibrationSet",
    "CpuFit",
    "GpuFit",
    "ThreadPair",
    "amdahl_parallel_fraction",
    "batch_bytes",
    "batch_flops",
    "calibration_dir",
    "fit_cpu",
    "fit_gpu",
    "fits",
    "gpu_time_ms",
    "is_contended",
    "load_calibration",
    "n_params",
    "refit_gpu",
    "thread_pairs",
]

# Storage bytes per element; tf32 is stored as fp32 (math mode only).
BYTES_PER_ELEMENT = {"fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "int8": 1, "int4": 0.5}


@dataclass(frozen=True)
class CalibrationSet:
    """One calibration file: the fingerprint of the machine and what it measured there."""

    path: str
    env: dict[str, Any]
    measurements: tuple[Measurement, ...]
    meta: dict[str, Any] = field(default_factory=dict)  # date, script, load average while measuring


def calibration_dir() -> Path:
    return Path(str(resources.files("rightsize.catalog") / "data" / "calibration"))


def load_calibration(directory: Path | None = None) -> tuple[list[CalibrationSet], dict[str, dict[str, Any]]]:
    """(measurement sets, priors by device class) from every ``*.json`` in ``directory``."""
    sets: list[CalibrationSet] = []
    priors: dict[str, dict[str, Any]] = {}
    for path in sorted((directory or calibration_dir()).glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("kind") == "prior":
            priors[str(data["device_class"])] = data
        elif "measurements" in data:
            ms = tuple(Measurement.from_dict(d) for d in data["measurements"])
            meta = {k: v for k, v in data.items() if k not in ("env", "measurements")}
            sets.append(CalibrationSet(str(path), dict(data.get("env") or {}), ms, meta))
    return sets, priors


# ---------------------------------------------------------------------------------------------
# Work per batch (FLOPs and bytes moved), shared by the GPU and CPU models.


def n_params(ms: Iterable[Measurement]) -> float:
    """Parameter count from ``param_bytes`` (stored fp32 in the zoo: 4 B/param; largest seen wins)."""
    pb = [m.param_bytes for m in ms if m.param_bytes]
    return max(pb) / 4.0 if pb else 0.0


def batch_flops(flops_per_sample: float, batch: float) -> float:
    """FLOPs of one batch (training: forward + backward, as measured)."""
    return flops_per_sample * batch


def batch_bytes(
    flops_per_sample: float,
    params: float,
    batch: float,
    precision: str,
    mode: str,
    activation_width: float,
    activation_bytes_per_sample: float | None = None,
) -> float:
    """Bytes moved to and from device memory by one batch (a lower-bound traffic model).

    Weights: read once per forward (inference); training reads them in forward and backward, writes
    fp32 grads and runs AdamW (reads p, g, m, v and writes p, m, v in fp32: 28 B/param; REFERENCE.md §6).
    Activations: measured saved-activation bytes × 3 (write forward, read backward, write their grads)
    when known; otherwise FLOPs × bytes/element ÷ ``activation_width`` (see gpu_prior.json).
    """
    e = BYTES_PER_ELEMENT.get(precision, 4)
    if mode == "training":
        weights = params * (2 * e + 4 + 28)
        if activation_bytes_per_sample:
            acts = 3.0 * activation_bytes_per_sample * batch * e / 4.0
        else:
            # training FLOPs ≈ 3 × forward; activation traffic ≈ 3 × the forward estimate
            acts = flops_per_sample * batch * e / activation_width
    else:
        weights = params * e
        acts = flops_per_sample * batch * e / activation_width
    return weights + acts


# ---------------------------------------------------------------------------------------------
# GPU roofline


@dataclass(frozen=True)
class GpuFit:
    eff_compute_max: dict[str, float]
    t_half_ms: float
    eff_memory: float
    overhead_ms: dict[str, float]  # per mode: inference | training
    overhead_min_ms: float
    activation_width: float  # default; see width_for
    band_lo: float
    band_hi: float
    cv: float
    calibrated: bool  # False: the cited prior, no GPU measurement behind it
    source: str
    n_points: int = 0
    per_model: bool = False  # refitted to the projected model's own CUDA measurements
    activation_width_by_input: dict[str, float] = field(default_factory=dict)  # input key -> width

    def width_for(self, inp: dict[str, int]) -> float:
        """Effective width for a workload's input (token models move fewer bytes per FLOP than CNNs)."""
        return next((w for k, w in self.activation_width_by_input.items() if k in inp), self.activation_width)


def gpu_time_ms(
    flops: float,
    bytes_moved: float,
    peak_flops_per_s: float,
    bandwidth_gbps: float,
    eff_max: float,
    t_half_ms: float,
    eff_memory: float,
    overhead_ms: float,
) -> float:
    """Roofline time of one batch on one GPU, milliseconds (see module docstring)."""
    f_half = peak_flops_per_s * t_half_ms / 1e3
    eff_c = eff_max * flops / (flops + f_half) if flops > 0 else eff_max
    t_compute = flops / (peak_flops_per_s * eff_c) if flops > 0 else 0.0
    t_memory = bytes_moved / (bandwidth_gbps * 1e9 * eff_memory)
    return max(t_compute, t_memory) * 1e3 + overhead_ms


def gpu_prior_fit(prior: dict[str, Any]) -> GpuFit:
    lo, hi = prior["band"]
    return GpuFit(
        eff_compute_max={k: float(v) for k, v in prior["eff_compute_max"].items()},
        t_half_ms=float(prior["t_half_ms"]),
        eff_memory=float(prior["eff_memory"]),
        overhead_ms={k: float(v) for k, v in prior["overhead_ms"].items()},
        overhead_min_ms=float(prior["overhead_min_ms"]),
        activation_width=float(prior["activation_width"]),
        activation_width_by_input={k: float(v) for k, v in prior.get("activation_width_by_input", {}).items()},
        band_lo=float(lo),
        band_hi=float(hi),
        cv=float(prior["cv"]),
        calibrated=False,
        source="GPU prior (no GPU calibration data; calibration/gpu_prior.json)",
    )


@dataclass(frozen=True)
class GpuPoint:
    """One CUDA calibration measurement reduced to what the roofline needs."""

    model: str
    mode: str
    precision: str
    flops: float
    bytes_moved: float
    peak_flops_per_s: float
    bandwidth_gbps: float
    latency_ms: float
    batch_size: int = 0
    device_name: str = ""  # catalog accelerator


def _gpu_predict(fit: GpuFit, p: GpuPoint) -> float:
    eff = fit.eff_compute_max.get(p.precision, 0.4)
    over = fit.overhead_ms.get(p.mode, 0.0)
    return gpu_time_ms(
        p.flops, p.bytes_moved, p.peak_flops_per_s, p.bandwidth_gbps, eff, fit.t_half_ms, fit.eff_memory, over
    )


def refit_gpu(points: Sequence[GpuPoint], base: GpuFit) -> GpuFit:
    """Least squares on log time over eff_max per precision and overhead per mode."""
    import numpy as np
    from scipy.optimize import least_squares

    precs = sorted({p.precision for p in points})
    modes = sorted({p.mode for p in points})
    x0 = [math.log(base.eff_compute_max.get(k, 0.4)) for k in precs]
    x0 += [math.log(max(base.overhead_ms.get(k, 1.0), base.overhead_min_ms)) for k in modes]

    def unpack(x: Any) -> GpuFit:
        eff = dict(base.eff_compute_max)
        eff.update({k: float(min(math.exp(v), 1.0)) for k, v in zip(precs, x[: len(precs)], strict=True)})
        over = dict(base.overhead_ms)
        over.update({k: float(math.exp(v)) for k, v in zip(modes, x[len(precs) :], strict=True)})
        return replace(base, eff_compute_max=eff, overhead_ms=over)

    def resid(x: Any) -> Any:
        f = unpack(x)
        return np.array([math.log(_gpu_predict(f, p) / p.latency_ms) for p in points])

    res = least_squares(resid, np.array(x0), bounds=(math.log(1e-4), math.log(1e4)))
    return unpack(res.x)


def fit_gpu(points: Sequence[GpuPoint], prior: dict[str, Any]) -> GpuFit:
    """Fit the roofline to CUDA calibration points; the band from leave-one-model-out residuals."""
    base = gpu_prior_fit(prior)
    models = sorted({p.model for p in points})
    if len(models) < 2:
        return base
    fitted = refit_gpu(points, base)
    residuals = []  # log(pred / measured) for each held-out model
    for held in models:
        f = refit_gpu([p for p in points if p.model != held], base)
        residuals += [math.log(_gpu_predict(f, p) / p.latency_ms) for p in points if p.model == held]
    lo, hi = _band_from_residuals(residuals)
    return replace(
        fitted,
        band_lo=lo,
        band_hi=hi,
        calibrated=True,
        n_points=len(points),
        source=f"GPU roofline fitted to {len(points)} CUDA calibration points over {len(models)} models",
    )


def _band_from_residuals(residuals: Sequence[float], floor: float = 0.05) -> tuple[float, float]:
    """Multipliers (lo ≤ 1 ≤ hi) on a prediction that cover every held-out truth, plus ``floor``."""
    if not residuals:
        return 1.0 - floor, 1.0 + floor
    # truth = pred × exp(−r): the smallest truth/pred is exp(−max r), the largest exp(−min r).
    lo = math.exp(-max(max(residuals), 0.0)) * (1.0 - floor)
    hi = math.exp(-min(min(residuals), 0.0)) * (1.0 + floor)
    return lo, hi


# ---------------------------------------------------------------------------------------------
# CPU thread scaling


@dataclass(frozen=True)
class ThreadPair:
    """The same config measured at two thread counts n1 < n2 (median latency, ms)."""

    model: str
    precision: str
    batch_size: int
    n1: int
    n2: int
    t1_ms: float
    t2_ms: float


def amdahl_parallel_fraction(n1: int, t1: float, n2: int, t2: float) -> float:
    """p in t(n) = T1((1 − p) + p/n) from two thread counts, clamped to [0, 0.999].

    t1/t2 = r = ((1−p) + p/n1) / ((1−p) + p/n2)  ⇒  p = (r − 1) / (r − 1 + 1/n1 − r/n2).
    """
    r = t1 / t2
    den = r - 1.0 + 1.0 / n1 - r / n2
    p = (r - 1.0) / den if den != 0 else 0.0
    return min(max(p, 0.0), 0.999)


def amdahl_scale(p: float, n_from: float, n_to: float) -> float:
    """t(n_to) / t(n_from) under Amdahl's law with parallel fraction p."""
    return ((1.0 - p) + p / n_to) / ((1.0 - p) + p / n_from)


def thread_pairs(ms: Iterable[Measurement]) -> list[ThreadPair]:
    """Pairs (lowest, highest thread count) of otherwise identical ok CPU measurements."""
    groups: dict[tuple[Any, ...], list[Measurement]] = {}
    for m in ms:
        if m.status != "ok" or m.device != "cpu" or not m.threads or m.latency_ms is None:
            continue
        key = (m.env_id, m.model, m.mode, m.precision, m.batch_size, tuple(sorted(m.input.items())), m.tiny)
        groups.setdefault(key, []).append(m)
    pairs = []
    for g in groups.values():
        g.sort(key=lambda m: m.threads or 0)
        a, b = g[0], g[-1]
        if a.threads and b.threads and b.threads > a.threads and a.latency_ms and b.latency_ms:
            pairs.append(
                ThreadPair(a.model, a.precision, a.batch_size, a.threads, b.threads, a.latency_ms.p50, b.latency_ms.p50)
            )
    return pairs


def is_contended(q: ThreadPair, slowdown: float = 1.1) -> bool:
    """More threads ran slower by more than ``slowdown``: other processes held the cores."""
    return q.t2_ms > q.t1_ms * slowdown


@dataclass(frozen=True)
class CpuFit:
    parallel_fraction: dict[str, float]  # per precision; "*" pools all precisions
    log_band_lo_per_doubling: float  # ≥ 0: truth may be exp(−x × doublings) × prediction
    log_band_hi_per_doubling: float
    efficiency_per_doubling: float
    isa_gain_exponent: float
    eff_memory: float
    cv: float
    calibrated: bool
    source: str
    n_pairs: int = 0
    residuals: tuple[float, ...] = field(default=())  # LOO log(pred/measured) per doubling

    def p(self, precision: str) -> float:
        return self.parallel_fraction.get(precision, self.parallel_fraction["*"])


def fit_cpu(pairs: Sequence[ThreadPair], prior: dict[str, Any]) -> CpuFit:
    """Amdahl p per precision (median over pairs) and the leave-one-model-out band per core doubling."""
    floor = float(prior["band_per_doubling"])
    prior_fit = CpuFit(
        {"*": float(prior["parallel_fraction"])},
        floor * 2,
        floor * 2,
        efficiency_per_doubling=float(prior["efficiency_per_doubling"]),
        isa_gain_exponent=float(prior["isa_gain_exponent"]),
        eff_memory=float(prior["eff_memory"]),
        cv=float(prior["cv"]),
        calibrated=False,
        source="CPU prior (no thread-pair calibration; calibration/cpu_prior.json)",
    )
    slow = float(prior.get("contention_slowdown", 1.1))
    contended = [q for q in pairs if is_contended(q, slow)]
    pairs = [q for q in pairs if not is_contended(q, slow)]
    ps = _pooled_p(pairs)
    if not ps:
        return prior_fit
    residuals = []
    for held in sorted({q.model for q in pairs}):
        others = _pooled_p([q for q in pairs if q.model != held])
        if not others:
            continue
        for q in pairs:
            if q.model == held:
                pred = q.t1_ms * amdahl_scale(others.get(q.precision, others["*"]), q.n1, q.n2)
                residuals.append(math.log(pred / q.t2_ms) / math.log2(q.n2 / q.n1))
    lo = max(max(residuals, default=0.0), 0.0) + floor  # truth below prediction
    hi = max(-min(residuals, default=0.0), 0.0) + floor  # truth above prediction
    models = len({q.model for q in pairs})
    return replace(
        prior_fit,
        parallel_fraction=ps,
        log_band_lo_per_doubling=lo,
        log_band_hi_per_doubling=hi,
        calibrated=True,
        source=f"CPU thread scaling fitted to {len(pairs)} thread pairs over {models} models"
        + (f" ({len(contended)} contended pairs left out)" if contended else ""),
        n_pairs=len(pairs),
        residuals=tuple(residuals),
    )


def _pooled_p(pairs: Sequence[ThreadPair]) -> dict[str, float]:
    by_prec: dict[str, list[float]] = {}
    for q in pairs:
        p = amdahl_parallel_fraction(q.n1, q.t1_ms, q.n2, q.t2_ms)
        by_prec.setdefault(q.precision, []).append(p)
        by_prec.setdefault("*", []).append(p)
    return {k: statistics.median(v) for k, v in by_prec.items()}


# ---------------------------------------------------------------------------------------------
# Everything, cached per process


@dataclass(frozen=True)
class Fits:
    cpu: CpuFit
    gpu: GpuFit
    priors: dict[str, dict[str, Any]]
    sets: tuple[CalibrationSet, ...]


def build_fits(
    sets: Sequence[CalibrationSet],
    priors: dict[str, dict[str, Any]],
    gpu_points: Sequence[GpuPoint] = (),
    exclude_model: str | None = None,
) -> Fits:
    """Fits from calibration sets (``exclude_model`` leaves one model out, for accuracy checks)."""
    ms = [m for s in sets for m in s.measurements if m.model != exclude_model]
    cpu = fit_cpu(thread_pairs(ms), priors["cpu"])
    gpu = fit_gpu([p for p in gpu_points if p.model != exclude_model], priors["gpu"])
    return Fits(cpu, gpu, priors, tuple(sets))


@functools.lru_cache(maxsize=4)
def fits(directory: str | None = None) -> Fits:
    """Fits from the shipped calibration files (or ``directory``); GPU points need the catalog."""
    from rightsize.estimate.projection import gpu_points_from_sets  # the catalog maps GPU names

    sets, priors = load_calibration(Path(directory) if directory else None)
    return build_fits(sets, priors, gpu_points_from_sets(sets, priors["gpu"]))
