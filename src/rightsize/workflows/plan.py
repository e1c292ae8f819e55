"""The plan workflow: spec -> profile (measuring what is missing) -> project -> memory -> plan.

    result, context = plan_spec(workload, store)      # PlanResult, and the report's evidence

``context`` holds what the report draws (profile, curves, memory breakdowns, catalog, timings).
The CLI (``rightsize plan``) and the Python API (``rightsize.api.plan``) both call this; neither holds
planning logic of its own.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rightsize.errors import SpecError, UnsupportedError
from rightsize.workflows.precisions import faster_unlisted, no_int8, unlisted_precision, with_cpu_serving_precisions

if TYPE_CHECKING:
    from rightsize.catalog import Catalog
    from rightsize.plan import MemoryModel, PlanResult
    from rightsize.plan.result import Candidate
    from rightsize.profile import Profile, WorkProfile
    from rightsize.spec import Workload
    from rightsize.store import Store

MEMORY_CACHE_KIND = "memory_model"
# 2: the whole estimate (context, workspace, fragmentation), one budget; 3: CPU conv scratch; 4: per-sample bytes from
# batches 64 and 512 (training's peak at batches 1 and 8 is the optimizer step: the slope read 0); 5-6: a CPU
# replica's own line and breakdown (no CUDA context)
_MEMORY_CACHE_VERSION = 6
WORK_CACHE_KIND = "work_profile"
_WORK_CACHE_VERSION = 1


def memory_models(
    workload: Workload, store: Store, precisions: set[str]
) -> tuple[dict[str, MemoryModel], dict[str, Any]]:
    """Per precision, one replica's (or training worker's) estimated memory as fixed + per-sample bytes: the
    estimate's whole total, so the planner's fit test and `rightsize memory`'s agree (rightsize.memory_budget).

    Traced twice (batch 1 and 8) with ``rightsize.estimate.memory`` and cached in the store, so a
    second plan imports no torch for it. Returns ({precision: model}, {precision: breakdown at batch 1}).
    """
    from rightsize.plan import MemoryModel

    mode = "train" if workload.mode == "training" else "infer"
    want = {{"tf32": "fp32"}.get(p, p) for p in precisions}
    if mode == "train":
        want -= {"int8", "int4"}
    key = f"{workload.model}|{mode}|{workload.input.seq_len}|{workload.input.image_size}|{workload.optimizer}"
    key += f"|tiny={int(workload.tiny)}|v{_MEMORY_CACHE_VERSION}"
    key += _user_model_key(workload)
    cached: dict[str, dict[str, Any]] = {}
    for art in store.artifacts(kind=MEMORY_CACHE_KIND):
        p = art["payload"]
        if p.get("key") == key and p.get("precision") not in cached:
            cached[p["precision"]] = p
    missing = sorted(want - cached.keys())
    if missing:
        cached.update(_estimate(workload, store, mode, key, missing))
    models = {}
    for p, v in cached.items():
        if p not in want or v.get("fixed_bytes") is None:
            continue
        # training keeps fp32 parameters (torch.amp too): the gradients all-reduced are the weights' size
        grads = ((v.get("breakdown") or {}).get("weights") or None) if mode == "train" else None
        on_cpu = None
        if v.get("cpu_fixed_bytes") is not None:
            on_cpu = MemoryModel(v["cpu_fixed_bytes"], v["cpu_per_sample_bytes"], "estimate (cpu)", grads)
        models[p] = MemoryModel(v["fixed_bytes"], v["per_sample_bytes"], "estimate (rightsize.estimate.memory)",
                                gradient_bytes=grads, on_cpu=on_cpu)  # fmt: skip
    breakdowns = {p: v.get("breakdown", {}) for p, v in cached.items() if p in want}
    # a CPU replica's own breakdown, for the report of a CPU recommendation (report_memory)
    breakdowns |= {f"cpu:{p}": v["cpu_breakdown"] for p, v in cached.items() if p in want and v.get("cpu_breakdown")}
    return models, breakdowns


# Batches the plan's memory line is fitted at: batch 1 for the fixed part, two large batches for the slope (in training
# the peak at small batches is the optimizer step, flat in the batch); the second set for a model that fails large.
MEMORY_FIT_BATCHES = ((1, 64, 512), (1, 8))
# An exported engine (ort:, ov:) is estimated by running it, seconds per batch and ~50 s at 512 on 2 cores: its
# inference line from batches 1 and 64 (a sentiment plan had spent 3 silent minutes here)
ENGINE_FIT_BATCHES = ((1, 64), (1, 8))


def fit_memory_line(points: list[tuple[int, int]]) -> tuple[float, float]:
    """(fixed, per-sample) bytes of a line bounding the peaks ``[(batch, bytes), ...]`` (batch 1 first): the slope from
    the two largest batches, the intercept high enough to cover batch 1 too (the optimizer step's flat peak)."""
    (b0, t0), (b1, t1), (b2, t2) = points[0], points[-2], points[-1]
    per_sample = max(0.0, (t2 - t1) / (b2 - b1))
    return max(t0 - per_sample * b0, t2 - per_sample * b2), per_sample


def _estimate(
    workload: Workload, store: Store, mode: str, key: str, precisions: list[str]
) -> dict[str, dict[str, Any]]:
    from rightsize.errors import RightsizeError

    try:
        from rightsize.estimate.memory_estimate import estimate_memory
        from rightsize.models import workload_model

        entry = workload_model(workload)  # zoo or a user's model (hf:, .onnx, .pt, factory, ort:/ov:)
    except (ImportError, RightsizeError):  # no torch here: plan without a memory model
        return {}
    shape: dict[str, Any] = {"shape": workload.input.shape, "vocab": workload.input.token_vocab()}
    if entry.kind == "tokens":
        shape["seq_len"] = workload.input.seq_len
    elif entry.kind == "image":
        shape["image_size"] = workload.input.image_size
    out: dict[str, dict[str, Any]] = {}
    engine = workload.model.startswith(("ort:", "ov:"))
    # said on stderr whatever the output mode, as the sweep's "measuring" line: this can take a minute
    print(f"rightsize: estimating {workload.model}'s memory at {', '.join(precisions)} (once: cached in the store)",
          file=sys.stderr, flush=True)  # fmt: skip
    untraced: list[str] = []
    for prec in precisions:
        est = []
        failure = ""
        for batches in ENGINE_FIT_BATCHES if engine else MEMORY_FIT_BATCHES:
            try:
                est = [
                    estimate_memory(workload.model, mode=mode, precision=prec, batch_size=b,
                                    optimizer=workload.optimizer, device="cuda", advise=False, tiny=workload.tiny,
                                    **shape)
                    for b in batches
                ]  # fmt: skip
                break
            except Exception as exc:  # a user model fixed to small batches: the next, smaller points
                failure = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:200]
                continue
        if not est:  # a user's model that cannot be traced here is planned without a memory model, and that is
            # cached too: it had been traced again on every plan, under "(once: cached in the store)"
            store.save_artifact(None, MEMORY_CACHE_KIND, {"key": key, "precision": prec, "fixed_bytes": None,
                                                          "reason": failure}, internal=True)  # fmt: skip
            untraced.append(f"{prec} ({failure})")
            continue
        fixed, per_sample = fit_memory_line([(e.batch_size, e.total_bytes) for e in est])
        payload = {
            "key": key,
            "precision": prec,
            "fixed_bytes": fixed,
            "per_sample_bytes": per_sample,
            "breakdown": est[0].breakdown,
            "model": workload.model,
        }
        try:  # a CPU replica: no CUDA context or cuBLAS workspace, oneDNN's scratch instead (~0.7 GB less)
            on_cpu = [
                estimate_memory(workload.model, mode=mode, precision=prec, batch_size=e.batch_size,
                                optimizer=workload.optimizer, device="cpu", advise=False, tiny=workload.tiny, **shape)
                for e in est
            ]  # fmt: skip
            payload["cpu_fixed_bytes"], payload["cpu_per_sample_bytes"] = fit_memory_line(
                [(e.batch_size, e.total_bytes) for e in on_cpu]
            )
            payload["cpu_breakdown"] = on_cpu[0].breakdown
        except Exception:  # planned on CPUs with the GPU's estimate, as before (an over-estimate)
            pass
        store.save_artifact(None, MEMORY_CACHE_KIND, payload, internal=True)
        out[prec] = payload
    if untraced:
        print(f"rightsize: {workload.model}'s memory could not be estimated at {'; '.join(untraced)}: planned "
              "without a memory estimate at those precisions (kept in the store: not tried again)",
              file=sys.stderr, flush=True)  # fmt: skip
    return out


def _user_model_key(workload: Workload) -> str:
    """The part of a cache key a user's model adds (``measure.config.user_model_fields``: its input's shape and
    vocabulary, its file's checksum), so a changed input or an edited model is traced again."""
    from rightsize.measure.config import user_model_fields

    return "".join(f"|{k}={v}" for k, v in user_model_fields(workload).items())


def work_profile(workload: Workload, store: Store) -> WorkProfile | None:
    """The model's traced ops (``rightsize.estimate.work``), cached in the store so a warm plan needs no torch.

    None when the model cannot be traced here (no torch, or a user model FakeTensorMode cannot run):
    the projection then falls back to a coarse profile from the measured FLOPs (and says so).
    """
    from rightsize.profile import WorkProfile

    key = f"{workload.model}|{workload.mode}|{workload.input.seq_len}|{workload.input.image_size}"
    key += f"|tiny={int(workload.tiny)}|v{_WORK_CACHE_VERSION}"
    key += _user_model_key(workload)
    for art in store.artifacts(kind=WORK_CACHE_KIND):
        if art["payload"].get("key") == key:
            cached = art["payload"].get("work")
            return WorkProfile.from_dict(cached) if cached is not None else None  # None: it failed before
    try:
        from rightsize.estimate.work import trace_work
        from rightsize.measure.config import input_of
        from rightsize.models import workload_model

        entry = workload_model(workload)
        # the sizes only: a user model's shape, vocabulary and file are in ``entry`` (input_of adds them for keys)
        size = {k: v for k, v in input_of(workload, entry.kind).items() if k in ("seq_len", "image_size")}
        work = trace_work(entry, mode=workload.mode, tiny=workload.tiny, **size)
    except ImportError:  # no torch here: nothing to cache, a later run with torch traces it
        return None
    except Exception:  # any failure to trace a user model falls back to the coarse profile, labelled
        store.save_artifact(None, WORK_CACHE_KIND, {"key": key, "work": None}, internal=True)  # and not again
        return None
    store.save_artifact(None, WORK_CACHE_KIND, {"key": key, "work": work.to_dict()}, internal=True)
    return work


def plan_spec(
    workload: Workload, store: Store, catalog: Catalog | None = None, progress: bool = True, seed: int = 0
) -> tuple[PlanResult, dict[str, Any]]:
    """Profile (measuring what is missing), project, estimate memory and plan; also the report's context.

    ``catalog``: loaded once by the caller (``load_catalog(user_file)``) and used for every engine; None
    loads the shipped tables plus $RIGHTSIZE_CATALOG.

    With several ``engines`` each is measured and planned on its own and the cheapest feasible answer
    wins; the others are reported beside it (``why``) so the engine choice is visible and checkable.
    """
    if catalog is None:
        from rightsize.catalog import load_catalog

        catalog = load_catalog()
    if workload.engines == ["torch"]:
        return _plan_one(workload, store, catalog, progress, seed)
    from rightsize.models.byo import engine_ref
    from rightsize.plan.planner import plannable
    from rightsize.workflows.engine_choice import ENGINE_NAMES, pick_engine

    runs: list[tuple[str, PlanResult, dict[str, Any]]] = []
    cpu_engines = [e for e in workload.engines if e in ("onnxruntime", "openvino")]
    if cpu_engines and not any(i.accelerator is None for i in plannable(workload, catalog)):
        # the filters keep GPU instances only: a CPU engine has nothing to plan (it had ended the whole plan with
        # "no service curve matches a catalog instance")
        if len(cpu_engines) == len(workload.engines):
            raise SpecError("targets.instances", f"keeps no CPU instance, and engines {cpu_engines} run on CPUs "
                            "only; add a CPU instance or plan engines: [torch]")  # fmt: skip
        skipped = [f"engine {ENGINE_NAMES[e]}: not planned (CPU only; targets.instances keeps no CPU instance)"
                   for e in cpu_engines]  # fmt: skip
        workload = workload.model_copy(update={"engines": [e for e in workload.engines if e not in cpu_engines]})
        result, context = plan_spec(workload, store, catalog, progress, seed)
        result.why += skipped
        return result, context
    for engine in workload.engines:
        w = workload.model_copy(update={"model": engine_ref(workload.model, engine), "engines": ["torch"]})
        if engine in ("onnxruntime", "openvino"):  # CPU engines: ORT fp32 and its own int8; OpenVINO fp32
            w, _ = with_cpu_serving_precisions(w.model_copy(update={"model": workload.model}))
            allowed = ("fp32", "int8") if engine == "onnxruntime" else ("fp32",)
            precisions = [p for p in w.precisions if p in allowed] or ["fp32"]
            w = w.model_copy(update={"model": engine_ref(workload.model, engine), "devices": ["cpu"],
                                     "precisions": precisions})  # fmt: skip
        result, context = _plan_one(w, store, catalog, progress, seed)
        runs.append((engine, result, context))
    return pick_engine(runs)


def _plan_one(
    workload: Workload, store: Store, catalog: Catalog, progress: bool, seed: int
) -> tuple[PlanResult, dict[str, Any]]:
    from rightsize.errors import RunFailedError
    from rightsize.plan import plan, plan_kind

    if workload.targets is not None and plan_kind(workload.targets) == "generative":
        raise SpecError("targets.generative", "use rightsize.workflows.generate.plan_generative_spec (or `rightsize "
                        "plan SPEC`): token generation is planned by the continuous-batching simulator")  # fmt: skip
    if workload.targets is not None and plan_kind(workload.targets) == "rules":
        return plan(workload, [], catalog, seed=seed), {}
    from rightsize.estimate.projection import load_projection_model, project_curves
    from rightsize.measure.profile_source import ensure_profile
    from rightsize.plan.planner import plannable
    from rightsize.profile import batch_limit, limit_batches

    plannable(workload, catalog)  # before minutes of measuring
    t0 = time.perf_counter()
    listed = list(workload.precisions)
    workload, notes = with_cpu_serving_precisions(workload)  # int8 added for a CPU serving plan: its own note
    profile = ensure_profile(workload, store, progress=progress)
    # this machine's stored measurements on other devices do not count: `devices: [cuda]` on a CPU machine had been
    # planned from its earlier CPU sweep, "measured on this very device", with no word on it
    if not any(m.device in workload.devices for m in profile.ok()):
        elsewhere = _measured_elsewhere(workload, store, profile)
        if elsewhere is None:
            failed = [m for m in profile.measurements if m.device in workload.devices]
            if not failed:
                raise UnsupportedError(
                    f"no measurement of {workload.model} to plan from: the spec's devices "
                    f"({', '.join(workload.devices)}) could not be measured on this machine and the store holds no "
                    "measurement of this model, mode and input from another; run `rightsize bench SPEC --store FILE` "
                    "where they exist and plan with the same --store, or add cpu to devices"
                )
            reasons = sorted({m.reason or "failed" for m in failed})
            raise RunFailedError(
                f"no successful measurement of {workload.model} to plan from: {'; '.join(reasons)[:300]}"
            )
        notes.append(
            f"planned from {len(elsewhere.ok())} configs measured on another machine ({elsewhere.env.machine_label}): "
            f"none of the spec's devices ({', '.join(workload.devices)}) could be measured here"
        )
        profile = elsewhere
    others = [p for p in store.profiles(workload.model, tiny=workload.tiny) if p.env.id != profile.env.id]
    work = work_profile(workload, store)
    projection = load_projection_model()
    curves = project_curves(profile, catalog, projection, work, measured=others)
    if (limit := batch_limit(profile)) is not None:  # its forward refuses bigger batches: never batch past it
        curves = [limit_batches(c, limit) for c in curves]
    from rightsize.models.byo import engine_of

    # measured on a CPU engine (ONNX Runtime, OpenVINO; a bare .onnx runs on ONNX Runtime too, and had been planned
    # at bf16 and on GPUs, which `serve` refuses): CPUs only, at the precisions the engine runs
    if (engine := engine_of(workload.model)) != "torch":
        from rightsize.models.onnx_engine import ENGINE_PRECISIONS

        curves = [c for c in curves if c.device.startswith("cpu") and c.precision in ENGINE_PRECISIONS[engine]]
    if (why := no_int8(workload.model, profile)) is not None and any(c.precision == "int8" for c in curves):
        curves = [c for c in curves if c.precision != "int8"]
        notes.append(f"int8 not planned: {why}")
    allowed = workload.targets.precisions if workload.targets is not None else None
    if allowed is not None:
        curves = [c for c in curves if c.precision in allowed]
        if not curves:
            raise SpecError("targets.precisions", f"{', '.join(allowed)}: no curve of this model runs at "
                            "them on the catalog's hardware; add fp32")  # fmt: skip
    memory, breakdowns = memory_models(workload, store, {c.precision for c in curves})
    prep_s = time.perf_counter() - t0
    result = plan(workload, curves, catalog, memory, seed=seed, text_input="seq_len" in profile.input)
    notes += unlisted_precision(result, listed, allowed, added=[p for p in workload.precisions if p not in listed])
    notes += faster_unlisted(result, workload.precisions) if allowed is None else []
    result.assumptions["profile"] = f"{len(profile.ok())} measured configs on {profile.env.cpu_model}"
    # which stored profile: a report rendered later from the store charts this one, not the model's largest
    result.assumptions["profile_key"] = {"env": profile.env.id, "input": profile.input, "tiny": workload.tiny}
    result.assumptions["projection"] = {
        "model": projection.source,
        "bands": {k: b.to_dict() for k, b in projection.bands.items()},
        "work": "traced ops (FakeTensorMode)" if work is not None else "coarse: measured FLOPs only (trace failed)",
    }
    result.warnings += notes
    from rightsize.measure.quality import is_contended, measurement_quality

    quality = measurement_quality(profile.measurements)
    result.assumptions["measurement_quality"] = quality.to_dict()
    if quality.problems:
        result.warnings.append(f"measurements: {quality.summary}; {quality.likely_effect}")
    if quality.contended and result.recommendation is not None and result.why:
        # under the recommendation, not only in Check: on a busy machine a T4 was recommended that a quiet re-run
        # replaced with 2 x c7a.large at 40% of its price
        cpu_slow = any(m.device == "cpu" and is_contended(m) for m in profile.ok())
        flip = (
            " and a CPU plan may beat this GPU one" if cpu_slow and cpu_may_win(result, quality.worst_slowdown) else ""
        )
        n, slow = f"{quality.contended} of {quality.measured}", f"{quality.worst_slowdown:.1f}x"
        result.why.insert(1, f"the answer may change on a quiet machine: {n} local timings were disturbed (about "
                          f"{slow} slow, or more), so the plans built on them read slower than they are{flip}; re-run "
                          "`rightsize bench SPEC --fresh` when it is quiet")  # fmt: skip
    context = {"profile": profile, "curves": curves, "memory": breakdowns, "prep_s": prep_s, "catalog": catalog}
    return result, context


def cpu_may_win(result: PlanResult, slowdown: float) -> bool:
    """Re-timing on a quiet machine could plausibly put a CPU plan under this GPU recommendation: the spec's purchase
    options plan CPU rows (not all left out by a rule, as a spot-only plan's CPUs with no interruption estimate),
    and the best CPU row is within ``slowdown`` of the GPU plan: its cost (feasible), else its shortfall against
    the target. The clause had been added whatever the gap (45x the cost against timings 3.8x slow), and on a
    spot-only plan with no CPU row to plan."""
    import math

    from rightsize.plan.closest import cost_of, ruled_out, speed_of

    rec, cpu = result.recommendation, result.alternative
    if rec is None or rec.device_class != "gpu" or cpu is None or cpu.device_class != "cpu" or ruled_out(cpu):
        return False
    if cpu.feasible:
        gap = cost_of(cpu, result.kind) / max(1e-12, cost_of(rec, result.kind))
    else:
        online, job = result.target.get("online") or {}, result.target.get(result.kind) or {}
        bound = (online.get("latency") or {}).get("bound_ms") if result.kind == "online" else job.get("deadline_hours")
        took = speed_of(cpu, result.kind)
        if result.kind != "online" and cpu.runtime_hours_at_edge is not None:
            took = cpu.runtime_hours_at_edge
        gap = took / bound if bound else math.inf
    return gap <= slowdown


def _measured_elsewhere(workload: Workload, store: Store, here: Profile) -> Profile | None:
    """The newest stored profile of this model, mode and input taken on another machine, with a successful
    measurement on one of the spec's devices (a sweep benched on a GPU box, planned on a laptop)."""
    from rightsize.measure.profile_source import stored_profiles

    found = [
        p
        for p in stored_profiles(workload, store, here.input)
        if p.env.id != here.env.id and any(m.device in workload.devices for m in p.ok())
    ]
    return found[-1] if found else None


def sweep_fn(result: PlanResult, curves: list[Any]) -> Any:
    """p95 vs request rate for a candidate (the report's chart), simulated as the plan judged it: the candidate's
    own curve (its CPU worker layout), at its band's slow edge when it was sized there, under the spec's balancer and
    arrivals. The chart had taken the instance's first layout and the band's centre: at the target rate it read
    137 ms for a row the table had at 79.7 (another layout), 4.6 ms for a T4 row at 10.3 (the centre)."""
    from rightsize.plan.online import EDGE_NOTE, curve_at_edge
    from rightsize.plan.options import curve_of
    from rightsize.plan.verify import Policy, simulate_policy
    from rightsize.spec.targets import OnlineTarget

    target = OnlineTarget.model_validate(result.target["online"]) if result.target.get("online") else None

    def sweep(c: Candidate, rates: list[float]) -> list[float]:
        curve = next((k for k in curves if curve_of(k, c)), None)
        if curve is None or c.batching is None or target is None:
            return [float("nan")] * len(rates)
        if any(n.startswith(EDGE_NOTE) for n in c.notes):
            curve = curve_at_edge(curve)
        pol = Policy(c.batching.max_batch, c.batching.max_wait_ms)
        return [simulate_policy(curve, pol, max(1, c.replicas), target.model_copy(update={"rate_per_s": r}), 4000,
                                0).p95 for r in rates]  # fmt: skip

    return sweep


CPU_MEMORY_LABEL = "estimate on a CPU"  # report.data.at_planned_batch brings such a breakdown to a CPU plan's batch


def report_memory(result: PlanResult, context: dict[str, Any]) -> dict[str, Any] | None:
    """The recommended precision's memory breakdown with the GPU tiers of the catalog the plan used."""
    from rightsize.catalog import gpu_memory_tiers

    mem = context.get("memory") or {}
    rec = result.recommendation
    if rec is not None and rec.device_class == "cpu" and mem.get(f"cpu:{rec.precision}"):
        return {"breakdown": mem[f"cpu:{rec.precision}"], "label": CPU_MEMORY_LABEL, "tiers": []}  # no CUDA, no GPU
    breakdown = mem.get(rec.precision) if rec else None
    catalog = context.get("catalog")
    if breakdown and catalog is not None:  # the tiers of the catalog this plan used (a user's --catalog too)
        tiers = [{"memory_gib": gib, "names": names} for gib, names in gpu_memory_tiers(catalog)]
        return {"breakdown": breakdown, "tiers": tiers}
    return breakdown or None


def plan_record(result: PlanResult, context: dict[str, Any]) -> dict[str, Any]:
    """The plan as stored: every candidate (CPU ones too) and the evidence the report draws — curves, memory,
    environment, rate sweeps — so `rightsize report RUN` and the dashboard show what `plan --report` showed."""
    import dataclasses

    from rightsize.report.data import build_report_data

    profile = context.get("profile")
    curves = list(context.get("curves", ()))
    sweep = sweep_fn(result, curves) if result.kind == "online" else None
    memory = report_memory(result, context)
    data = build_report_data(result, profile=profile, curves=curves, memory=memory, sweep=sweep)
    return result.to_dict() | {
        "curves": [dataclasses.asdict(c) for c in curves],
        "memory": memory,
        "env": profile.env.to_dict() if profile is not None else None,
        "rate_sweeps": [dataclasses.asdict(s) for s in data.sweeps],
        "rate_sweep_note": data.sweep_note,
    }


def write_plan_report(
    result: PlanResult, path: Path, context: dict[str, Any], record: dict[str, Any] | None = None
) -> None:
    """The one-page report (HTML or Markdown by suffix) of a plan and the evidence ``plan_spec`` gathered;
    with ``record`` (``plan_record``: sweeps already simulated) the report draws from it instead of re-running."""
    try:
        from rightsize.report import write_report
    except ImportError as exc:
        raise UnsupportedError(f"report: the report module cannot load here ({exc})") from None
    if record is not None:
        write_report(record, path, profile=context.get("profile"))
        return
    write_report(
        result,
        path,
        profile=context.get("profile"),
        curves=context.get("curves", ()),
        memory=report_memory(result, context),
        sweep=sweep_fn(result, list(context.get("curves", ()))) if result.kind == "online" else None,
    )
