"""Offline batch inference end to end: run the pipeline here (or on Ray), then plan the full job.

    result = run_and_project(workload, items=10_000, catalog=catalog, store=store)
    result.plan.recommendation    # the cheapest way to finish ``result.full_items`` items by the deadline

Measuring (``cluster.pipeline``) and costing stay apart; this is where they meet. The full job is costed by
the one batch planner (``rightsize.plan``, ``plan/batch.py``), exactly as `rightsize plan` costs a batch
target, with the pipeline's measured read/preprocess/write work per item as an ``InputStage``: the same
ServiceCurves, memory model, spin-up, spot odds and projection bands. The model's inference curves come from
its profile on this machine, measured first when the store has none.
"""

from __future__ import annotations

import contextlib
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rightsize.catalog import Catalog
    from rightsize.cluster.pipeline import PipelineResult
    from rightsize.plan import PlanResult
    from rightsize.plan.batch import InputStage
    from rightsize.profile import Environment
    from rightsize.spec import Workload
    from rightsize.store import Store

__all__ = ["input_stage", "plan_full_job", "run_and_project", "stopped_after_the_run"]

# With no deadline the job is costed against this one (the spec's ceiling): one instance, and 2x and 4x for time.
NO_DEADLINE_HOURS = 100_000.0


def run_and_project(
    workload: Workload,
    *,
    catalog: Catalog | None = None,
    store: Store | None = None,
    progress: bool = False,
    **run: Any,
) -> PipelineResult:
    """``cluster.pipeline.run_pipeline(workload, **run)``, then ``plan_full_job`` over ``catalog`` (None: the
    shipped tables + $RIGHTSIZE_CATALOG). ``store``: where the model's profile on this machine is read (and
    measured when missing); None measures into a temporary store."""
    from rightsize.cluster.pipeline import run_pipeline
    from rightsize.errors import print_stop
    from rightsize.measure.conditions import OthersBusy
    from rightsize.workflows.validate_run import OTHERS_BUSY

    check_batch_spec(workload)
    with OthersBusy() as others:
        res = run_pipeline(workload, **run)
    if others.share is not None and others.share > OTHERS_BUSY:  # its throughput had read 3.4x low, unexplained
        res.notes.append(f"other processes kept {others.share:.0%} of this machine's cores busy during the run: its "
                         "measured throughput reads low; the plan's rates come from the stored profile, measured "
                         "on its own (re-run it on a quiet machine to compare)")  # fmt: skip
    if res.items:
        try:
            res.plan, notes = _plan(res, workload, catalog, store, progress)
        except KeyboardInterrupt:  # the output is whole by now: say so, and what is lost
            print_stop(stopped_after_the_run(res))
            raise
        res.notes.extend(notes)
    return res


def _plan(res: PipelineResult, workload: Workload, catalog: Catalog | None, store: Store | None,
          progress: bool) -> tuple[PlanResult, list[str]]:  # fmt: skip
    if catalog is None:
        from rightsize.catalog import load_catalog

        catalog = load_catalog()
    with contextlib.ExitStack() as stack:
        if store is None:
            from rightsize.store import Store

            tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="rightsize-pipeline-"))
            store = stack.enter_context(Store(Path(tmp) / "store.sqlite"))
        return plan_full_job(res, workload, catalog, store, progress=progress)


def stopped_after_the_run(res: PipelineResult) -> str:
    """What a Ctrl-C after the run (while the model is measured or the job planned) kept and lost: it had said only
    "nothing was planned", though --output already held every row (and the run's own stop says "an unfinished run
    writes no output")."""
    where = f"written to {res.output_path!r}" if res.output_path else "written to a temporary file, now removed"
    return (f"the pipeline had finished before the stop: its {res.items:,} output rows are {where}; lost: the full "
            "job's plan and this run's record (its throughput and stage times are not stored): run it again to "
            "plan")  # fmt: skip


def check_batch_spec(workload: Workload) -> None:
    """A SpecError for a spec whose targets are not batch inference: the pipeline runs batch inference and costs a
    batch job, so a training (or online, generative) target would be ignored; it had run and costed 1,000,000
    inference items with only "no batch deadline in the spec"."""
    from rightsize.errors import SpecError
    from rightsize.plan import plan_kind

    t = workload.targets
    kind = None if t is None else plan_kind(t)
    if kind not in (None, "batch"):
        raise SpecError(f"targets.{kind}", "`rightsize pipeline` runs and costs batch inference; plan this target "
                        "with `rightsize plan SPEC`, or give targets.batch {items, deadline_hours}")  # fmt: skip


def input_stage(res: PipelineResult, catalog: Catalog, env: Environment) -> tuple[InputStage, list[str]]:
    """The measured read + preprocess + write CPU work per item, with the clock of ``env``'s CPU (where the
    pipeline ran) from the catalog."""
    from rightsize.catalog import match_cpu_family
    from rightsize.plan.batch import InputStage

    n = max(res.items, 1)
    core_s = sum(res.stages[s]["cpu_s"] for s in ("read", "preprocess", "write")) / n
    local = match_cpu_family(catalog.cpus, env)
    notes = []
    if local is None:
        notes.append(f"input stages: this CPU ({env.cpu_model}) matches no catalog CPU family; clocks not scaled")
    if res.engine == "ray" and (res.cluster or {}).get("nodes", 1) > 1:
        notes.append("input stages: per-item CPU work summed over the cluster's nodes, assumed like this machine")
    return InputStage(core_s, local.sustained_ghz if local else None), notes


def plan_full_job(
    res: PipelineResult, workload: Workload, catalog: Catalog, store: Store, *, progress: bool = False
) -> tuple[PlanResult, list[str]]:
    """The batch plan of ``res.full_items`` items (the spec's batch target, or no deadline) at the pipeline's
    device and precision, bounded per instance by the measured input stages."""
    from rightsize.estimate.projection import load_projection_model, project_curves
    from rightsize.measure.profile_source import ensure_profile
    from rightsize.plan import plan
    from rightsize.spec.targets import BatchTarget, Targets
    from rightsize.workflows.plan import memory_models, work_profile

    notes: list[str] = []
    sizes = sorted({*workload.batch_sizes, res.batch_size})
    measured = workload.model_copy(
        update={"precisions": [res.precision], "devices": [res.device], "batch_sizes": sizes, "mode": "inference"}
    )
    profile = ensure_profile(measured, store, progress=progress)
    if not profile.ok(precision=res.precision):
        from rightsize.errors import RunFailedError

        raise RunFailedError(
            f"no successful {res.device} {res.precision} measurement of {res.model} to cost the full job from; "
            "run `rightsize bench SPEC` to see why"
        )
    stage, stage_notes = input_stage(res, catalog, profile.env)
    notes += stage_notes
    targets = workload.targets
    batch = targets.batch if targets is not None else None
    items = res.full_items or (batch.items if batch else 1)
    if batch is None:
        batch = BatchTarget(items=items, deadline_hours=NO_DEADLINE_HOURS)
        notes.append("no batch deadline in the spec: the full job is costed on 1 instance, and 2 and 4 for time")
    else:
        batch = batch.model_copy(update={"items": items})
    base = targets.model_dump(exclude={"batch", "online", "training"}) if targets is not None else {}
    job = measured.model_copy(update={"targets": Targets.model_validate({**base, "batch": batch.model_dump()})})
    curves = project_curves(
        profile, catalog, load_projection_model(), work_profile(job, store), precisions=[res.precision]
    )
    memory, _ = memory_models(job, store, {res.precision})
    if len(workload.precisions) > 1 or workload.precisions[0] != res.precision:
        notes.append(f"costed at {res.precision}, the precision this pipeline ran; `rightsize plan SPEC` compares "
                     f"{', '.join(workload.precisions)} and projects the precisions this machine lacks")  # fmt: skip
    return plan(job, curves, catalog, memory, input_stage=stage), notes
