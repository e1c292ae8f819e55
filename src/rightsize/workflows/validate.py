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
   measured), which is the test rig, not the plan. The profile is measured at that thread count too.
4. Predict each level with the planner's simulator (``rightsize.plan.sim``) on this machine's
   measured service curve at the server's thread count and the same batching, and print measured
   vs predicted p50/p95/p99.

Python: ``validate_spec(workload, store)`` and ``validate_config(server_config, curve, loads)``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from rightsize.cpus import CpuSplit, pin_process, pinned, split_cpus
from rightsize.errors import RunFailedError, SpecError, UnsupportedError

if TYPE_CHECKING:
    from rightsize.catalog import Catalog
    from rightsize.loadgen.validation import Served, ValidationPoint
    from rightsize.plan import Batching, Candidate, PlanResult
    from rightsize.plan.sim import SimResult
    from rightsize.profile import ServiceCurve
    from rightsize.serve import ServerConfig
    from rightsize.spec import Workload
    from rightsize.store import Store

SERVER_PRECISIONS = ("fp32", "bf16", "int8")  # what rightsize.serve runs on a CPU
SPREAD_SCHEDULES = 40  # other schedules of a level's length: how much one run's p95 can vary (5-95%)
PROBE_LOAD = 0.2  # of capacity: the light load at which the serving path's own overhead is measured
PROBE_REQUESTS = 60
SATURATION_LOAD = 1.25  # of capacity: the overload at which the server's own capacity is measured
SATURATION_S = 4.0  # seconds of that overload (a queue of ~1 s of work builds, then drains)
SLOWER_SERVER = 0.9  # levels follow the server's capacity when it is below this fraction of the curve's
MIN_REQUESTS = 200  # per load level, for a p95 worth comparing (MLPerf asks far more: sources.md load-generation)
MAX_STRETCH = 6  # a slow level runs up to this many times --duration to reach MIN_REQUESTS
OVERHEAD_MS = 2.0  # rough per-request cost of the HTTP server path on a small CPU (see docs/loadtesting.md)


def measure_open_loop(
    url: str,
    rate_per_s: float,
    *,
    duration_s: float,
    warmup_s: float,
    samples: int = 1,
    arrival: str = "poisson",
    seed: int = 0,
    token: str | None = None,
    cpus: frozenset[int] | None = None,
) -> dict[str, Any]:
    """``rightsize loadtest URL --rate R --json`` in a child process (on ``cpus``); returns its JSON result."""
    cmd = [
        sys.executable, "-m", "rightsize", "loadtest", url, "--rate", f"{rate_per_s:.6g}",
        "--duration", f"{duration_s + warmup_s:g}", "--warmup-s", f"{warmup_s:g}", "--arrival", arrival,
        "--samples", str(samples), "--seed", str(seed), "--max-lag-ms", "20", "--no-store", "--json",
    ]  # fmt: skip
    if token:
        cmd += ["--token", token]
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        pin_process(proc.pid, cpus)  # before it starts any thread (no preexec_fn: this process has threads)
        try:
            out, err = proc.communicate(timeout=duration_s + warmup_s + 120)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
    if proc.returncode not in (0, 1) or not out.strip():
        raise RunFailedError(f"the load generator failed (exit {proc.returncode}): {err.strip()[-300:]}")
    result: dict[str, Any] = json.loads(out)
    return result


def served_batches(url: str, since: int, token: str | None = None) -> Served | None:
    """The server's batch log from batch ``since`` on (``Served``), or None when it cannot be read."""
    import urllib.request

    from rightsize.loadgen.validation import Served

    req = urllib.request.Request(
        f"{url}/v1/batches?since={since}", headers={"Authorization": f"Bearer {token}"} if token else {}
    )
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            d = json.loads(resp.read())
        names = d["fields"]
        i_n, i_c, i_b = names.index("samples"), names.index("compute_ms"), names.index("busy_ms")
        rows = [(int(r[i_n]), float(r[i_c]), float(r[i_b])) for r in d["batches"]]
        return Served(int(d["next"]), rows, float(d["cpu_s"]) if d.get("cpu_s") is not None else None)
    except (OSError, ValueError, KeyError, TypeError):
        return None


def level_duration_s(rate_per_s: float, duration_s: float, min_requests: int = MIN_REQUESTS) -> float:
    """``duration_s``, stretched so a level sees ``min_requests`` requests, at most ``MAX_STRETCH`` × longer."""
    return min(max(duration_s, min_requests / rate_per_s), MAX_STRETCH * duration_s)


def validate_config(
    server_config: ServerConfig,
    curve: ServiceCurve,
    loads: list[tuple[str, float]],
    *,
    request_samples: int = 1,
    arrival: str = "poisson",
    duration_s: float = 10.0,
    warmup_s: float = 1.0,
    seed: int = 0,
    min_requests: int = MIN_REQUESTS,
    cpus: CpuSplit | None = None,
    now_curve: ServiceCurve | None = None,
    fractions: tuple[float, ...] = (),
    capacity: float | None = None,
) -> list[ValidationPoint]:
    """Serve ``server_config``; at each (label, rate) predict with ``curve`` and measure open-loop.

    ``fractions`` add levels at those fractions of ``capacity`` (default: the curve's), or of the
    server's own capacity when that is lower: a short overload (``SATURATION_LOAD`` × capacity for
    ``SATURATION_S``) measures how long its batches really take when it is full. A server slower than its
    curve (its HTTP path on the model's cores, a VM slower this minute) would otherwise meet "80%" as an
    overload, where p95 is set by how long the run lasts, not by the queue the simulator models.

    Each level runs ``duration_s`` seconds, longer (up to ``MAX_STRETCH`` ×) when that would give
    fewer than ``min_requests`` requests. With ``cpus`` the server runs on ``cpus.server`` (one
    intra-op thread per core unless the config says otherwise) and the generator on ``cpus.generator``.
    ``now_curve`` (the curve re-timed just before serving) adds a second prediction per level.

    Every prediction replays the level's own arrival schedule (the generator's, same seed) through the
    planner's simulator and adds the serving path's per-request overhead, measured first at a light
    load (``PROBE_LOAD`` of capacity): measured p50 minus the replayed p50 there.
    """
    from rightsize.loadgen.schedule import arrival_offsets_s
    from rightsize.loadgen.validation import Replay, ValidationPoint, capacity_per_s, replay, serving_cpu_ms
    from rightsize.profile import Latency
    from rightsize.serve import running_server

    points: list[ValidationPoint] = []
    # The simulator serves every request; a server that refuses some (admission 503s) would report the
    # latency of only those it kept, the fast ones. So the validated server admits everything (its
    # queue bound stays as a safety net) and a level with errors is marked not comparable.
    server_config = replace(server_config, max_queue_batches=0.0, slo_ms=None)
    if cpus is not None and server_config.threads is None:
        server_config = replace(server_config, threads=len(cpus.server) // (server_config.workers or 1) or 1)
    workers = server_config.workers or 1
    token = server_config.token
    batching = Replay(workers, server_config.max_batch, server_config.max_wait_ms)

    def schedule_ms(rate: float, level_s: float, offset: int = 0) -> Any:
        """The generator's intended send times (ms) for a level: the same draw ``rightsize loadtest`` makes."""
        return 1000.0 * arrival_offsets_s(rate, duration_s=level_s + warmup_s, arrival=arrival, seed=seed + offset)  # type: ignore[arg-type]

    def predict(c: ServiceCurve, rate: float, level_s: float, ratios: Any = None) -> SimResult:
        return replay(c, rate, schedule_ms(rate, level_s), ratios, batching, request_samples, warmup_s)

    cursor = 0  # the server's next batch number; its warm-up batches are not logged

    def measure(rate: float, level_s: float) -> tuple[dict[str, Any], list[tuple[int, float, float]], float | None]:
        """(load result, the level's batches, serving CPU ms per request outside the model)."""
        nonlocal cursor
        before = served_batches(base_url, cursor, token)  # what ran since the last level: not this one's
        if before is not None:
            cursor = before.next
        m = measure_open_loop(
            base_url + "/v1/predict", rate, duration_s=level_s, warmup_s=warmup_s, samples=request_samples,
            arrival=arrival, seed=seed, token=token, cpus=None if cpus is None else cpus.generator,
        )  # fmt: skip
        after = served_batches(base_url, cursor, token) if before is not None else None
        if before is None or after is None:
            return m, [], None
        cursor = after.next
        return m, after.batches, serving_cpu_ms(before, after, server_config.threads or 1, request_samples)

    def with_serving_cpu(c: ServiceCurve, cpu_ms: float) -> ServiceCurve:
        """The curve stretched by the serving path's CPU, which runs on the model's cores: + cpu_ms per request."""
        pairs = zip(c.batch_sizes, c.latency_ms, strict=True)
        return replace(c, latency_ms=tuple(t + cpu_ms * b / request_samples for b, t in pairs))

    def ratios_of(batches: list[tuple[int, float, float]]) -> Any:
        """Each served batch's worker-busy time over the curve's t(its samples): the spread it really had."""
        import numpy as np

        r = [busy / curve.t_ms(n) for n, _, busy in batches if busy > 0 and curve.t_ms(n) > 0]
        return np.asarray(r) if r else None

    with pinned(None if cpus is None else cpus.server), running_server(server_config) as base_url:
        probe_rate = PROBE_LOAD * workers * capacity_per_s(curve, server_config.max_batch, request_samples)
        probe_s = min(max(2.0, PROBE_REQUESTS / probe_rate), MAX_STRETCH * duration_s)
        m, batches, cpu_ms = measure(probe_rate, probe_s)
        serving_ms = cpu_ms or 0.0
        forecast_curve = with_serving_cpu(curve, serving_ms)
        now_forecast = None if now_curve is None else with_serving_cpu(now_curve, serving_ms)
        overhead_ms, probe_note = 0.0, None
        lat, ratios = m.get("latency_ms"), ratios_of(batches)
        if lat and ratios is not None:
            overhead_ms = max(0.0, float(lat["p50"]) - predict(curve, probe_rate, probe_s, ratios).latency.p50)
        else:
            probe_note = "the light-load probe gave no latency: predictions carry no serving overhead"
        curve_capacity = workers * capacity_per_s(curve, server_config.max_batch, request_samples)
        level_capacity = capacity or curve_capacity
        capacity_note = None
        if fractions:
            _, batches, _ = measure(SATURATION_LOAD * level_capacity, min(SATURATION_S, MAX_STRETCH * duration_s))
            busy, expected = sum(b for _, _, b in batches), sum(curve.t_ms(n) for n, _, _ in batches)
            if busy > 0 and expected > 0 and curve_capacity * expected / busy < SLOWER_SERVER * level_capacity:
                served_capacity = curve_capacity * expected / busy
                capacity_note = (
                    f"under overload the server's batches took {busy / expected - 1:+.0%} vs the curve's t(b): "
                    f"levels are fractions of its own capacity, {served_capacity:.1f}/s, not {level_capacity:.1f}/s"
                )
                level_capacity = served_capacity
                over = [label for label, rate in loads if rate > 0.95 * served_capacity]
                if over:  # an overload measures how long the run lasted, not the plan
                    capacity_note += f"; {', '.join(over)} above it, not measured"
                    loads = [(label, rate) for label, rate in loads if label not in over]
        levels = [(label, rate, False) for label, rate in loads]
        levels += [(f"{f:.0%}", f * level_capacity, True) for f in fractions]
        for label, rate, of_capacity in levels:
            level_s = level_duration_s(rate, duration_s, min_requests)
            forecast = predict(forecast_curve, rate, level_s)
            predicted_now = None
            if now_forecast is not None:
                predicted_now = predict(now_forecast, rate, level_s).latency.shifted(overhead_ms)
            # How much one run of this length varies: the forecast's p95 over other schedules of the level.
            others = sorted(
                replay(forecast_curve, rate, schedule_ms(rate, level_s, 1 + j), None, batching, request_samples,
                       warmup_s, draws=1).latency.p95
                for j in range(SPREAD_SCHEDULES)
            )  # fmt: skip
            m, batches, _ = measure(rate, level_s)
            served_batch = served_ms = None
            if batches:
                served_batch = sum(n for n, _, _ in batches) / len(batches)
                served_ms = sum(c for _, c, _ in batches) / len(batches)
            ratios = ratios_of(batches)
            predicted_served = None
            if ratios is not None:
                predicted_served = predict(curve, rate, level_s, ratios).latency.shifted(overhead_ms)
            lat = m.get("latency_ms")
            notes = [*m.get("problems", []), *m.get("warnings", [])]
            points.append(
                ValidationPoint(
                    label=label,
                    rate_per_s=rate,
                    utilization=forecast.utilization,
                    predicted_ms=forecast.latency.shifted(overhead_ms),
                    measured_ms=Latency.from_dict(lat) if lat else None,
                    predicted_mean_batch=forecast.mean_batch,
                    achieved_rate_per_s=float(m.get("achieved_rate_per_s") or 0.0),
                    error_fraction=float(m.get("error_fraction") or 0.0),
                    valid=bool(m.get("valid")),
                    notes=[n for n in (probe_note, capacity_note if of_capacity else None) if n] + notes,
                    served_mean_batch=served_batch,
                    served_batch_ms=served_ms,
                    curve_batch_ms=None if served_batch is None else curve.t_ms(served_batch),
                    predicted_now_ms=predicted_now,
                    predicted_served_ms=predicted_served,
                    overhead_ms=overhead_ms,
                    serving_cpu_ms=serving_ms,
                    predicted_p95_range_ms=[others[len(others) // 20], others[-1 - len(others) // 20]],
                    capacity_per_s=level_capacity if of_capacity else None,
                )
            )
    return points


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
    from rightsize.serve import ServerConfig
    from rightsize.workflows.plan import plan_spec

    if workload.targets is None or workload.targets.online is None:
        raise SpecError("targets.online", "validate needs an online target (rate_per_s and a latency bound)")
    online = workload.targets.online
    cpus = split_cpus() if isolate else None
    server_cores = None if cpus is None else len(cpus.server)
    if server_cores is not None and server_cores not in workload.threads:
        workload = workload.model_copy(update={"threads": [*workload.threads, server_cores]})
    result, context = plan_spec(workload, store, catalog, progress=progress, seed=seed)
    if result.model != workload.model:  # the planner chose another engine (ort:…): validate that one
        workload = workload.model_copy(update={"model": result.model, "engines": ["torch"]})
    profile = context["profile"]
    cand, batching, precision, why = pick_local_candidate(result, lambda p: measured_curve(profile, p) is not None)
    # The plan's CPU layout (k workers x t threads), scaled to the server's cores here: t threads per
    # worker (at most every server core) and as many workers as fit.
    server_threads, workers = server_cores, 1
    if server_cores is not None and cand.threads_per_worker:
        server_threads = min(cand.threads_per_worker, server_cores)
        workers = max(1, server_cores // server_threads)
        if server_threads not in workload.threads:
            workload = workload.model_copy(update={"threads": [*workload.threads, server_threads]})
            result, context = plan_spec(workload, store, catalog, progress=progress, seed=seed)
    curve = measured_curve(context["profile"], precision, threads=server_threads)
    if curve is None:
        raise RunFailedError(
            f"no successful CPU measurement at {precision} with {server_threads or 'all'} threads here to predict "
            "from; add the precision to precisions"
        )
    notes: list[str] = []
    now = (
        retime_curve(workload, precision, curve.batch_sizes, server_threads, None if cpus is None else cpus.server)
        if retime
        else None
    )
    if retime and now is None:
        notes.append("re-timing the served configuration failed; only the profile's prediction is shown")
    profile_capacity = workers * capacity_per_s(curve, batching.max_batch, online.request_samples)
    # Load levels are fractions of what the server can do now: on a VM whose speed drifted since the
    # profile, "80%" of a stale capacity can be an overload.
    capacity = (
        profile_capacity if now is None else workers * capacity_per_s(now, batching.max_batch, online.request_samples)
    )
    if now is not None and abs(capacity / profile_capacity - 1) > 0.1:
        notes.append(
            f"this machine is {capacity / profile_capacity - 1:+.0%} off the profile's speed now "
            f"(capacity {capacity:.1f}/s re-timed vs {profile_capacity:.1f}/s profiled); levels use the re-timed one"
        )
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
        for label, rate in [*loads, *((f"{f:.0%}", f * capacity) for f in fractions)]
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
    server_config = ServerConfig(
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
        threads=server_threads,
        queue_size=max(1024, batching.max_batch),
        port=0,
    )
    points = validate_config(
        server_config, curve, loads, request_samples=online.request_samples, arrival=arrival,
        duration_s=duration_s, warmup_s=warmup_s, seed=seed, cpus=cpus, now_curve=now, fractions=fractions,
        capacity=capacity,
    )  # fmt: skip
    planned = cand.latency
    return {
        "kind": "validate",
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


def render_report(report: dict[str, Any]) -> str:
    from rightsize.loadgen.validation import ValidationPoint, render_points

    c, local = report["candidate"], report["local"]
    lines = [
        f"validate {report['name']} ({report['model']}): serving {c['precision']} with max_batch {c['max_batch']}, "
        f"max_wait {c['max_wait_ms']:g} ms: {c['why']}",
        f"local capacity {local['capacity_per_s']:.1f}/s (measured t(b) at b={local['batch_sizes']}"
        + (f", {local['threads']} thread(s)" if local.get("threads") else "")
        + "); "
        f"plan: {c['replicas']} replica(s), {local['per_replica_rate_per_s']:.1f}/s each; "
        f"{report['arrival']} arrivals, >= {report['duration_s']:g} s per level",
    ]
    if local.get("cpus"):
        lines.append(f"cores: server {local['cpus']['server']}, load generator {local['cpus']['generator']}")
    points = [ValidationPoint.from_dict(p) for p in report["points"]]
    lines.append(render_points(points))
    lines += [f"note: {n}" for n in report["notes"]]
    return "\n".join(lines)
