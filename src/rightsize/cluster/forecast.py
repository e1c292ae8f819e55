"""From a measured pipeline to the full-job table: load the catalog, match this machine, project.

The I/O edge of ``projection`` (pure): reads the catalog, this machine's fingerprint and, when a
store is given, the model's stored ``rightsize bench`` profile on this machine, whose ServiceCurves
(``rightsize.estimate.projection.project_curves``) then give the inference rate per instance.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rightsize.catalog import Catalog, Instance
from rightsize.cluster.projection import InferRate, StageCosts, match_accelerator, project_job
from rightsize.profile import Environment
from rightsize.spec import Workload

if TYPE_CHECKING:
    from rightsize.cluster.pipeline import PipelineResult
    from rightsize.store import Store


def stage_costs(res: PipelineResult) -> StageCosts:
    """Per-item costs from the summed stage times (CPU seconds for CPU stages; GPU wall time for cuda)."""
    n = max(res.items, 1)
    io = sum(res.stages[s]["cpu_s"] for s in ("read", "preprocess", "write")) / n
    infer = res.stages["infer"]["wall_s" if res.device == "cuda" else "cpu_s"] / n
    return StageCosts(io_core_s=io, infer_s=infer, device=res.device, precision=res.precision)


def curve_rates(workload: Workload, res: PipelineResult, catalog: Catalog, store: Store | None,
                env: Environment) -> InferRate | None:  # fmt: skip
    """Inference items/s per instance from the stored profile's curves at the micro-batch; None without one."""
    if store is None:
        return None
    from rightsize.estimate.projection import load_projection_model, project_curves
    from rightsize.measure.config import input_of
    from rightsize.models import workload_model

    entry = workload_model(workload)
    profile = store.profile(workload.model, "inference", input_of(workload, entry.kind), env.id, tiny=workload.tiny)
    if profile is None or not profile.ok(precision=res.precision):
        return None
    by_device: dict[str, list[Any]] = {}
    for c in project_curves(profile, catalog, load_projection_model(), precisions=[res.precision]):
        by_device.setdefault(c.device, []).append(c)

    def rate(inst: Instance) -> tuple[float, str] | None:
        device = inst.accelerator if inst.accelerator else f"cpu:{inst.instance_type}"
        curves = by_device.get(device)
        if not curves:
            return None
        # CPU: the best layout (k workers x t threads); GPU: one replica per accelerator
        best = max(curves, key=lambda c: c.workers * c.throughput_per_s(res.batch_size))
        per = best.workers * best.throughput_per_s(res.batch_size)
        return per * max(inst.accelerator_count, 1), best.provenance

    return rate


def project(res: PipelineResult, workload: Workload, catalog: Catalog | None = None,
            store: Store | None = None) -> tuple[list[dict[str, Any]], list[str]]:  # fmt: skip
    """Projection rows (dicts, cheapest first) for ``res.full_items`` and notes on what was assumed."""
    from rightsize.catalog import filter_instances, load_catalog, match_cpu_family
    from rightsize.measure.env import fingerprint

    catalog = catalog if catalog is not None else load_catalog()
    env = fingerprint()
    targets = workload.targets
    instances = filter_instances(
        catalog.instances,
        providers=targets.providers if targets else None,
        regions=targets.regions if targets else None,
        names=targets.instances if targets else None,
    )
    notes = []
    local_cpu = match_cpu_family(catalog.cpus, env)
    if local_cpu is None:
        notes.append(f"projection: this CPU ({env.cpu_model}) matches no catalog CPU family; CPU speed ratio 1.0")
    local_gpu = match_accelerator(catalog, env.gpu_name) if env.gpu_name else None
    if res.device == "cuda" and local_gpu is None:
        notes.append("projection: the measuring GPU is not in the catalog; GPU instances are not projected")
    if res.engine == "ray" and (res.cluster or {}).get("nodes", 1) > 1:
        notes.append("projection: assumes the cluster's nodes are like this machine (the driver)")
    infer_rate = curve_rates(workload, res, catalog, store, env)
    if infer_rate is None:
        notes.append(
            "projection: PLACEHOLDER inference rates (catalog peak ratios); run `rightsize bench SPEC` first so the "
            f"{res.precision} profile's ServiceCurves give them"
        )
    batch = targets.batch if targets else None
    rows = project_job(
        instances, catalog, stage_costs(res), res.full_items or 0, local_cpu=local_cpu, local_gpu=local_gpu,
        deadline_hours=batch.deadline_hours if batch else None, max_instances=batch.max_instances if batch else 64,
        infer_rate=infer_rate,
    )  # fmt: skip
    return [r.to_dict() for r in rows], notes
