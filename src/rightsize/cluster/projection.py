"""Project a measured pipeline onto the catalog's instances: runtime and cost of the full job.

Pure functions; the caller loads the catalog (``forecast``). Per item, measured on the local
machine (``StageCosts``):

    io_core_s      read + preprocess + write, CPU core-seconds (scales with the clock: GHz ratio)
    infer_s        inference: CPU core-seconds (device cpu) or GPU-seconds (device cuda)

Without a stored profile, a PLACEHOLDER inference model scales by catalog peak ratios:

    CPU instance   items/s = cores / (io_core_s / r_ghz + infer_s / r_flops)      r_flops: per-core peak ratio
    GPU instance   items/s = min(GPU rate, input rate)                            (the slower side bounds it)
                   GPU rate   = n_gpu * peak_gpu / (infer_s * local peak)  (same fraction of peak as measured)
                   input rate = cores * r_ghz / io_core_s                  (the CPU-bound input pipeline)

The placeholder GPU rate assumes the model reaches the same fraction of peak on the GPU as where it was
measured: optimistic for small models (launch
overhead), so the input-rate bound matters. Every row says ``projected`` and why.

Better, when the caller has one: ``infer_rate(instance)`` gives the inference items/s of a whole
instance from a ServiceCurve (``rightsize.estimate.projection.project_curves`` of a stored bench
profile, at the pipeline's micro-batch); then

    CPU instance   items/s = 1 / (1 / infer_rate + io_core_s / (cores * r_ghz))   (stages share the cores)
    GPU instance   items/s = min(infer_rate, input rate)
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from rightsize.catalog import Accelerator, Catalog, CpuFamily, Instance

PROVENANCE = "projected: measured pipeline scaled by catalog peak ratios (placeholder)"
CURVE_PROVENANCE = "{curve}: inference from a ServiceCurve of the stored profile; other stages measured here"

# instance -> (inference items/s of the whole instance, the curve's provenance), or None: use the placeholder
InferRate = Callable[[Instance], "tuple[float, str] | None"]


@dataclass(frozen=True)
class StageCosts:
    """Measured cost per item on the local machine."""

    io_core_s: float  # read + preprocess + write, CPU core-seconds per item
    infer_s: float  # CPU core-seconds (device cpu) or GPU-seconds (device cuda) per item
    device: str  # where inference was measured: cpu | cuda
    precision: str


@dataclass(frozen=True)
class ProjectionRow:
    provider: str
    region: str
    instance_type: str
    device_class: str  # cpu | gpu
    accelerator: str | None  # e.g. "1x A10G"
    items_per_s: float  # one instance
    bottleneck: str  # inference | input pipeline (CPU)
    runtime_h: float  # the full job on one instance
    instances: int  # instances to meet the deadline (1 without one)
    wall_h: float  # runtime with that many instances
    price_usd_per_hour: float  # on-demand, one instance
    cost_usd: float  # on-demand, whole job
    spot_cost_usd: float | None
    meets_deadline: bool | None  # None: no deadline given
    provenance: str = PROVENANCE

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _gpu_precision(acc: Accelerator, precision: str) -> str:
    """The accelerator peak to use: bf16 falls back to fp16 where bf16 is not native (T4, V100)."""
    if precision == "bf16" and acc.tflops.get("bf16", 0.0) <= 0:
        return "fp16"
    return precision if acc.tflops.get(precision, 0.0) > 0 else "fp32"


def items_per_s(
    inst: Instance,
    catalog: Catalog,
    costs: StageCosts,
    local_cpu: CpuFamily | None,
    local_gpu: Accelerator | None,
    infer_rate: InferRate | None = None,
) -> tuple[float, str, str] | None:
    """One instance's projected throughput, its bottleneck and provenance; None when it cannot be projected."""
    fam = catalog.cpus.get(inst.cpu_family)
    r_ghz = fam.sustained_ghz / local_cpu.sustained_ghz if fam and local_cpu else 1.0
    input_rate = inst.cores * r_ghz / costs.io_core_s if costs.io_core_s > 0 else math.inf
    from_curve = infer_rate(inst) if infer_rate else None
    if from_curve is not None and from_curve[0] > 0:
        rate, prov = from_curve[0], CURVE_PROVENANCE.format(curve=from_curve[1])
        if inst.accelerator is None:
            return 1.0 / (1.0 / rate + 1.0 / input_rate), "CPU (all stages)", prov
        return (rate, "inference", prov) if rate <= input_rate else (input_rate, "input pipeline (CPU)", prov)
    got = _placeholder_rate(inst, catalog, costs, local_cpu, local_gpu, r_ghz, input_rate, fam)
    return (*got, PROVENANCE) if got else None


def _placeholder_rate(inst: Instance, catalog: Catalog, costs: StageCosts, local_cpu: CpuFamily | None,
                      local_gpu: Accelerator | None, r_ghz: float, input_rate: float,
                      fam: CpuFamily | None) -> tuple[float, str] | None:  # fmt: skip
    if inst.accelerator is None:
        if costs.device != "cpu":
            return None  # inference was measured on a GPU only
        local_peak = local_cpu.peak_flops_per_s(costs.precision, 1) if local_cpu else 0.0
        r_flops = fam.peak_flops_per_s(costs.precision, 1) / local_peak if fam and local_peak > 0 else r_ghz
        per_item = costs.io_core_s / r_ghz + costs.infer_s / r_flops
        return (inst.cores / per_item if per_item > 0 else math.inf), "CPU (all stages)"
    acc = catalog.accelerators.get(inst.accelerator)
    if acc is None or costs.infer_s <= 0:
        return None
    peak = acc.peak_flops_per_s(_gpu_precision(acc, costs.precision)) * inst.accelerator_count
    if costs.device == "cuda":
        if local_gpu is None:
            return None
        local_peak = local_gpu.peak_flops_per_s(_gpu_precision(local_gpu, costs.precision))
    else:
        local_peak = local_cpu.peak_flops_per_s(costs.precision, 1) if local_cpu else 0.0
    if local_peak <= 0:
        return None
    gpu_rate = peak / (costs.infer_s * local_peak)
    return (gpu_rate, "inference") if gpu_rate <= input_rate else (input_rate, "input pipeline (CPU)")


def project_job(
    instances: list[Instance],
    catalog: Catalog,
    costs: StageCosts,
    full_items: int,
    *,
    local_cpu: CpuFamily | None,
    local_gpu: Accelerator | None = None,
    deadline_hours: float | None = None,
    max_instances: int = 64,
    infer_rate: InferRate | None = None,
) -> list[ProjectionRow]:
    """Rows for every instance that can be projected, cheapest first (those meeting the deadline before the rest)."""
    rows = []
    for inst in instances:
        got = items_per_s(inst, catalog, costs, local_cpu, local_gpu, infer_rate)
        if got is None or got[0] <= 0:
            continue
        rate, bottleneck, provenance = got
        runtime_h = full_items / rate / 3600.0
        n = max(1, math.ceil(runtime_h / deadline_hours)) if deadline_hours else 1
        meets = None if deadline_hours is None else n <= max_instances
        n = min(n, max_instances)
        spot = inst.price_usd_per_hour("spot")
        acc = f"{inst.accelerator_count}x {inst.accelerator}" if inst.accelerator else None
        rows.append(
            ProjectionRow(
                inst.provider, inst.region, inst.instance_type, inst.device_class, acc, rate, bottleneck, runtime_h, n,
                runtime_h / n, inst.on_demand_usd_per_hour, runtime_h * inst.on_demand_usd_per_hour,
                runtime_h * spot if spot is not None else None, meets, provenance,
            )
        )  # fmt: skip
    return sorted(rows, key=lambda r: (r.meets_deadline is False, r.cost_usd, r.wall_h))


def match_accelerator(catalog: Catalog, gpu_name: str | None) -> Accelerator | None:
    """The catalog accelerator a CUDA device name stands for (``catalog.match_accelerator``'s rule)."""
    from rightsize.catalog.query import match_accelerator as match

    return match(gpu_name, catalog.accelerators)
