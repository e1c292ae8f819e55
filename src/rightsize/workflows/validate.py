"""The validate workflow: serve the plan's locally runnable configuration, load it, compare with the prediction.

    rightsize validate examples/sentiment-api.yaml [--duration 10] [--loads 0.5,0.8]

1. Plan the spec (``rightsize.workflows.plan.plan_spec``: measures this machine when the store lacks it).
2. Take the recommendation, or the best CPU candidate when it needs a GPU this machine lacks, and
   serve its model, precision and batching (max_batch, max_wait_ms) here with one worker
   (``rightsize.serve.running_server``).
3. Drive it open-loop (``rightsize loadtest`` in a child process, so the generator shares no GIL
   with the server) at the plan's per-replica rate and at 50% / 80% of this machine's capacity: the
   re-timed curve's, or the server's own when a short overload shows its batches run slower than that.
   On a machine with 2+ cores the generator is pinned to the first core and the server to the rest
   (``split_cpus``), and the model runs one intra-op thread per server core: a generator sharing the
   model's cores slows every batch (2 cores: int8 DistilBERT batches took 35-46% longer than
   measured), which is the test rig, not the plan. A thread count the profile lacks is timed for this
   check alone, not stored (``local_profile``): the plan checked is the spec's, as ``rightsize plan`` prints it.
4. Predict each level with the planner's simulator (``rightsize.plan.sim``) on this machine's
   measured service curve at the server's thread count and the same batching, and print measured
   vs predicted p50/p95/p99.

Python: ``validate_spec(workload, store)``; one served configuration's levels are
``rightsize.workflows.validate_run.validate_config(server_config, curve, loads)``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from rightsize.cpus import split_cpus
from rightsize.errors import RunFailedError, SpecError, UnsupportedError
from rightsize.workflows.validate_run import (
    MAX_STRETCH,
    MIN_REQUESTS,
    fraction_levels,
    level_duration_s,
    validate_config,
)

if TYPE_CHECKING:
    from rightsize.catalog import Catalog
    from rightsize.loadgen.validation import ValidationPoint
    from rightsize.plan import Batching, Candidate, PlanResult
    from rightsize.profile import Profile, ServiceCurve
    from rightsize.serve import ServerConfig
    from rightsize.spec import Workload
    from rightsize.store import Store

SERVER_PRECISIONS = ("fp32", "bf16", "int8")  # what rightsize.serve runs on a CPU
OVERHEAD_MS = 2.0  # rough per-request cost of the HTTP server path on a small CPU (see docs/loadtesting.md)


def retime_curve(
    workload: Workload, precision: str, batch_sizes: tuple[int, ...], threads: int | None, cpus: frozenset[int] | None
) -> ServiceCurve | None:
    """The served configuration's t(b) timed now, in isolated children on ``cpus`` (not stored).

    A shared VM's speed drifts by tens of percent over minutes (2-core VM here: mobilenet_v2 at one
    thread timed 27.6 ms, then 39.2 ms, an hour apart), and near saturation p95 amplifies that: this
    is the curve for the minute the load runs in.
    """
    from rightsize.measure.config import expand
    from rightsize.measure.runner import run_isolated
    from rightsize.models import workload_model
    from rightsize.profile import Environment, Profile, measured_curve

    w = workload.model_copy(
        update={
            "mode": "inference", "devices": ["cpu"], "precisions": [precision], "threads": [threads],
            "batch_sizes": list(batch_sizes),
        }
    )  # fmt: skip
    configs, _ = expand(w, workload_model(w).kind, env_id="validate-now", has_cuda=False)
    now = Profile(w.model, w.mode, {}, Environment("validate-now"), tuple(run_isolated(c, cpus=cpus) for c in configs))
    curve = measured_curve(now, precision, threads=threads)
    return None if curve is None else replace(curve, device="cpu:now", source="re-timed before serving")


def local_profile(
    workload: Workload, profile: Profile, precisions: Sequence[str], threads: int | None
) -> tuple[Profile, bool]:
    """``profile`` with ``precisions`` at ``threads`` timed now where it lacks them (the server's core count here),
    and whether any was. They are not stored: added to the spec and stored, they had entered every later plan of it
    (the plan's whole stored profile), so validate checked, and left behind, a plan the user never read: a busy
    machine's 1-thread timings turned "2 x c7a.large (1x2t, fp32)" into "1 x c7a.xlarge (4x1t, int8)"."""
    from rightsize.measure.sweep import run_sweep
    from rightsize.profile import measured_curve

    missing = [p for p in dict.fromkeys(precisions) if measured_curve(profile, p, threads=threads) is None]
    if threads is None or not missing:
        return profile, False
    w = workload.model_copy(update={"mode": "inference", "devices": ["cpu"], "precisions": missing,
                                    "threads": [threads]})  # fmt: skip
    swept = run_sweep(w, None)
    return replace(profile, measurements=(*profile.measurements, *swept.measurements)), True


def _other_engines_cpu_plan(result: PlanResult) -> str | None:
    """The GPU recommendation's instance when the best CPU plan beside it runs on another engine (a PyTorch T4 pick
    with an ONNX Runtime c7a.large plan), else None."""
    rec, alt = result.recommendation, result.alternative
    if rec is None or rec.device_class != "gpu" or alt is None or alt.device_class != "cpu" or not alt.feasible:
        return None
    return rec.instance if result.alternative_model not in (None, result.model) else None


def pick_local_candidate(
    result: PlanResult, measured: Callable[[str], bool] | None = None
) -> tuple[Candidate, Batching, str, str]:
    """What to serve here: (candidate, batching, precision, why).

    The recommendation when it runs on a CPU; else the best CPU candidate the planner gave a batching
    policy; else the recommendation's (or best candidate's) batching on this CPU at fp32 when its
    precision does not run on a CPU (a GPU pick, or no CPU candidate met the SLO). ``measured(precision)``
    says whether this machine measured a precision: a CPU pick at a precision only projected here
    (int8 extrapolated from fp32) gives way to the best CPU candidate at a measured one.
    """
    from rightsize.plan import Batching

    def here(c: Candidate) -> bool:
        return measured is None or measured(c.precision)

    rec = result.recommendation
    if rec is not None and rec.device_class == "cpu" and rec.batching is not None and here(rec):
        return rec, rec.batching, rec.precision, f"the recommendation ({rec.instance})"
    why = "no plan was feasible" if rec is None else f"the recommendation ({rec.instance}) needs a GPU"
    if rec is not None and rec.device_class == "cpu":
        why = f"the recommendation ({rec.instance}, {rec.precision}) is at a precision not measured here"
    cpu = [c for c in result.candidates if c.device_class == "cpu" and c.batching is not None and here(c)]
    if cpu:  # candidates are ranked: feasible first, by cost
        best = cpu[0]
        assert best.batching is not None
        return best, best.batching, best.precision, f"the best CPU candidate ({best.instance}); {why}"
    ref = rec or next((c for c in result.candidates if c.batching is not None), None)
    if ref is None or ref.batching is None:
        if not result.candidates:
            raise UnsupportedError("the plan has no candidate to validate; check the spec's targets and catalog")
        ref = result.candidates[0]
        batching = Batching(max_batch=8, max_wait_ms=2.0)
    else:
        batching = ref.batching
    precision = ref.precision if ref.precision in SERVER_PRECISIONS else "fp32"
    return ref, batching, precision, f"{ref.instance}'s batching on this CPU at {precision}; {why}, no CPU plan"


def local_server_config(
    workload: Workload, precision: str, batching: Batching, workers: int, threads: int | None
) -> ServerConfig:
    """The server ``validate`` runs here: the plan's layout and batching on this machine's CPU only. The curve it
    checks is this CPU's, so even on a CUDA machine no GPU pool joins (the default router there is hybrid)."""
    from rightsize.serve import ServerConfig

    return ServerConfig(
        model=workload.model,
        tiny=workload.tiny,
        seq_len=workload.input.seq_len,
        image_size=workload.input.image_size,
        sample_shape=tuple(workload.input.shape) if workload.input.shape else None,
        input_dtype="int64" if workload.input.dtype == "int64" else None,
        input_max=workload.input.token_vocab(),
        precision=precision,  # type: ignore[arg-type]  # one of SERVER_PRECISIONS
        max_batch=batching.max_batch,
        max_wait_ms=batching.max_wait_ms,
        workers=workers,  # the plan's layout on this machine's server cores
        threads=threads,
        queue_size=max(1024, batching.max_batch),
        port=0,
        router="cpu",
    )


def speed_note(capacity: float, profile_capacity: float) -> str:
    """The note for a machine whose re-timed capacity drifted from the profile's, worded by direction: "+18% off the
    profile's speed" read as slower when it was faster."""
    change = capacity / profile_capacity - 1
    return (
        f"this machine is {abs(change):.0%} {'faster' if change > 0 else 'slower'} now than when profiled "
        f"(capacity {capacity:.1f}/s re-timed vs {profile_capacity:.1f}/s profiled); levels use the re-timed one"
    )


def validate_spec(
    workload: Workload,
    store: Store,
    catalog: Catalog | None = None,
    *,
    fractions: tuple[float, ...] = (0.5, 0.8),
    duration_s: float = 10.0,
    warmup_s: float = 1.0,
    progress: bool = True,
    seed: int = 0,
    isolate: bool = True,
    retime: bool = True,
) -> dict[str, Any]:
    """Plan ``workload``, serve the chosen candidate locally, and compare measured with predicted latency.

    ``isolate``: pin the load generator and the server to separate cores (``split_cpus``); the spec's
    ``threads`` gain the server's core count so the profile has that service curve. ``retime``: time
    the served configuration again just before serving and predict from that curve too.
    """
    from rightsize.loadgen.validation import capacity_per_s
    from rightsize.profile import measured_curve
    from rightsize.workflows.plan import plan_spec

    if workload.targets is None or workload.targets.online is None:
        raise SpecError("targets.online", "validate needs an online target (rate_per_s and a latency bound)")
    online = workload.targets.online
    if online.request_mix is not None:
        raise UnsupportedError("validate_spec serves one request size; a request_mix is validate_mix's")
    cpus = split_cpus() if isolate else None
    server_cores = None if cpus is None else len(cpus.server)
    spec_threads = ", ".join("all cores" if t is None else str(t) for t in workload.threads)
    result, context = plan_spec(workload, store, catalog, progress=progress, seed=seed)  # the spec's, as `plan` reads
    if result.model != workload.model:  # the planner chose another engine (ort:…): validate that one
        workload = workload.model_copy(update={"model": result.model, "engines": ["torch"]})
    gpu_pick = _other_engines_cpu_plan(result)
    notes: list[str] = []
    printed = None  # the best CPU plan `plan` printed, when another engine's plan is served
    if gpu_pick is not None:  # the best CPU plan printed runs on another engine: serve that one, as printed (the
        # GPU pick's own engine had been served, at fp32 with the GPU's batching, "no CPU plan" said beside it)
        printed = result.alternative
        workload = workload.model_copy(update={"model": result.alternative_model, "engines": ["torch"]})
        result, context = plan_spec(workload, store, catalog, progress=progress, seed=seed)
    profile = context["profile"]
    cand, batching, precision, why = pick_local_candidate(result, lambda p: measured_curve(profile, p) is not None)
    if gpu_pick is not None and cand.device_class == "cpu":
        from rightsize.models.byo import engine_of
        from rightsize.workflows.engine_choice import ENGINE_NAMES

        why = (f"the best CPU plan ({cand.instance}, engine {ENGINE_NAMES[engine_of(workload.model)]}); the "
               f"recommendation ({gpu_pick}) needs a GPU")  # fmt: skip
    if printed is not None and plan_words(printed) != plan_words(cand):  # re-planned: say what changed, old -> new
        notes.append(f"the plan changed: `rightsize plan` printed {plan_words(printed)} as the best CPU plan; planned "
                     f"on its engine alone it is {plan_words(cand)}, checked here")  # fmt: skip
    # The plan's CPU layout (k workers x t threads), scaled to the server's cores here: t threads per
    # worker (at most every server core) and as many workers as fit.
    server_threads, workers = server_cores, 1
    if server_cores is not None and cand.threads_per_worker:
        server_threads = min(cand.threads_per_worker, server_cores)
        workers = max(1, server_cores // server_threads)
    profile, timed = local_profile(workload, profile, (precision,), server_threads)
    curve = measured_curve(profile, precision, threads=server_threads)
    if curve is None:
        raise RunFailedError(
            f"no successful CPU measurement at {precision} with {server_threads or 'all'} threads here to predict "
            "from; add the precision to precisions"
        )
    if timed:  # the plan checked is the spec's; this config only predicts this server's levels
        notes.append(f"timed {precision} at {server_threads} thread(s) too, the cores this server has here (the spec "
                     f"lists threads {spec_threads}): for this check only, not stored, so the plan checked is the "
                     "spec's, as `rightsize plan` prints it")  # fmt: skip
    now = (
        retime_curve(workload, precision, curve.batch_sizes, server_threads, None if cpus is None else cpus.server)
        if retime
        else None
    )
    if retime and now is None:
        notes.append("re-timing the served configuration failed; only the profile's prediction is shown")
    layout = (cand.workers_per_instance, cand.threads_per_worker)
    if server_cores is not None and cand.threads_per_worker and layout != (workers, server_threads):
        notes.append(
            f"the plan runs {layout[0]} worker(s) x {layout[1]} thread(s) per {cand.instance}; this server has "
            f"{server_cores} core(s) of its own here, so it serves {workers} worker(s) x {server_threads} thread(s): "
            "it checks the batching and the queueing model at that layout, the projection sets the instance's speed"
        )
    profile_capacity = workers * capacity_per_s(curve, batching.max_batch, online.request_samples)
    # Load levels are fractions of what the server can do now: on a VM whose speed drifted since the
    # profile, "80%" of a stale capacity can be an overload.
    capacity = (
        profile_capacity if now is None else workers * capacity_per_s(now, batching.max_batch, online.request_samples)
    )
    if now is not None and abs(capacity / profile_capacity - 1) > 0.1:
        notes.append(speed_note(capacity, profile_capacity))
    per_replica = online.rate_per_s / max(1, cand.replicas) * workers  # this server runs `workers` replicas
    loads: list[tuple[str, float]] = []
    if per_replica <= 0.95 * capacity:
        loads.append(("planned", per_replica))
    else:
        notes.append(
            f"the plan's per-replica rate {per_replica:.1f}/s is above 95% of this machine's capacity "
            f"({capacity:.1f}/s; {cand.instance} is faster): measured at fractions of local capacity only"
        )
    few = [
        label
        for label, rate in [*loads, *fraction_levels(fractions, capacity)]
        if rate * level_duration_s(rate, duration_s) < MIN_REQUESTS - 0.5
    ]
    if few:
        notes.append(
            f"fewer than {MIN_REQUESTS} requests at {', '.join(few)} even at {MAX_STRETCH}× --duration: "
            "percentiles there are rough; raise --duration"
        )
    if curve.t_ms(online.request_samples) < OVERHEAD_MS:
        notes.append(
            f"t({online.request_samples}) = {curve.t_ms(online.request_samples):.2f} ms is below the server's own "
            f"per-request overhead (~{OVERHEAD_MS:g} ms of HTTP, JSON and hand-offs, not in the planner's model): "
            "expect large errors; validate a heavier model or input"
        )
    arrival = online.arrival if online.arrival in ("poisson", "constant") else "poisson"
    if arrival != online.arrival:
        notes.append(f"arrival {online.arrival!r} is validated with Poisson arrivals")
    server_config = local_server_config(workload, precision, batching, workers, server_threads)
    points = validate_config(
        server_config, curve, loads, request_samples=online.request_samples, arrival=arrival,
        duration_s=duration_s, warmup_s=warmup_s, seed=seed, cpus=cpus, now_curve=now, fractions=fractions,
        capacity=capacity,
    )  # fmt: skip
    planned = cand.latency
    return {
        "kind": "validate",
        "slo_verdict": slo_verdict(points, online.latency.percentile, online.latency.bound_ms, cand.instance)
        if cand.feasible
        else None,  # no plan: nothing to judge at "the plan's per-replica rate"
        "name": workload.name,
        "model": workload.model,
        "candidate": {
            "instance": cand.instance,
            "device": cand.device,
            "precision": precision,
            "planned_precision": cand.precision,
            "feasible": cand.feasible,
            "replicas": cand.replicas,
            "layout": f"{cand.workers_per_instance}x{cand.threads_per_worker}" if cand.threads_per_worker else None,
            "max_batch": batching.max_batch,
            "max_wait_ms": batching.max_wait_ms,
            "planned_latency_ms": None
            if planned is None
            else {"p50": planned.p50, "p95": planned.p95, "p99": planned.p99},
            "why": why,
        },
        "local": {
            "cpus": None if cpus is None else cpus.to_dict(),
            "threads": server_threads,
            "workers": workers,
            "capacity_per_s": capacity,
            "level_capacity_per_s": next((p.capacity_per_s for p in points if p.capacity_per_s), capacity),
            "profile_capacity_per_s": profile_capacity,
            "per_replica_rate_per_s": per_replica,
            "batch_sizes": list(curve.batch_sizes),
            "latency_ms": list(curve.latency_ms),
            "cv": list(curve.cv),
            "retimed_latency_ms": None if now is None else list(now.latency_ms),
        },
        "arrival": arrival,
        "duration_s": duration_s,
        "points": [p.to_dict() for p in points],
        "notes": notes,
    }


def plan_words(c: Candidate) -> str:
    """ "2 x c7a.large (1x2t, fp32)": a plan as the user compares it."""
    from rightsize.plan.fleet import replicas_on

    layout = f"{c.workers_per_instance}x{c.threads_per_worker}t, " if c.threads_per_worker else ""
    return f"{replicas_on(c.replicas, c.count, c.instance)} ({layout}{c.precision})"


def slo_verdict(points: Sequence[ValidationPoint], percentile: float, bound_ms: float, instance: str) -> str | None:
    """The spec's SLO judged on the level at the plan's per-replica rate ("planned"), as measured here: whether
    the server met it, with what it stands in for (None without that level, or without a measurement there)."""
    from rightsize.loadgen.validation import MAX_ERROR_FRACTION

    level = next((p for p in points if p.label == "planned"), None)
    measured = None if level is None or level.measured_ms is None else level.measured_ms.at(percentile)
    if level is None or measured is None:
        return None
    from rightsize.workflows.validate_run import BUSY_EFFECT

    if busy := next((n for n in level.notes if n.endswith(BUSY_EFFECT)), None):
        return f"SLO not judged here: {busy.removesuffix(': ' + BUSY_EFFECT)}"  # neither met nor missed by the plan
    ok = measured <= bound_ms and level.valid and level.error_fraction <= MAX_ERROR_FRACTION
    word = "met" if ok else "missed"
    why = "" if ok or measured > bound_ms else " (the run was invalid or dropped requests)"
    return (f"SLO {word} here: p{percentile:g} {measured:.1f} ms against {bound_ms:g} ms at the plan's per-replica "
            f"rate ({level.rate_per_s:.1f}/s){why}; this machine stands in for {instance}, whose own speed the "
            "projection sets")  # fmt: skip


def render_report(report: dict[str, Any]) -> str:
    from rightsize.loadgen.validation import ValidationPoint, render_points

    c, local = report["candidate"], report["local"]
    plan_words = (f"plan: {c['replicas']} replica(s), {local['per_replica_rate_per_s']:.1f}/s each; "
                  if c.get("feasible", True) else "plan: none meets the target; ")  # fmt: skip
    lines = [
        f"validate {report['name']} ({report['model']}): serving {c['precision']} with max_batch {c['max_batch']}, "
        f"max_wait {c['max_wait_ms']:g} ms: {c['why']}",
        f"local capacity {local['capacity_per_s']:.1f}/s (measured t(b) at b={local['batch_sizes']}"
        + (f", {local['threads']} thread(s)" if local.get("threads") else "")
        + "); "
        + plan_words
        + f"{report['arrival']} arrivals, >= {report['duration_s']:g} s per level",
    ]
    if not c.get("feasible", True):  # it read "plan: 0 replica(s)", the verdict buried mid-line
        lines.insert(0, "no plan meets this spec's target (`rightsize plan` says why): the levels below check the "
                     "simulator on this server, not a plan")  # fmt: skip
    if local.get("cpus"):
        lines.append(f"cores: server {local['cpus']['server']}, load generator {local['cpus']['generator']}")
    points = [ValidationPoint.from_dict(p) for p in report["points"]]
    lines.append(render_points(points))
    if report.get("slo_verdict"):
        lines.append(report["slo_verdict"])
    lines += [f"note: {n}" for n in report["notes"]]
    return "\n".join(lines)
