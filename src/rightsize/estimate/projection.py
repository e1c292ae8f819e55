"""Project a measured Profile onto every catalog device: t(batch) ± band per (device, precision).

    curves = project_curves(profile, load_catalog())            # list[ServiceCurve]

GPU (one curve per catalog accelerator and precision, per single GPU): the roofline of
``calibration.gpu_time_ms`` on the profile's FLOPs and bytes per batch. CPU (one curve per CPU
instance type and precision): the local CPU measurement split by Amdahl's law into a serial part
(scaled by clock) and a parallel part (scaled by cores, ISA FLOP/cycle and clock), with a floor of
streaming the weights at the instance's share of DRAM bandwidth. A measured profile for the very
device (``measured``, or ``profile`` itself) always wins with provenance "measured" and band 1.0.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from rightsize.catalog import Accelerator, Catalog, CpuFamily, Instance, filter_instances, match_cpu_family
from rightsize.estimate.calibration import (
    CalibrationSet,
    CpuFit,
    Fits,
    GpuFit,
    GpuPoint,
    amdahl_parallel_fraction,
    amdahl_scale,
    batch_bytes,
    batch_flops,
    fits,
    gpu_prior_fit,
    gpu_time_ms,
    is_contended,
    n_params,
    refit_gpu,
    thread_pairs,
)
from rightsize.profile import Measurement, Profile, ServiceCurve

__all__ = ["GPU_BATCHES", "gpu_points_from_sets", "match_accelerator", "project_curves"]

GPU_BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256)  # batch sizes of projected GPU curves (FLOPs are linear in b)
DEFAULT_GPU_PRECISIONS = ("fp32", "tf32", "fp16", "bf16")
CPU_PRECISIONS = ("fp32", "bf16", "int8")


def project_curves(
    profile: Profile,
    catalog: Catalog,
    *,
    precisions: Sequence[str] | None = None,
    measured: Sequence[Profile] = (),
    calibration: Fits | None = None,
) -> list[ServiceCurve]:
    """ServiceCurves for every catalog GPU accelerator and CPU instance type (see module docstring)."""
    fit = calibration or fits()
    same = [p for p in (profile, *measured) if _same_workload(p, profile)]
    local = _Local.of(profile, catalog, fit.cpu)
    gpu_fit = _model_gpu_fit(same, catalog, fit.gpu)
    curves: list[ServiceCurve] = []
    gpu_precs = tuple(precisions) if precisions else DEFAULT_GPU_PRECISIONS
    for acc in catalog.accelerators.values():
        for prec in gpu_precs:
            curve = _measured_gpu(acc, prec, same, catalog) or _project_gpu(local, acc, prec, gpu_fit)
            if curve is not None:
                curves.append(curve)
    cpu_precs = tuple(precisions) if precisions else tuple(p for p in CPU_PRECISIONS if profile.ok("cpu", p))
    for inst in filter_instances(catalog.instances, device_class="cpu"):
        for prec in cpu_precs:
            curve = _measured_cpu(inst, prec, same, catalog) or _project_cpu(local, inst, catalog, prec, fit.cpu)
            if curve is not None:
                curves.append(curve)
    return curves


def _same_workload(p: Profile, ref: Profile) -> bool:
    return p.model == ref.model and p.mode == ref.mode and p.input == ref.input


def _model_gpu_fit(profiles: list[Profile], catalog: Catalog, base: GpuFit) -> GpuFit:
    """When this model was measured on some catalog GPU, refit eff_max and overhead to it.

    The other GPUs are then projected from the model's own efficiency; the band stays the
    device-class band (moving between GPU generations is what remains uncertain)."""
    sets = [CalibrationSet("profile", p.env, p.measurements) for p in profiles]
    points = gpu_points_from_sets(sets, gpu_fit=base, accelerators=catalog.accelerators)
    if not points:
        return base
    fitted = refit_gpu(points, base)
    where = sorted({p.device_name for p in points})
    return replace(
        fitted,
        per_model=True,
        n_points=len(points),
        source=f"roofline refitted to this model's {len(points)} CUDA points on {', '.join(where)}; {base.source}",
    )


# ---------------------------------------------------------------------------------------------
# Measured curves


def match_accelerator(gpu_name: str, accelerators: dict[str, Accelerator]) -> Accelerator | None:
    """Catalog accelerator for a CUDA device name ("NVIDIA A100-SXM4-80GB" → A100-80GB).

    Every '-'-separated token of the catalog name must appear in the device name as a whole word;
    the most specific match wins ("NVIDIA H100 PCIe" → H100-PCIe, not H100)."""
    words = set(re.split(r"[^a-z0-9]+", gpu_name.lower()))
    best: tuple[int, Accelerator] | None = None
    for acc in accelerators.values():
        tokens = acc.name.lower().split("-")
        if all(t in words for t in tokens) and (best is None or len(tokens) > best[0]):
            best = (len(tokens), acc)
    return best[1] if best else None


def _gpu_names(env: dict[str, Any]) -> list[str]:
    out = []
    for g in env.get("gpus") or ():
        out.append(str(g.get("name", "")) if isinstance(g, dict) else str(g))
    return out


def _curve_from(
    ms: list[Measurement], device: str, prec: str, source: str, instance: str | None
) -> ServiceCurve | None:
    by_batch: dict[int, Measurement] = {}
    for m in ms:
        if m.latency_ms is not None:
            prev = by_batch.get(m.batch_size)
            if prev is None or (m.threads or 0) > (prev.threads or 0):
                by_batch[m.batch_size] = m
    if not by_batch:
        return None
    pts = [by_batch[b] for b in sorted(by_batch)]
    return ServiceCurve(
        device=device,
        precision=prec,
        batch_sizes=tuple(m.batch_size for m in pts),
        latency_ms=tuple(m.latency_ms.p50 for m in pts if m.latency_ms),
        cv=tuple(m.latency_ms.cv for m in pts if m.latency_ms),
        provenance="measured",
        source=source,
        memory_bytes=tuple(m.peak_memory_bytes for m in pts),
        instance=instance,
    )


def _measured_gpu(acc: Accelerator, prec: str, profiles: list[Profile], catalog: Catalog) -> ServiceCurve | None:
    for p in profiles:
        if any(match_accelerator(n, catalog.accelerators) is acc for n in _gpu_names(p.env)):
            curve = _curve_from(p.ok("cuda", prec), acc.name, prec, str(p.env.get("id", "measured")), None)
            if curve is not None:
                return curve
    return None


def _measured_cpu(inst: Instance, prec: str, profiles: list[Profile], catalog: Catalog) -> ServiceCurve | None:
    for p in profiles:
        fam = match_cpu_family(catalog.cpus, p.env)
        same_type = p.env.get("instance_type") == inst.instance_type
        same_cpu = fam is not None and fam.name == inst.cpu_family and p.env.get("physical_cores") == inst.cores
        if same_type or same_cpu:
            src = str(p.env.get("id", "measured"))
            curve = _curve_from(p.ok("cpu", prec), f"cpu:{inst.instance_type}", prec, src, inst.instance_type)
            if curve is not None:
                return curve
    return None


# ---------------------------------------------------------------------------------------------
# What the local measurement tells us


class _Local:
    """The profile's local CPU measurements reduced to work per batch and per-batch Amdahl splits."""

    def __init__(self, profile: Profile, family: CpuFamily | None, cpu_fit: CpuFit) -> None:
        self.profile = profile
        self.family = family
        ok = profile.ok()
        self.flops_per_sample = max((m.flops_per_sample or 0.0 for m in ok), default=0.0)
        self.params = n_params(ok)
        acts = [m.activation_bytes / m.batch_size for m in ok if m.activation_bytes and m.batch_size]
        self.activation_bytes_per_sample = max(acts) if acts else None
        cpu = profile.ok("cpu")
        self.threads = max((m.threads or 0 for m in cpu), default=0) or int(profile.env.get("physical_cores") or 1)
        self.pairs = {(q.precision, q.batch_size): q for q in thread_pairs(cpu)}
        self.cpu_fit = cpu_fit

    @classmethod
    def of(cls, profile: Profile, catalog: Catalog, cpu_fit: CpuFit) -> _Local:
        return cls(profile, match_cpu_family(catalog.cpus, profile.env), cpu_fit)

    def points(self, precision: str) -> dict[int, Measurement]:
        """Local CPU measurement per batch size for ``precision``: the highest thread count, unless that
        run was contended (slower than fewer threads: shared cores), then the lowest."""
        by_batch: dict[int, list[Measurement]] = {}
        for m in self.profile.ok("cpu", precision):
            if m.latency_ms is not None:
                by_batch.setdefault(m.batch_size, []).append(m)
        out: dict[int, Measurement] = {}
        for b, ms in by_batch.items():
            ms.sort(key=self.threads_of)
            q = self.pairs.get((precision, b))
            out[b] = ms[0] if q is not None and is_contended(q) else ms[-1]
        return out

    def threads_of(self, m: Measurement) -> int:
        return m.threads or self.threads

    def split(self, precision: str, m: Measurement) -> tuple[float, float]:
        """(serial ms, single-core parallel ms) of local measurement ``m`` (Amdahl)."""
        assert m.latency_ms is not None
        q = self.pairs.get((precision, m.batch_size))
        if q is not None and not is_contended(q):
            p = amdahl_parallel_fraction(q.n1, q.t1_ms, q.n2, q.t2_ms)
        else:
            p = self.cpu_fit.p(precision)
        t1 = m.latency_ms.p50 / amdahl_scale(p, 1, self.threads_of(m))
        return t1 * (1.0 - p), t1 * p

    def serial_ms_at_smallest_batch(self) -> float | None:
        for prec in ("fp32", "bf16", "int8"):
            pts = self.points(prec)
            if pts:
                return self.split(prec, pts[min(pts)])[0]
        return None


# ---------------------------------------------------------------------------------------------
# GPU projection


def _project_gpu(local: _Local, acc: Accelerator, prec: str, fit: GpuFit) -> ServiceCurve | None:
    peak = acc.peak_flops_per_s(prec)
    if peak <= 0 or local.flops_per_sample <= 0:
        return None  # precision not supported natively, or no FLOP count to project from
    if prec == "tf32" and peak <= acc.peak_flops_per_s("fp32"):
        return None  # no TF32 tensor cores (pre-Ampere): tf32 runs as fp32, whose curve already exists
    mode = local.profile.mode
    overhead = fit.overhead_ms.get(mode, fit.overhead_ms.get("inference", 1.0))
    serial = None if fit.per_model else local.serial_ms_at_smallest_batch()
    if serial is not None:  # host-side eager overhead cannot exceed the local CPU's serial time per batch
        overhead = min(overhead, serial)
    overhead = max(overhead, fit.overhead_min_ms)
    local_batches = {m.batch_size for m in local.profile.ok()}
    width = fit.width_for(local.profile.input)
    batches = sorted(set(GPU_BATCHES) | local_batches)
    ts = []
    for b in batches:
        flops = batch_flops(local.flops_per_sample, b)
        moved = batch_bytes(
            local.flops_per_sample, local.params, b, prec, mode, width, local.activation_bytes_per_sample
        )
        eff = fit.eff_compute_max.get(prec, 0.4)
        ts.append(gpu_time_ms(flops, moved, peak, acc.bandwidth_gbps, eff, fit.t_half_ms, fit.eff_memory, overhead))
    kind = "model-fitted" if fit.per_model else "calibrated" if fit.calibrated else "prior, wide band"
    return ServiceCurve(
        device=acc.name,
        precision=prec,
        batch_sizes=tuple(batches),
        latency_ms=tuple(ts),
        cv=tuple(fit.cv for _ in batches),
        provenance="projected",
        band_lo=fit.band_lo,
        band_hi=fit.band_hi,
        source=f"roofline+calibration ({kind}: {fit.source}; {acc.name} {acc.source})",
    )


# ---------------------------------------------------------------------------------------------
# CPU projection


def _project_cpu(local: _Local, inst: Instance, catalog: Catalog, prec: str, fit: CpuFit) -> ServiceCurve | None:
    target = catalog.cpus[inst.cpu_family]
    base_prec = prec if local.points(prec) else "fp32"
    pts = local.points(base_prec)
    if not pts:
        return None
    fam = local.family
    if fam is not None:
        clock, r = _ratios(fam, target, base_prec, prec)
        gain = r**fit.isa_gain_exponent
        # the truth lies between no ISA gain (×gain) and the full peak ratio (×gain/r)
        isa_lo, isa_hi = min(gain, gain / r, 1.0), max(gain, gain / r, 1.0)
    else:  # unknown local CPU: predict as the target's own generation; the band spans every catalog family
        clock, gain = 1.0, 1.0
        spans = [
            (c / max(1.0, r), c / min(1.0, r))
            for c, r in (_ratios(f, target, base_prec, prec) for f in catalog.cpus.values())
        ]
        isa_lo, isa_hi = min(1.0, *(a for a, _ in spans)), max(1.0, *(b for _, b in spans))
    n_t = inst.cores
    n_ls = {local.threads_of(m) for m in pts.values()}
    bw = target.memory_bandwidth_gbps * (min(1.0, n_t / target.cores_per_socket) if target.cores_per_socket else 1.0)
    mode = local.profile.mode
    batches, ts, cvs = [], [], []
    for b in sorted(pts):
        lat = pts[b].latency_ms
        assert lat is not None
        serial, par1 = local.split(base_prec, pts[b])
        eta = fit.efficiency_per_doubling ** max(math.log2(n_t / local.threads_of(pts[b])), 0.0)
        t_par = par1 * clock / gain / (n_t * eta)
        # Floor: the weights stream from DRAM once per batch (activations of a batch mostly stay in cache).
        moved = batch_bytes(0.0, local.params, b, prec, mode, activation_width=1.0)
        t_mem = moved / (bw * 1e9 * fit.eff_memory) * 1e3
        batches.append(b)
        ts.append(serial * clock + max(t_par, t_mem))
        cvs.append(lat.cv if lat.n > 1 else fit.cv)
    d = max(abs(math.log2(n_t / n)) for n in n_ls)  # the band follows the longest extrapolation
    base = 0.05 + (0.0 if fit.calibrated else 0.1)  # noise of the local point (+ no calibration at all)
    lo = math.exp(-d * fit.log_band_lo_per_doubling - base)
    hi = math.exp(d * fit.log_band_hi_per_doubling + base)
    lo, hi = lo * isa_lo, hi * isa_hi
    note = f"{base_prec}→{prec} " if base_prec != prec else ""
    threads = "/".join(map(str, sorted(n_ls)))
    local_name = fam.name if fam else "unknown CPU"
    return ServiceCurve(
        device=f"cpu:{inst.instance_type}",
        precision=prec,
        batch_sizes=tuple(batches),
        latency_ms=tuple(ts),
        cv=tuple(cvs),
        provenance="projected",
        band_lo=lo,
        band_hi=hi,
        source=(
            f"cpu scaling {note}from {threads} local threads ({local_name}) to {n_t} cores {target.name}; {fit.source}"
        ),
        instance=inst.instance_type,
    )


def _ratios(local: CpuFamily, target: CpuFamily, local_prec: str, prec: str) -> tuple[float, float]:
    """(clock ratio local/target, FLOP/cycle ratio target/local) for running ``prec`` on the target."""
    clock = local.sustained_ghz / target.sustained_ghz
    r = target.flop_per_cycle_per_core[_cpu_key(prec)] / local.flop_per_cycle_per_core[_cpu_key(local_prec)]
    return clock, r


def _cpu_key(prec: str) -> str:
    return {"tf32": "fp32", "fp16": "bf16"}.get(prec, prec)


# ---------------------------------------------------------------------------------------------
# GPU calibration points (used by calibration.fits)


def gpu_points_from_sets(
    sets: Sequence[CalibrationSet],
    gpu_prior: dict[str, Any] | None = None,
    *,
    gpu_fit: GpuFit | None = None,
    accelerators: dict[str, Accelerator] | None = None,
) -> list[GpuPoint]:
    """Every ok CUDA measurement of the calibration sets as a roofline point on its catalog GPU."""
    from rightsize.catalog import load_catalog

    accs = accelerators if accelerators is not None else load_catalog("").accelerators
    if gpu_fit is None:
        assert gpu_prior is not None, "pass gpu_prior or gpu_fit"
        gpu_fit = gpu_prior_fit(gpu_prior)
    points = []
    for s in sets:
        names = _gpu_names(s.env)
        acc = match_accelerator(names[0], accs) if names else None
        if acc is None:
            continue
        ok = [m for m in s.measurements if m.status == "ok" and m.device == "cuda"]
        for m in ok:
            peak = acc.peak_flops_per_s(m.precision)
            if not (m.flops_per_sample and m.latency_ms and peak > 0):
                continue
            same = [x for x in ok if x.model == m.model]
            acts = m.activation_bytes / m.batch_size if m.activation_bytes else None
            width = gpu_fit.width_for(m.input)
            moved = batch_bytes(m.flops_per_sample, n_params(same), m.batch_size, m.precision, m.mode, width, acts)
            flops = batch_flops(m.flops_per_sample, m.batch_size)
            points.append(
                GpuPoint(
                    m.model, m.mode, m.precision, flops, moved, peak, acc.bandwidth_gbps, m.latency_ms.p50, m.batch_size
                )
            )
    return points
