"""Validate a request mix: serve the plan's pools here behind the size router, load every size class at once.

    rightsize validate examples/mixed-sizes-api.yaml [--fleet plan|split|single] [--duration 10]

A spec with ``targets.online.request_mix`` is planned as one pool for every request or two pools split
by request size (``rightsize.plan.fleet``). This serves that layout on this machine and checks the
simulator that sized it (``run_sized``) against the real server:

1. Plan the spec; take the fleet plan's choice (``--fleet split`` or ``single`` forces one).
2. Serve it: a split as two CPU lanes behind ``--router size`` with the plan's crossover, each lane at
   its pool's precision when this machine measured it (else fp32); one pool as one lane. On 3+ cores the
   load generators get the first core and the lanes the rest; on 2 cores each lane gets one core and
   the generators share them (noted).
3. At each load level (a fraction of the busier lane's capacity) send every size class at its share of
   the rate at once, one open-loop ``rightsize loadtest`` child per class (Poisson each, so their sum
   is Poisson), each timing its requests from their intended send times.
4. Replay the very schedules the generators sent through ``run_sized``, lane by lane, twice: with the
   profile's service curve (the forecast) and with the batch times the server itself logged during the
   level (``GET /v1/batches``; the simulator check, free of projection error). Both add the serving
   path's own per-request overhead, measured first at a light load. Print each class's measured vs
   predicted p50/p95.
"""

from __future__ import annotations

import math
import statistics
import threading
from typing import TYPE_CHECKING, Any

import numpy as np

from rightsize.errors import RunFailedError, SpecError, UnsupportedError
from rightsize.measure.conditions import OthersBusy
from rightsize.workflows.mix_replay import Lane, percentiles_over_draws, replay_mix, served_table
from rightsize.workflows.validate_mix_report import _err, mix_slo_verdict, render_mix_report
from rightsize.workflows.validate_run import (
    BUSY_EFFECT,
    MAX_STRETCH,
    MIN_REQUESTS,
    OTHERS_BUSY,
    PROBE_LOAD,
    busy_cause,
    measure_open_loop,
    measured_busy,
    served_batches,
)

if TYPE_CHECKING:
    from rightsize.catalog import Catalog
    from rightsize.spec import Workload
    from rightsize.store import Store

__all__ = ["render_mix_report", "validate_mix"]

FLEETS = ("plan", "split", "single")
MAX_EXTRAPOLATION = 4  # largest request served here, in multiples of the largest batch this machine measured


def _layout(fleet: dict[str, Any], which: str) -> tuple[str, int | None, list[dict[str, Any]]]:
    """(layout, crossover, planned pools) for ``which`` of plan / split / single."""
    choice = fleet.get("choice", "none")
    if which == "plan":
        which = "split" if choice == "split" else "single"
    if which == "split":
        split = fleet.get("split")
        if not split:
            raise UnsupportedError(
                "validate --fleet split: the plan found no size split that meets the SLO; use --fleet single"
            )
        return "split", int(split["crossover_samples"]), [split["small"], split["large"]]
    single = fleet.get("single")
    return "single", None, [single] if single else []


def _check_extrapolation(
    largest_request: int, largest_batch: int, what: str = "the largest batch measured here"
) -> None:
    """A SpecError when the largest request is over MAX_EXTRAPOLATION x ``largest_batch`` (``what``: the largest
    batch measured here, or before the sweep the spec's largest batch size, past which none can be measured): the
    server's warm-up would allocate it."""
    if largest_request > MAX_EXTRAPOLATION * largest_batch:
        raise SpecError(
            "targets.online.request_mix",
            f"the largest request ({largest_request} samples) is over {MAX_EXTRAPOLATION}x {what} ({largest_batch}); "
            "add batch sizes up to it to batch_sizes to validate this mix on this machine",
        )


def validate_mix(
    workload: Workload,
    store: Store,
    catalog: Catalog | None = None,
    *,
    fleet: str = "plan",
    fractions: tuple[float, ...] = (0.5, 0.8),
    duration_s: float = 10.0,
    warmup_s: float = 1.0,
    progress: bool = True,
    seed: int = 0,
    min_requests: int = MIN_REQUESTS,
) -> dict[str, Any]:
    """Plan ``workload`` (a ``request_mix``), serve its pools here and compare each size class's latency."""
    import os

    from rightsize.cpus import CpuSplit
    from rightsize.loadgen.schedule import arrival_offsets_s
    from rightsize.loadgen.validation import Served, capacity_per_s, serving_cpu_ms
    from rightsize.plan.sim import service_tables
    from rightsize.profile import measured_curve
    from rightsize.serve import ServerConfig
    from rightsize.serve.config import PoolConfig
    from rightsize.serve.process import running_server_process
    from rightsize.workflows.plan import plan_spec
    from rightsize.workflows.validate import OVERHEAD_MS, SERVER_PRECISIONS, local_profile

    if fleet not in FLEETS:
        raise UnsupportedError(f"--fleet must be one of {', '.join(FLEETS)}, got {fleet!r}")
    assert workload.targets is not None and workload.targets.online is not None
    online = workload.targets.online
    mix, headroom = online.sizes(), online.headroom
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
    notes: list[str] = []
    _check_extrapolation(max(s for s, _ in mix), max(workload.batch_sizes), "the spec's largest batch size")
    result, context = plan_spec(workload, store, catalog, progress=progress, seed=seed)
    if result.fleet is None:
        raise RunFailedError("the plan of this request mix has no fleet section to validate")
    layout, crossover, planned = _layout(result.fleet, fleet)
    n_lanes = 2 if layout == "split" else 1
    cpus: CpuSplit | None = None
    if len(cores) >= n_lanes + 1:
        cpus = CpuSplit(frozenset(cores[:1]), frozenset(cores[1:]))
    else:
        notes.append(
            f"{len(cores)} core(s) for {n_lanes} lane(s) and the load generators: the generators share the lanes' "
            "cores (a busy generator slows the batches it measures)"
        )
    server_cores = len(cpus.server) if cpus is not None else len(cores)
    threads = max(1, server_cores // n_lanes)
    # the lanes' thread count, where the profile lacks it, is timed for this check alone (``local_profile``): the
    # plan checked stays the spec's, as `rightsize plan` prints it
    wanted = [p["precision"] for p in planned if p and p.get("precision") in SERVER_PRECISIONS]
    profile, timed = local_profile(workload, context["profile"], [*wanted, "fp32"], threads)
    if timed:
        notes.append(f"timed at {threads} thread(s) too, each lane's cores here: for this check only, not stored")
    fleet_choice = result.fleet["choice"] if result.fleet else "none"
    sizes = [s for s, _ in mix]
    groups = [tuple(sizes)] if crossover is None else [tuple(s for s in sizes if s < crossover),
                                                       tuple(s for s in sizes if s >= crossover)]  # fmt: skip
    names = ["all"] if crossover is None else ["small", "large"]
    lanes: list[Lane] = []
    for i, (name, group) in enumerate(zip(names, groups, strict=True)):
        pool = planned[i] if i < len(planned) else None
        precision = pool["precision"] if pool and pool.get("precision") in SERVER_PRECISIONS else "fp32"
        curve = measured_curve(profile, precision, threads=threads)
        if curve is None and precision != "fp32":
            notes.append(f"lane {name}: {precision} was not measured here at {threads} thread(s); served at fp32")
            precision, curve = "fp32", measured_curve(profile, "fp32", threads=threads)
        if curve is None:
            raise RunFailedError(
                f"no successful CPU measurement at {precision} with {threads} thread(s) here to predict lane {name} "
                "from; add fp32 to precisions"
            )
        if pool and pool.get("device_class") == "gpu":  # this CPU-only machine cannot run the GPU pool itself
            notes.append(
                f"lane {name}: planned on {pool.get('device', 'a GPU')} ({pool.get('instance', '?')}); served here "
                f"by a CPU lane ({precision}, {threads} thread(s)) and predicted from that lane's measured curve: "
                "this proves the size-aware router and the queueing model, not the GPU's speed (the projection "
                "sets that)"
            )
        lanes.append(Lane(name, group, precision, curve, pool))
    _check_extrapolation(max(sizes), max(max(lane.curve.batch_sizes) for lane in lanes))
    batch_of = [int(p["batching"]["max_batch"]) for p in planned if p and p.get("batching")]
    max_batch = max([*batch_of, 1 << math.ceil(math.log2(max(sizes)))])
    waits = [float(p["batching"]["max_wait_ms"]) for p in planned if p and p.get("batching")]
    max_wait = min(waits) if waits else 5.0
    share = dict(mix)
    # Each lane's capacity in requests/s at its classes' mean size; the busier lane sets the levels.
    lane_cap: dict[str, float] = {}
    for lane in lanes:
        lane_share = sum(share[s] for s in lane.sizes)
        mean = sum(share[s] * s for s in lane.sizes) / lane_share
        lane_cap[lane.name] = capacity_per_s(lane.curve, max_batch, max(1, round(mean))) / lane_share
    # Total requests/s at which the busier lane is full, and at most what the serving path (HTTP, parsing,
    # hand-offs on one event loop) is thought to take until the probe measures its CPU per request.
    capacity = min(*lane_cap.values(), 1000.0 / OVERHEAD_MS)
    pools = tuple(PoolConfig(lane.name, "cpu", 1, threads, precision=lane.precision) for lane in lanes)  # type: ignore[arg-type]
    precision = lanes[0].precision
    server_config = ServerConfig(
        model=workload.model, tiny=workload.tiny, seq_len=workload.input.seq_len,
        image_size=workload.input.image_size, precision=precision,  # type: ignore[arg-type]
        max_batch=max_batch, max_wait_ms=max_wait, queue_size=max(4096, max_batch), max_queue_batches=0.0,
        router="size" if crossover is not None else "cpu", crossover_batch=crossover,  # CPU lanes, also on CUDA
        pools=pools if crossover is not None else None, port=0,
        threads=None if crossover is not None else threads, workers=None if crossover is not None else 1,
    )  # fmt: skip
    gen_cpus = None if cpus is None else cpus.generator
    arrival = online.arrival if online.arrival in ("poisson", "constant") else "poisson"
    if arrival != online.arrival:
        notes.append(f"arrival {online.arrival!r} is validated with Poisson arrivals")

    def lane_batches(url: str, since: int) -> tuple[Served, dict[str, list[tuple[int, float, float]]]]:
        """The server's batch log from batch ``since``, and its (samples, busy ms, taken ms) per lane."""
        log = served_batches(url, since)
        if log is None:
            raise RunFailedError(f"the server's batch log ({url}/v1/batches) could not be read")
        rows: dict[str, list[tuple[int, float, float]]] = {}
        for (n, _, busy), pool, taken in zip(log.batches, log.pools, log.taken_ms, strict=True):
            rows.setdefault("all" if crossover is None else pool, []).append((n, busy, taken))
        return log, rows

    def busy_of(rows: dict[str, list[tuple[int, float, float]]], lane: str) -> list[tuple[int, float]]:
        return [(n, busy) for n, busy, _ in rows.get(lane, [])]

    def level(
        url: str, rate: float, level_s: float, offset: int
    ) -> tuple[dict[int, Any], dict[int, np.ndarray], dict[int, float], float | None]:
        """Send every class at its share of ``rate`` at once; (class results, class schedules in ms on one clock,
        when each class's warm-up ends on it, the share of cores other processes kept busy meanwhile)."""
        results: dict[int, Any] = {}
        failures: list[str] = []
        seeds = {s: seed + 1000 * offset + i for i, s in enumerate(sizes)}

        def one(s: int) -> None:
            try:
                results[s] = measure_open_loop(
                    url + "/v1/predict", rate * share[s], duration_s=level_s, warmup_s=warmup_s, samples=s,
                    arrival=arrival, seed=seeds[s], cpus=gen_cpus,
                )  # fmt: skip
            except RunFailedError as e:
                failures.append(str(e))

        threads_ = [threading.Thread(target=one, args=(s,)) for s in sizes]
        with OthersBusy() as others:
            for t in threads_:
                t.start()
            for t in threads_:
                t.join()
        if failures:
            raise RunFailedError(failures[0])
        if others.share is not None and others.share > OTHERS_BUSY:  # a busy machine's latency is not the plan's
            busy = f"{busy_cause(others.share)}: {BUSY_EFFECT}"
            results = {s: {**r, "valid": False, "problems": [*r.get("problems", []), busy]} for s, r in results.items()}
        schedules = {
            s: 1000.0
            * arrival_offsets_s(
                rate * share[s],
                duration_s=level_s + warmup_s,
                arrival=arrival,
                seed=seeds[s],
            )
            for s in sizes
        }
        # Each generator is its own child process and starts its clock when it is ready: put their schedules on the
        # one clock they report (perf_counter at schedule time 0), so the replay merges them as the server saw.
        starts = {s: results[s].get("schedule_start_s") for s in sizes}
        shift = dict.fromkeys(sizes, 0.0)
        if all(v is not None for v in starts.values()):
            first = min(float(v) for v in starts.values())
            shift = {s: 1000.0 * (float(starts[s]) - first) for s in sizes}
        schedules = {s: v + shift[s] for s, v in schedules.items()}
        return results, schedules, {s: shift[s] + 1000.0 * warmup_s for s in sizes}, others.share

    curve_tables = {lane.name: service_tables(lane.curve, max_batch, 1) for lane in lanes}  # the profile's
    points: list[dict[str, Any]] = []
    with running_server_process(server_config, cpus=None if cpus is None else cpus.server) as url:
        start, _ = lane_batches(url, 0)
        # Light-load probe: the serving path's own overhead (HTTP, parsing, hand-offs) per request.
        probe_rate = PROBE_LOAD * capacity
        probe_s = min(max(3.0, 60.0 / probe_rate), MAX_STRETCH * duration_s)
        m, schedules, warm_end, probe_share = level(url, probe_rate, probe_s, 0)
        probe, rows = lane_batches(url, start.next)
        cursor = probe.next
        # < 0: the model's calls x threads exceeded the server's CPU time (they waited for cores); None: no CPU read.
        # The mix's requests differ in size, so the probe's sent requests count them, not the batches' samples.
        requests = sum(len(v) for v in schedules.values())
        cpu_excess = serving_cpu_ms(start, probe, threads, 1, clamp=False, requests=requests)
        serving_ms = max(0.0, cpu_excess or 0.0)
        if serving_ms > 0 and 1000.0 / serving_ms < min(lane_cap.values()):
            capacity = 1000.0 / serving_ms
            notes.append(
                f"the serving path, not the model, bounds this server: {serving_ms:.2f} ms of CPU per request "
                f"outside the model (at most {capacity:.0f} req/s), which the planner's simulator leaves out: "
                "expect large errors; validate a heavier model or larger requests"
            )
        tables = {lane.name: served_table(busy_of(rows, lane.name), lane.curve, max_batch) for lane in lanes}
        sim = replay_mix(schedules, lanes, tables, max_batch, max_wait, warm_end, seed=seed)
        # Per class: a 32-image request's body takes far longer to receive and parse than a 1-image one's.
        overhead_ms = {
            s: max(0.0, float(m[s]["latency_ms"]["p50"]) - float(np.median(np.concatenate(sim[s]))))
            for s in sizes
            if m.get(s, {}).get("latency_ms") and any(x.size for x in sim[s])
        }
        if len(overhead_ms) < len(sizes):
            notes.append("the light-load probe gave no latency for some class: its predictions carry no overhead")
        # A contended probe's readings are kept (no quieter one is at hand), flagged: they may be the other load.
        each = ", ".join(f"{k}-sample {v:.1f} ms" for k, v in overhead_ms.items()) or "none"
        if (probe_busy := measured_busy(f"the light-load probe's serving overhead ({each}, added to every "
                                        "prediction)", probe_share)) is not None:  # fmt: skip
            if cpu_excess is not None and cpu_excess < 0:  # model time x threads past the server's CPU: 0 is used
                probe_busy += "; its serving CPU per request read below zero, so 0 is used, not a measurement"
            notes.append(probe_busy)
        # The server may run slower than its curve (the serving path on the model's cores, a VM slower this
        # minute): levels are fractions of what it can do now, or "80%" can be an overload.
        slower, served_cap = [], dict(lane_cap)
        for lane in lanes:
            logged = [(n, busy) for n, busy in busy_of(rows, lane.name) if lane.curve.t_ms(n) > 0]
            ratio = statistics.mean(busy / lane.curve.t_ms(n) for n, busy in logged) if logged else 1.0
            if ratio > 1.0:
                served_cap[lane.name] /= ratio
                slower.append(f"{lane.name} {ratio - 1:+.0%}")
        served_capacity = min(*served_cap.values(), capacity)
        if served_capacity < 0.9 * capacity:
            ran = f"at light load the lanes' batches ran slower than the curve ({', '.join(slower)})"
            contended = measured_busy(ran, probe_share)
            if contended is not None:  # maybe the other load, not the server: the levels keep the curve's capacity
                notes.append(f"{contended}; levels stay fractions of {capacity:.1f} req/s, not {served_capacity:.1f}")
            else:
                notes.append(f"{ran}: levels are fractions of {served_capacity:.1f} req/s, not {capacity:.1f}")
                lane_cap, capacity = served_cap, served_capacity
        else:
            lane_cap = served_cap
        rarest = min(share.values())
        for j, f in enumerate(fractions, start=1):
            rate = f * capacity
            level_s = min(max(duration_s, min_requests / (rate * rarest)), MAX_STRETCH * duration_s)
            m, schedules, warm_end, _ = level(url, rate, level_s, j)
            log, rows = lane_batches(url, cursor)
            cursor = log.next
            served = {lane.name: served_table(busy_of(rows, lane.name), lane.curve, max_batch) for lane in lanes}
            args = (max_batch, max_wait, warm_end, overhead_ms)
            forecast = replay_mix(schedules, lanes, curve_tables, *args, seed=seed + j)
            checked = replay_mix(schedules, lanes, served, *args, seed=seed + j)
            classes = []
            for s in sizes:
                res = m.get(s, {})
                meas = res.get("latency_ms")
                lane = next(lane for lane in lanes if s in lane.sizes)
                classes.append({
                    "samples": s, "share": share[s], "lane": lane.name, "rate_per_s": rate * share[s],
                    "sent": res.get("requests_sent"), "valid": bool(res.get("valid")),
                    "error_fraction": float(res.get("error_fraction") or 0.0),
                    "problems": [*res.get("problems", []), *res.get("warnings", [])],
                    "measured_ms": meas, "predicted_ms": percentiles_over_draws(forecast[s]),
                    "predicted_served_ms": percentiles_over_draws(checked[s]),
                })  # fmt: skip
            lane_rows = []
            for lane in lanes:
                got = rows.get(lane.name, [])
                mean_n = statistics.mean(n for n, _, _ in got) if got else None
                span = (got[-1][2] + got[-1][1] - got[0][2]) if got else 0.0  # first taken -> last answered
                busy = sum(b for _, b, _ in got) / span if span > 0 else None
                lane_rows.append({
                    "lane": lane.name, "batches": len(got), "mean_samples": mean_n,
                    "served_batch_ms": statistics.mean(b for _, b, _ in got) if got else None,
                    "curve_batch_ms": None if mean_n is None else lane.curve.t_ms(mean_n),
                    "served_sigma": float(served[lane.name][1][0]), "busy_fraction": busy,
                })  # fmt: skip
            offsets = {s: round(warm_end[s] - 1000.0 * warmup_s, 1) for s in sizes}  # generator start, ms
            points.append({"label": f"{f:.0%}", "rate_per_s": rate, "duration_s": level_s, "classes": classes,
                           "lanes": lane_rows, "generator_offsets_ms": offsets})  # fmt: skip
    compared = [c for p in points for c in p["classes"] if c["valid"] and c["error_fraction"] == 0.0]
    errors = [
        abs(e)
        for c in compared
        for e in (_err(c["predicted_served_ms"], c["measured_ms"], k) for k in ("p50", "p95"))
        if e is not None
    ]
    inside = sum(
        1
        for c in compared
        if c["measured_ms"] and c["predicted_served_ms"]
        and c["predicted_served_ms"]["p95_range"][0] <= float(c["measured_ms"]["p95"])
        <= c["predicted_served_ms"]["p95_range"][1]
    )  # fmt: skip
    return {
        "kind": "validate-mix",
        "name": workload.name,
        "model": workload.model,
        "layout": layout,
        "crossover_samples": crossover,
        "fleet_choice": fleet_choice,
        "mix": [{"samples": s, "share": p} for s, p in mix],
        "lanes": [
            {
                "name": lane.name,
                "sizes": list(lane.sizes),
                "precision": lane.precision,
                "threads": threads,
                "capacity_per_s": lane_cap[lane.name],
                "planned": lane.planned,
            }
            for lane in lanes
        ],
        "max_batch": max_batch,
        "max_wait_ms": max_wait,
        "capacity_per_s": capacity,
        "overhead_ms": overhead_ms,
        "serving_cpu_ms": serving_ms,
        "cpus": None if cpus is None else cpus.to_dict(),
        "arrival": arrival,
        "points": points,
        "served_error_pct": None
        if not errors
        else {
            "median": statistics.median(errors),
            "worst": max(errors),
            "n": len(errors),
            "p95_in_range": inside,
            "classes": len(compared),
        },
        "notes": notes,
        "slo_verdict": mix_slo_verdict(points, float(online.latency.percentile), online.latency.bound_ms, headroom),
    }
