"""Project a measured Profile onto every catalog device: t(batch) ± band per (device, precision[, layout]).

    model = load_projection_model()                                   # fitted to published results
    curves = project_curves(profile, catalog, model, work)            # list[ServiceCurve]

``work`` is the model's traced ops (``estimate.work.trace_work``); ``model`` holds the time models'
parameters fitted to the published reference set and the bands measured leave-one-source-out
(``scripts/fit_projection.py`` writes ``calibration/projection_fit.json``).

GPU (one curve per catalog accelerator and precision, per GPU): ``timemodel.gpu_time_ms``, the larger
of the device time (per-op roofline + a kernel floor) and the host's eager dispatch time, so batch 1
is as slow as framework overhead makes it. When this model was measured on some catalog GPU, every
GPU curve is scaled by measured / modelled there.

CPU (one curve per CPU instance type, precision and layout k workers × t threads, k·t = physical
cores): ``timemodel.cpu_time_ms`` for the target's cores, ISA and bandwidth, times k = measured /
modelled on this machine (the anchor). A precision whose ISA path this machine lacks (AMX bf16, VNNI
int8) is anchored on fp32 and labelled extrapolated, with a wider band.

A measured profile for the very device (``measured``, or ``profile`` itself) always wins with
provenance "measured" and band 1.0.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from rightsize.catalog import Accelerator, Catalog, CpuFamily, Instance, filter_instances, match_cpu_family
from rightsize.catalog.query import match_accelerator
from rightsize.estimate.bands import Band, band_for, band_key
from rightsize.estimate.reference import (
    ANCHORED,
    EXTRAPOLATED,
    Anchor,
    anchor_factor,
    int8_convs,
    probed_core_gflops,
    work_key,
)
from rightsize.estimate.timemodel import (
    CpuParams,
    GpuParams,
    cpu_kernel_path,
    cpu_time_ms,
    gpu_time_ms,
    gpu_time_split_ms,
    regime_of,
    same_kernel_path,
    shared_socket,
)
from rightsize.profile import Environment, Profile, ServiceCurve, WorkProfile, measured_curve

__all__ = [
    "CPU_BATCHES",
    "GPU_BATCHES",
    "ProjectionModel",
    "cpu_layouts",
    "fallback_work",
    "load_projection_model",
    "project_curves",
]

GPU_BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
CPU_BATCHES = (1, 2, 4, 8, 16, 32)
DEFAULT_GPU_PRECISIONS = ("fp32", "tf32", "fp16", "bf16")
CPU_PRECISIONS = ("fp32", "bf16", "int8")
# Extrapolating to an ISA path this machine lacks (AMX, VNNI) carries the band of the reference rows extrapolated so
# (bands "cpu:extrapolated"); a fit file without that band widens the class band by this instead.
ISA_EXTRAPOLATION_WIDENING = 1.5
FIT_FILE = "projection_fit.json"


@dataclass(frozen=True)
class ProjectionModel:
    """Fitted time-model parameters and the bands their held-out error implies."""

    gpu: GpuParams
    cpu: CpuParams
    bands: dict[str, Band]  # "gpu", "cpu"
    source: str
    extra: dict[str, Any] = field(default_factory=dict)

    def band(self, device_class: str, regime: str = "") -> Band:
        """The band of a projection in ``regime`` (GPU: timemodel.regime_of) of ``device_class``: the regime's own,
        else the class's, else a wide prior."""
        found = band_for(self.bands, device_class, regime)
        return found or Band(0.5, 2.0, 0.0, 0, 0.0, "no reference error measured: prior")

    def to_dict(self) -> dict[str, Any]:
        return {
            "gpu": self.gpu.to_dict(),
            "cpu": self.cpu.to_dict(),
            "bands": {k: b.to_dict() for k, b in self.bands.items()},
            "source": self.source,
            **self.extra,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ProjectionModel:
        bands = {k: Band(**v) for k, v in d.get("bands", {}).items()}
        extra = {k: v for k, v in d.items() if k not in ("gpu", "cpu", "bands", "source")}
        return cls(GpuParams(**d["gpu"]), CpuParams(**d["cpu"]), bands, str(d.get("source", "")), extra)


def load_projection_model(directory: str | Path | None = None) -> ProjectionModel:
    """The fitted model shipped in ``catalog/data/calibration/projection_fit.json`` (or ``directory``);
    the priors of ``timemodel`` with a wide band when no fit exists."""
    from rightsize.estimate.calibration import calibration_dir

    path = Path(directory or calibration_dir()) / FIT_FILE
    if not path.exists():
        return ProjectionModel(GpuParams(), CpuParams(), {}, "timemodel priors (no fitted projection file)")
    return ProjectionModel.from_dict(json.loads(path.read_text(encoding="utf-8")))


def cpu_layouts(cores: int, socket_cores: int | None = None) -> list[tuple[int, int]]:
    """(workers, threads per worker) with workers × threads = cores: 1, 2, 4, 8, 16 threads and all cores.

    With ``socket_cores`` (the family's cores per socket) no worker spans two sockets: on a 2-socket host one
    process on every core runs BERT-base 2.3-2.9x slower at 384-512 tokens than two one-socket processes
    each doing half the work (docs/projection.md, the Cascade Lake rows), a cost the one-socket CPU model
    does not have. A worker per socket replaces the all-core layout there."""
    per_socket = cores
    if socket_cores and cores > socket_cores:
        sockets = math.ceil(cores / socket_cores)
        per_socket = cores // sockets if cores % sockets == 0 else socket_cores
    ts = sorted({t for t in (1, 2, 4, 8, 16) if t <= per_socket} | {per_socket})
    return [(cores // t, t) for t in ts if cores % t == 0]


def fallback_work(profile: Profile) -> WorkProfile | None:
    """A coarse WorkProfile from the measurements alone (FLOPs, parameters) when no trace exists: one GEMM
    carrying every FLOP and the weights, plus 100 element-wise ops over the activations (labelled so)."""
    ok = profile.ok()
    f = max((m.flops_per_sample or 0.0 for m in ok), default=0.0)
    pb = max((float(m.param_bytes or 0) for m in ok), default=0.0)
    if f <= 0:
        return None
    acts = f / 256.0 * 4.0  # ~1 fp32 element moved per 256 FLOPs (mixed CNN / transformer estimate)
    ops = (("gemm", 1, f, 2 * f, pb + acts, pb + 2 * acts), ("memory", 100, 0.0, 0.0, acts / 100, 2 * acts / 100))
    return WorkProfile(profile.model, profile.mode, dict(profile.input), False, ops, int(pb / 4), 1)


def project_curves(
    profile: Profile,
    catalog: Catalog,
    model: ProjectionModel,
    work: WorkProfile | None = None,
    *,
    precisions: Sequence[str] | None = None,
    measured: Sequence[Profile] = (),
) -> list[ServiceCurve]:
    """ServiceCurves for every catalog GPU accelerator and CPU instance type (see module docstring).

    The caller loads ``catalog`` and ``model`` (``load_projection_model``) and passes them: nothing here
    reads a file, so a user's catalog or fit reaches every curve."""
    work = work or fallback_work(profile)
    same = [p for p in (profile, *measured) if _same_workload(p, profile)]
    curves: list[ServiceCurve] = []
    gpu_precs = tuple(precisions) if precisions else DEFAULT_GPU_PRECISIONS
    gpu_k = _gpu_anchor(same, catalog, model.gpu, work) if work else None
    for acc in catalog.accelerators.values():
        for prec in gpu_precs:
            curve = _measured_gpu(acc, prec, same, catalog)
            if curve is None and work is not None:
                curve = _project_gpu(work, acc, prec, model, gpu_k, profile)
            if curve is not None:
                curves.append(curve)
    cpu_precs = tuple(precisions) if precisions else CPU_PRECISIONS
    local = match_cpu_family(catalog.cpus, profile.env)
    for inst in filter_instances(catalog.instances, device_class="cpu"):
        for prec in cpu_precs:
            if profile.mode == "training" and prec == "int8":
                continue
            m = _measured_cpu(inst, prec, same, catalog)
            if m is not None:
                curves.append(m)
                continue
            if work is not None and local is not None:
                curves += _project_cpu(profile, work, local, inst, catalog.cpus[inst.cpu_family], prec, model)
    return curves


def _same_workload(p: Profile, ref: Profile) -> bool:
    return p.model == ref.model and p.mode == ref.mode and p.input == ref.input


# ---------------------------------------------------------------------------------------------
# Measured curves


def _gpu_names(env: Environment) -> list[tuple[str, float | None]]:
    return [(g.name, g.memory_bytes or None) for g in env.gpus]


def _measured_gpu(acc: Accelerator, prec: str, profiles: list[Profile], catalog: Catalog) -> ServiceCurve | None:
    for p in profiles:
        if any(match_accelerator(n, catalog.accelerators, mem) is acc for n, mem in _gpu_names(p.env)):
            curve = measured_curve(p, prec, "cuda", name=acc.name)
            if curve is not None:
                return curve
    return None


def _measured_cpu(inst: Instance, prec: str, profiles: list[Profile], catalog: Catalog) -> ServiceCurve | None:
    for p in profiles:
        fam = match_cpu_family(catalog.cpus, p.env)
        same_type = p.env.instance_type == inst.instance_type
        same_cpu = fam is not None and fam.name == inst.cpu_family and p.env.physical_cores == inst.cores
        if same_type or same_cpu:
            curve = measured_curve(p, prec, "cpu", name=f"cpu:{inst.instance_type}")
            if curve is not None:
                return replace(curve, instance=inst.instance_type, threads=curve.threads or inst.cores)
    return None


# ---------------------------------------------------------------------------------------------
# GPU projection


def _gpu_anchor(profiles: list[Profile], catalog: Catalog, params: GpuParams, work: WorkProfile) -> float | None:
    """measured / modelled over this model's CUDA measurements on catalog GPUs (geometric mean)."""
    logs = []
    for p in profiles:
        for name, mem in _gpu_names(p.env)[:1]:
            acc = match_accelerator(name, catalog.accelerators, mem)
            if acc is None:
                continue
            for m in p.ok("cuda"):
                t = gpu_time_ms(work, m.batch_size, acc, m.precision, params)
                if m.latency_ms and 0 < t < math.inf:
                    logs.append(math.log(m.latency_ms.p50 / t))
    return math.exp(statistics.fmean(logs)) if logs else None


def _project_gpu(
    work: WorkProfile, acc: Accelerator, prec: str, model: ProjectionModel, k: float | None, profile: Profile
) -> ServiceCurve | None:
    if acc.peak_flops_per_s(prec) <= 0:
        return None  # no native support for this precision
    if prec == "tf32" and acc.peak_flops_per_s("tf32") <= acc.peak_flops_per_s("fp32"):
        return None  # no TF32 tensor cores (pre-Ampere): tf32 runs as fp32, whose curve already exists
    local = {m.batch_size for m in profile.ok()}
    batches = sorted(set(GPU_BATCHES) | local)
    parts = [gpu_time_split_ms(work, b, acc, prec, model.gpu) for b in batches]  # (device, host, math)
    ts = [max(dev, host) * (k or 1.0) for dev, host, _ in parts]
    bands = [model.band("gpu", regime_of(dev, host)) for dev, host, _ in parts]  # each batch its regime's band
    how = f"anchored to this model's CUDA measurements (x{k:.2f})" if k else "from the traced ops"
    why = "; ".join(dict.fromkeys(b.source for b in bands))
    return ServiceCurve(
        device=acc.name,
        precision=prec,
        batch_sizes=tuple(batches),
        latency_ms=tuple(ts),
        cv=tuple(0.03 for _ in batches),
        provenance="projected",
        band_lo=min(b.lo for b in bands),
        band_hi=max(b.hi for b in bands),
        band_los=tuple(b.lo for b in bands),
        band_his=tuple(b.hi for b in bands),
        source=f"GPU time model {how}; {model.source}; band: {why}; {acc.name}: {acc.source}",
        device_share=tuple(round(dev / max(dev, host), 4) for dev, host, _ in parts),
        compute_share=tuple(round(comp / dev if 0 < dev < math.inf else 0.0, 4) for dev, _, comp in parts),
    )


# ---------------------------------------------------------------------------------------------
# CPU projection


def _project_cpu(
    profile: Profile,
    work: WorkProfile,
    local: CpuFamily,
    inst: Instance,
    target: CpuFamily,
    prec: str,
    model: ProjectionModel,
) -> list[ServiceCurve]:
    cpu = tuple(profile.ok("cpu"))
    works = {work_key(profile.model, profile.mode, profile.input): work}
    anchor = Anchor(local, cpu, works, probed_core_gflops(cpu), profile.env.physical_cores)
    convs = int8_convs(cpu)
    same_path = same_kernel_path(local, target, prec, convs)
    found = anchor_factor(anchor, profile.mode, prec if same_path else "fp32", model.cpu, allow_contended=True)
    if found is None:
        return []
    k, anchored_on, n_points, contended = found
    extrapolated = anchored_on != prec
    band = model.band("cpu", ANCHORED)
    lo, hi = band.lo, band.hi
    if extrapolated and band_key("cpu", EXTRAPOLATED) in model.bands:
        # the extrapolated rows' own error, never narrower than an anchored curve's: extrapolating adds no certainty
        wide = model.bands[band_key("cpu", EXTRAPOLATED)]
        lo, hi = min(lo, wide.lo), max(hi, wide.hi)
    elif extrapolated:  # a fit file without that band
        lo, hi = lo / ISA_EXTRAPOLATION_WIDENING, hi * ISA_EXTRAPOLATION_WIDENING
    caveats = []
    if contended:
        caveats.append("anchored on measurements timed while this machine was busy (every local point contended: "
                       "the projection reads slow; `rightsize bench --fresh` on a quiet machine)")  # fmt: skip
    if extrapolated:
        path = cpu_kernel_path(target, prec, convs)
        caveats.append(f"{prec} extrapolated from fp32 ({target.name} {path}; not measured here; band x{lo:.2f}-"
                       f"x{hi:.2f})")  # fmt: skip
    note = "".join(f"{c}; " for c in caveats)  # both: a contended extrapolation had lost its contended words
    if prec == "int8":
        note += "int8 = static quantization (convolutions too); " if convs else "int8 = dynamic quantization; "
    local_b = {m.batch_size for m in profile.ok("cpu", anchored_on)}
    batches = sorted(set(CPU_BATCHES) | local_b)
    out = []
    # Training runs one process on every core; serving and batch inference try every layout.
    layouts = [(1, inst.cores)] if profile.mode == "training" else cpu_layouts(inst.cores, target.cores_per_socket)
    for workers, threads in layouts:
        shared = shared_socket(target, _workers_per_socket(inst, target, workers))
        same = _same_cpu_curve(profile, work, local, inst, shared, prec, workers, threads, model.cpu, convs)
        if same is not None:
            out.append(same)
            continue
        ts = [k * cpu_time_ms(work, b, shared, threads, prec, model.cpu, convs) for b in batches]
        out.append(
            ServiceCurve(
                device=f"cpu:{inst.instance_type}",
                precision=prec,
                batch_sizes=tuple(batches),
                latency_ms=tuple(ts),
                cv=tuple(0.05 for _ in batches),
                provenance="projected",
                band_lo=lo,
                band_hi=hi,
                source=(
                    f"{note}CPU time model anchored to {n_points} {anchored_on} measurement(s) on {local.name} "
                    f"(x{k:.2f}; {anchor.speed_note}); {workers} worker(s) x {threads} thread(s) on {target.name}; "
                    f"{model.source}; "
                    f"band: {band.source}"
                ),
                instance=inst.instance_type,
                threads=threads,
                workers=workers,
                extrapolated=extrapolated,
                caveats=tuple(caveats),
            )
        )
    return out


def _workers_per_socket(inst: Instance, family: CpuFamily, workers: int) -> int:
    """Workers of a k-worker layout on each socket of ``inst`` (one socket unless its cores span more)."""
    sockets = math.ceil(inst.cores / family.cores_per_socket) if family.cores_per_socket else 1
    return math.ceil(workers / max(1, sockets))


def _same_cpu_curve(
    profile: Profile,
    work: WorkProfile,
    local: CpuFamily,
    inst: Instance,
    shared: CpuFamily,
    prec: str,
    workers: int,
    threads: int,
    params: CpuParams,
    convs: bool,
) -> ServiceCurve | None:
    """``workers`` x ``threads`` on an instance of this machine's own CPU family, ``threads`` a thread count measured
    here without contention: each worker runs what was measured, so its t(batch) is the measurement, with no band (as
    the measured instance's own), times what sharing the socket's memory bandwidth with the other workers costs
    (``cpu_time_ms`` on ``shared`` over on the family alone; 1.0 while the workers' cores do not saturate it).
    None for any other layout: the CPU model projects it, with its band."""
    cores = profile.env.physical_cores
    if local.name != inst.cpu_family or not cores:
        return None
    mine = tuple(m for m in profile.ok("cpu", prec) if (m.threads or cores) == threads)  # None: all cores
    if not mine or any(m.extra.get("contended") for m in mine):
        return None
    curve = measured_curve(replace(profile, measurements=mine), prec, "cpu")
    if curve is None:
        return None
    # the bandwidth share only, on this machine's kernel paths: local is the family as run here (a VM hiding AVX-512
    # runs int8 on AVX2), and the target's own VNNI rate would have sped the measured times up with no band
    shared = replace(local, memory_bandwidth_gbps=shared.memory_bandwidth_gbps)
    share = [cpu_time_ms(work, b, shared, threads, prec, params, convs)
             / cpu_time_ms(work, b, local, threads, prec, params, convs) for b in curve.batch_sizes]  # fmt: skip
    return replace(
        curve,
        device=f"cpu:{inst.instance_type}",
        latency_ms=tuple(t * f for t, f in zip(curve.latency_ms, share, strict=True)),
        provenance="projected",
        band_lo=1.0,
        band_hi=1.0,
        source=(
            f"each of {workers} worker(s) x {threads} thread(s) runs as measured here on the same CPU "
            f"({local.name}, {profile.env.id}); the workers share the socket's memory bandwidth "
            f"(x{max(share):.2f} at most); no band, as the measured instance's own"
        ),
        instance=inst.instance_type,
        threads=threads,
        workers=workers,
        memory_bytes=curve.memory_bytes,
    )
