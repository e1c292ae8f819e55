"""One served configuration, level by level: measure open-loop, predict each level with the simulator.

The part of ``rightsize validate`` that runs a server (``validate_config``): a light-load probe for the
serving path's own overhead, a short overload for the server's own capacity when fraction levels are
asked for, then each level measured by ``rightsize loadtest`` in a child process and predicted three
ways (the profile's curve, the re-timed one, and the batch times the server really had). The spec-level
workflow around it (plan, pick a candidate, re-time) is ``rightsize.workflows.validate``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from rightsize.cpus import CpuSplit, pin_process, pinned
from rightsize.errors import RunFailedError
from rightsize.measure.conditions import MAY_BE_LOAD, OthersBusy

if TYPE_CHECKING:
    from rightsize.loadgen.validation import Served, ValidationPoint
    from rightsize.plan.sim import SimResult
    from rightsize.profile import ServiceCurve
    from rightsize.serve import ServerConfig

SPREAD_SCHEDULES = 40  # other schedules of a level's length: how much one run's p95 can vary (5-95%)
PROBE_LOAD = 0.2  # of capacity: the light load at which the serving path's own overhead is measured
PROBE_REQUESTS = 60
SATURATION_LOAD = 1.25  # of capacity: the overload at which the server's own capacity is measured
SATURATION_S = 4.0  # seconds of that overload (a queue of ~1 s of work builds, then drains)
SLOWER_SERVER = 0.9  # levels follow the server's capacity when it is below this fraction of the curve's
MIN_REQUESTS = 200  # per load level, for a p95 worth comparing (MLPerf asks far more: sources.md load-generation)
MAX_STRETCH = 6  # a slow level runs up to this many times --duration to reach MIN_REQUESTS
OTHERS_BUSY = 0.25  # of this machine's cores kept busy by other processes during a level: it is not comparable
BUSY_EFFECT = "its latency is this machine's load, not the plan's: run it again on a quiet machine"


def busy_cause(share: float) -> str:
    """The first half of a busy level's note (``slo_verdict`` quotes it): how busy other processes kept it."""
    return f"other processes kept {share:.0%} of this machine's cores busy during this level"


def busy_while(share: float | None) -> str | None:
    """The phrase "while other processes kept 83% of this machine's cores busy" when ``share`` (``OthersBusy``) is
    over ``OTHERS_BUSY``, else None: what the server did then may be this machine's load, not its own."""
    if share is None or share <= OTHERS_BUSY:
        return None
    return f"while other processes kept {share:.0%} of this machine's cores busy"


def measured_busy(finding: str, share: float | None) -> str | None:
    """``finding`` flagged as taken on a busy machine ("..., measured while other processes kept 83% of this
    machine's cores busy: it may be this machine's load, not the server's"), or None when ``share`` is quiet. For
    the runs that set what every level uses (the light-load probe, the overload): a level's own busy note is
    ``busy_cause``'s."""
    during = busy_while(share)
    return None if during is None else f"{finding}, measured {during}: {MAY_BE_LOAD}"


def overload_capacity(
    batches: list[tuple[int, float, float]],
    curve: ServiceCurve,
    curve_capacity: float,
    level_capacity: float,
    loads: list[tuple[str, float]],
    share: float | None,
) -> tuple[float, list[tuple[str, float]], str | None]:
    """(the capacity fraction levels are fractions of, the loads still measured, a note) from the overload run's
    ``batches`` (samples, model ms, worker-busy ms) and the share of cores other processes kept busy during it.

    A server whose batches took longer than the curve's t(b) under overload is slower than its curve: levels follow
    its own capacity and a load above it is dropped (an overload measures how long the run lasted, not the plan).
    Not when other processes kept the machine busy then: its batches may have been slow from their load, so the
    levels stay fractions of ``level_capacity`` and the note says why."""
    busy, expected = sum(b for _, _, b in batches), sum(curve.t_ms(n) for n, _, _ in batches)
    served_capacity = curve_capacity * expected / busy if busy > 0 and expected > 0 else level_capacity
    if served_capacity >= SLOWER_SERVER * level_capacity:
        return level_capacity, loads, None
    slower = f"under overload the server's batches took {busy / expected - 1:+.0%} vs the curve's t(b)"
    contended = measured_busy(slower, share)
    if contended is not None:  # its load, maybe not the server's: keep the capacity the levels were set from
        kept = f"levels stay fractions of {level_capacity:.1f}/s, not {served_capacity:.1f}/s"
        return level_capacity, loads, f"{contended}; {kept}"
    note = f"{slower}: levels are fractions of its own capacity, {served_capacity:.1f}/s, not {level_capacity:.1f}/s"
    over = [label for label, rate in loads if rate > 0.95 * served_capacity]
    if over:  # an overload measures how long the run lasted, not the plan
        note += f"; {', '.join(over)} above it, not measured"
        loads = [(label, rate) for label, rate in loads if label not in over]
    return served_capacity, loads, note


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


def served_batches(url: str, since: int, token: str | None = None, attempts: int = 3) -> Served | None:
    """The server's batch log from batch ``since`` on (``Served``), or None when it cannot be read. A read that
    times out or is refused is tried again (``attempts`` in all, 0.5 s then 1 s apart): on a busy 2-core machine
    a server still warming its model up can miss one 5 s deadline."""
    import time
    import urllib.request

    from rightsize.loadgen.validation import Served

    req = urllib.request.Request(
        f"{url}/v1/batches?since={since}", headers={"Authorization": f"Bearer {token}"} if token else {}
    )
    for attempt in range(max(1, attempts)):
        try:
            with urllib.request.urlopen(req, timeout=5) as resp:
                body = resp.read()
            break
        except OSError:
            if attempt + 1 >= attempts:
                return None
            time.sleep(0.5 * (attempt + 1))
    try:
        d = json.loads(body)
        names = d["fields"]
        i_n, i_c, i_b = names.index("samples"), names.index("compute_ms"), names.index("busy_ms")
        rows = [(int(r[i_n]), float(r[i_c]), float(r[i_b])) for r in d["batches"]]
        i_p, i_t = names.index("pool"), names.index("taken_ms")
        return Served(
            int(d["next"]), rows, float(d["cpu_s"]) if d.get("cpu_s") is not None else None,
            tuple(str(r[i_p]) for r in d["batches"]), tuple(float(r[i_t] or 0.0) for r in d["batches"]),
        )  # fmt: skip
    except (OSError, ValueError, KeyError, TypeError):
        return None


def level_duration_s(rate_per_s: float, duration_s: float, min_requests: int = MIN_REQUESTS) -> float:
    """``duration_s``, stretched so a level sees ``min_requests`` requests, at most ``MAX_STRETCH`` × longer."""
    return min(max(duration_s, min_requests / rate_per_s), MAX_STRETCH * duration_s)


def fraction_levels(fractions: tuple[float, ...], capacity: float) -> list[tuple[str, float]]:
    """(label, rate) per fraction of ``capacity``: ``(0.5,)`` -> ``[("50%", 0.5 * capacity)]``."""
    return [(f"{f:.0%}", f * capacity) for f in fractions]


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
    overload, where p95 is set by how long the run lasts, not by the queue the simulator models. An overload run
    during which other processes kept more than ``OTHERS_BUSY`` of the cores busy does not move the levels: its
    slow batches may be that load (``overload_capacity``).

    Each level runs ``duration_s`` seconds, longer (up to ``MAX_STRETCH`` ×) when that would give
    fewer than ``min_requests`` requests. With ``cpus`` the server runs on ``cpus.server`` (one
    intra-op thread per core unless the config says otherwise) and the generator on ``cpus.generator``.
    ``now_curve`` (the curve re-timed just before serving) adds a second prediction per level.

    Every prediction replays the level's own arrival schedule (the generator's, same seed) through the
    planner's simulator and adds the serving path's per-request overhead, measured first at a light
    load (``PROBE_LOAD`` of capacity): measured p50 minus the replayed p50 there. A probe taken while other
    processes kept the machine busy is still used (there is no quieter reading), and every level's notes say so.
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

    def measure(
        rate: float, level_s: float
    ) -> tuple[dict[str, Any], list[tuple[int, float, float]], float | None, float | None]:
        """(load result, the level's batches, serving CPU ms per request outside the model, unclamped: negative when
        the model's time × threads exceeded the server's CPU time; the share of cores other processes kept busy)."""
        nonlocal cursor
        before = served_batches(base_url, cursor, token)  # what ran since the last level: not this one's
        if before is not None:
            cursor = before.next
        with OthersBusy() as others:
            m = measure_open_loop(
                base_url + "/v1/predict", rate, duration_s=level_s, warmup_s=warmup_s, samples=request_samples,
                arrival=arrival, seed=seed, token=token, cpus=None if cpus is None else cpus.generator,
            )  # fmt: skip
        if others.share is not None and others.share > OTHERS_BUSY:  # a busy machine's latency is not the plan's
            busy = f"{busy_cause(others.share)}: {BUSY_EFFECT}"
            m = {**m, "valid": False, "problems": [*m.get("problems", []), busy]}
        after = served_batches(base_url, cursor, token) if before is not None else None
        if before is None or after is None:
            return m, [], None, others.share
        cursor = after.next
        cpu_ms = serving_cpu_ms(before, after, server_config.threads or 1, request_samples, clamp=False)
        return m, after.batches, cpu_ms, others.share

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
        m, batches, cpu_ms, probe_share = measure(probe_rate, probe_s)
        serving_ms = max(0.0, cpu_ms or 0.0)
        cpu_clamped = cpu_ms is not None and cpu_ms < 0  # the model's time × threads exceeded the server's CPU time
        forecast_curve = with_serving_cpu(curve, serving_ms)
        now_forecast = None if now_curve is None else with_serving_cpu(now_curve, serving_ms)
        overhead_ms, probe_note = 0.0, None
        lat, ratios = m.get("latency_ms"), ratios_of(batches)
        if lat and ratios is not None:
            overhead_ms = max(0.0, float(lat["p50"]) - predict(curve, probe_rate, probe_s, ratios).latency.p50)
            # kept (no quieter reading is at hand), but a contended probe's overhead is partly the other processes'
            probe_note = measured_busy(
                f"the light-load probe's serving overhead ({overhead_ms:.2f} ms per request, added to every "
                "prediction)", probe_share,
            )  # fmt: skip
        else:
            probe_note = "the light-load probe gave no latency: predictions carry no serving overhead"
        curve_capacity = workers * capacity_per_s(curve, server_config.max_batch, request_samples)
        level_capacity = capacity or curve_capacity
        capacity_note = None
        if fractions:
            saturation_s = min(SATURATION_S, MAX_STRETCH * duration_s)
            _, batches, _, share = measure(SATURATION_LOAD * level_capacity, saturation_s)
            level_capacity, loads, capacity_note = overload_capacity(
                batches, curve, curve_capacity, level_capacity, loads, share
            )
        levels = [(label, rate, False) for label, rate in loads]
        levels += [(label, rate, True) for label, rate in fraction_levels(fractions, level_capacity)]
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
            # on the prediction's own basis, the serving overhead added (it read 8.8-13.9 ms under a p95 of 16.5 ms
            # that carried a 3.4 ms overhead)
            spread = [others[len(others) // 20] + overhead_ms, others[-1 - len(others) // 20] + overhead_ms]
            m, batches, _, _ = measure(rate, level_s)
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
                    serving_cpu_clamped=cpu_clamped,
                    probe_busy=busy_while(probe_share),
                    predicted_p95_range_ms=spread,
                    capacity_per_s=level_capacity if of_capacity else None,
                )
            )
    return points
