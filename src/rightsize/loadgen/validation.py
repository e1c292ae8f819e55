"""Predicted vs measured latency, for ``rightsize validate``: the local service curve, capacity, errors.

Pure functions on plain values (no server, no torch): the validate command measures, the planner's
simulator predicts (``replay``: one level's own arrival schedule), and this module lines the two up.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from rightsize.measure.conditions import MAY_BE_LOAD
from rightsize.profile import Latency, ServiceCurve

if TYPE_CHECKING:
    from rightsize.plan.sim import SimResult

__all__ = [
    "MAX_ERROR_FRACTION",
    "MAY_BE_LOAD",
    "REPLAYS",
    "Replay",
    "Served",
    "ValidationPoint",
    "capacity_per_s",
    "error_pct",
    "render_points",
    "replay",
    "serving_cpu_ms",
]

MAX_ERROR_FRACTION = 0.01  # a level with more failed responses is not compared with the prediction
REPLAYS = 8  # service-time draws per replayed schedule; the prediction is the median of each percentile


@dataclass(frozen=True)
class ValidationPoint:
    """One load level: the simulator's prediction next to the open-loop measurement."""

    label: str  # "planned", "50%", "80%"
    rate_per_s: float  # offered, requests per second (one local replica)
    utilization: float  # predicted busy fraction of the local server
    predicted_ms: Latency
    measured_ms: Latency | None  # None when the run produced no successful response
    predicted_mean_batch: float
    achieved_rate_per_s: float = 0.0
    error_fraction: float = 0.0  # failed responses / all responses
    valid: bool = True  # the load run's own validity (generator kept up)
    notes: list[str] = field(default_factory=list)
    # What the server did during the level (its /metrics): samples per batch and model time per batch,
    # next to the service curve's t(that batch): the usual reason a prediction misses.
    served_mean_batch: float | None = None
    served_batch_ms: float | None = None
    curve_batch_ms: float | None = None
    # The same prediction on the service curve re-timed just before serving, on the server's cores:
    # separates the serving model's error from the machine's speed drifting since the profile.
    predicted_now_ms: Latency | None = None
    # The simulator on the curve rescaled to the batch time the server measured during the level: the
    # simulator's own fidelity, with the service curve's error taken out (a diagnosis, not a forecast).
    predicted_served_ms: Latency | None = None
    # The serving path's own per-request cost (HTTP, JSON, hand-offs), measured at a light load before the
    # levels and added to every prediction above.
    overhead_ms: float = 0.0
    # CPU ms per request the server spent outside the model at that light load: it shares the model's cores,
    # so the forecast and re-timed predictions stretch every batch of k requests by k times this.
    serving_cpu_ms: float = 0.0
    # That CPU read below zero (the model's time × threads exceeded the server's CPU time: its model calls waited for
    # cores, or did not keep every thread busy), so 0 is used: not a measurement.
    serving_cpu_clamped: bool = False
    # "while other processes kept 83% of this machine's cores busy" when they did during that light-load probe: its
    # overhead may be this machine's load, not the server's.
    probe_busy: str | None = None
    # 5th-95th percentile of the forecast's p95 over other arrival schedules of this level's length: how
    # much one run this long varies by chance (the predictions replay the run's own schedule).
    predicted_p95_range_ms: list[float] | None = None
    # For a level given as a fraction of capacity: the capacity it is a fraction of (the re-timed curve's,
    # or the server's own measured under overload when that was lower).
    capacity_per_s: float | None = None

    @property
    def comparable(self) -> bool:
        """The measurement can be held against the prediction: a valid run with at most 1% failed
        responses (the simulator serves every request; latency over the survivors only flatters)."""
        return self.valid and self.measured_ms is not None and self.error_fraction <= MAX_ERROR_FRACTION

    @property
    def error_pct(self) -> dict[str, float | None]:
        """(measured - predicted) / predicted × 100 per percentile."""
        return _errors(self.measured_ms, self.predicted_ms)

    @property
    def error_now_pct(self) -> dict[str, float | None]:
        """Like ``error_pct``, against ``predicted_now_ms``."""
        return _errors(self.measured_ms, self.predicted_now_ms)

    @property
    def error_served_pct(self) -> dict[str, float | None]:
        """Like ``error_pct``, against ``predicted_served_ms``."""
        return _errors(self.measured_ms, self.predicted_served_ms)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["error_pct"] = self.error_pct
        d["error_now_pct"] = self.error_now_pct
        d["error_served_pct"] = self.error_served_pct
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ValidationPoint:
        """Inverse of ``to_dict`` (the derived error fields are dropped)."""
        fields = {k: v for k, v in d.items() if k not in ("error_pct", "error_now_pct", "error_served_pct")}
        for key in ("predicted_ms", "measured_ms", "predicted_now_ms", "predicted_served_ms"):
            if fields.get(key) is not None:
                fields[key] = Latency.from_dict(fields[key])
        return cls(**fields)


def _errors(measured: Latency | None, predicted: Latency | None) -> dict[str, float | None]:
    if measured is None or predicted is None:
        return {"p50": None, "p95": None, "p99": None}
    return {k: error_pct(getattr(measured, k), getattr(predicted, k)) for k in ("p50", "p95", "p99")}


def error_pct(measured: float, predicted: float) -> float:
    """Signed relative error in percent; positive means the measurement was slower than predicted."""
    return (measured - predicted) / predicted * 100.0 if predicted > 0 else float("inf")


def capacity_per_s(curve: ServiceCurve, max_batch: int, request_samples: int = 1) -> float:
    """Most requests per second one server sustains: max over k whole requests per batch of k / t(k·samples)."""
    k_max = max(1, max_batch // request_samples)
    return max(k * 1000.0 / curve.t_ms(k * request_samples) for k in range(1, k_max + 1))


def _pct(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x:+.0f}%" if abs(x) < 1000 else (">+999%" if x > 0 else "<-999%")


def render_points(points: list[ValidationPoint]) -> str:
    """An aligned table: predicted vs measured p50/p95/p99 and their errors."""
    head = (
        f"{'load':<8} {'rate/s':>8} {'busy':>5}   {'pred p50':>8} {'p95':>7} {'p99':>7}   "
        f"{'meas p50':>8} {'p95':>7} {'p99':>7}   {'err p50':>7} {'p95':>6} {'p99':>6}"
    )
    lines = [head]
    for p in points:
        pr = p.predicted_ms
        row = (
            f"{p.label:<8} {p.rate_per_s:>8.1f} {p.utilization:>5.0%}   {pr.p50:>8.2f} {pr.p95:>7.2f} {pr.p99:>7.2f}   "
        )
        if p.measured_ms is None:
            row += f"{'-':>8} {'-':>7} {'-':>7}   {'-':>7} {'-':>6} {'-':>6}"
        else:
            me, e = p.measured_ms, p.error_pct
            row += f"{me.p50:>8.2f} {me.p95:>7.2f} {me.p99:>7.2f}   "
            row += f"{_pct(e['p50']):>7} {_pct(e['p95']):>6} {_pct(e['p99']):>6}"
        if p.predicted_now_ms is not None:
            now = p.predicted_now_ms
            row += f"   | re-timed: pred p95 {now.p95:.2f}, err {_pct(p.error_now_pct['p95'])}"
        if p.predicted_served_ms is not None:
            srv = p.predicted_served_ms
            row += f"   | served t: pred p95 {srv.p95:.2f}, err {_pct(p.error_served_pct['p95'])}"
        if p.error_fraction > 0:
            row += f"  errors {p.error_fraction:.1%}"
            if p.error_fraction > MAX_ERROR_FRACTION:
                row += " (not comparable: latency of the answered requests only)"
        if not p.valid:
            row += "  (run INVALID)"
        lines.append(row)
        if p.served_mean_batch is not None and p.served_batch_ms is not None and p.curve_batch_ms:
            lines.append(
                f"         server: mean batch {p.served_mean_batch:.2f} (predicted {p.predicted_mean_batch:.2f}), "
                f"model time {p.served_batch_ms:.2f} ms per batch vs the curve's {p.curve_batch_ms:.2f} ms "
                f"({error_pct(p.served_batch_ms, p.curve_batch_ms):+.0f}%)"
            )
        if p.predicted_p95_range_ms:
            lo, hi = p.predicted_p95_range_ms
            lines.append(f"         one run this long: forecast p95 {lo:.1f}-{hi:.1f} ms over other arrival schedules")
        lines += [f"         note: {n}" for n in p.notes]
    # the plan's model at this server's layout and load here: the planned instance's own p95 is another number
    legend = [
        "pred and err: the plan's model (the profile it planned from) at this server's layout and load here, "
        "not the planned instance's p95 (--json: planned_latency_ms): the error that judges the plan's model"
    ]
    if any(p.predicted_now_ms is not None for p in points):
        legend.append("re-timed: the same forecast on the curve timed again just before serving (this machine now)")
    if any(p.predicted_served_ms is not None for p in points):
        legend.append("served t: on the batch times the server itself measured (the queueing model alone)")
    if len(legend) > 1:
        lines.append("; ".join(legend))
    if points and points[0].overhead_ms:
        first = points[0]
        busy = f" {first.probe_busy} ({MAY_BE_LOAD})" if first.probe_busy else ""
        if first.serving_cpu_clamped:  # 0 used, not measured: say why rather than print 0.00 as a reading
            why = (
                f" (the probe ran {first.probe_busy}: model calls that wait for cores do that)"
                if first.probe_busy
                else ""
            )
            cpu = ("stretch no batch by serving CPU: at the probe the model's time × threads exceeded the server's "
                   f"CPU time, so none was measured{why}")  # fmt: skip
        else:
            cpu = f"also stretch each batch by {first.serving_cpu_ms:.2f} ms of serving CPU per request"
        lines.append(
            f"predictions replay each level's own arrival schedule and add {first.overhead_ms:.2f} ms per request "
            f"of serving overhead (HTTP, JSON, hand-offs), measured first at a light load{busy}; the profile and "
            f"re-timed ones {cpu}"
        )
    return "\n".join(lines)


@dataclass(frozen=True)
class Served:
    """What the server's ``GET /v1/batches`` said: the next batch number, the batches (samples, model ms,
    worker-busy ms) from the number asked for, the CPU seconds of the server process and its worker processes at
    that moment, and each
    batch's pool and the time it was taken off the queue."""

    next: int
    batches: list[tuple[int, float, float]]
    cpu_s: float | None
    pools: tuple[str, ...] = ()  # each batch's pool (lane), in the order of ``batches``
    taken_ms: tuple[float, ...] = ()  # when each batch was taken off its queue (perf_counter ms)


def serving_cpu_ms(
    before: Served,
    after: Served,
    threads: int,
    request_samples: int,
    *,
    clamp: bool = True,
    requests: int | None = None,
) -> float | None:
    """CPU ms per request the server spent outside the model between two reads of its batch log (parsing,
    JSON, answering, hand-offs), counting each model call as ``threads`` busy threads; None without CPU data.
    ``cpu_s`` counts the server's worker processes too (a pool of k > 1 workers runs each batch in one of them, on
    ``threads`` threads), so every batch's model time is inside it whichever process ran it.

    Never negative with ``clamp``; without it, below zero when the model calls' time × ``threads`` exceeded the
    CPU time (calls that waited for cores, as on a busy machine, or left threads idle): no reading, not 0.
    ``requests``: the requests sent between the reads, where the batches' samples cannot count them (a request mix's
    requests differ in size; ``request_samples`` is then unused)."""
    if before.cpu_s is None or after.cpu_s is None or not after.batches:
        return None
    served = sum(n for n, _, _ in after.batches) / max(1, request_samples) if requests is None else max(1, requests)
    model_ms = sum(c for _, c, _ in after.batches) * max(1, threads)
    excess = ((after.cpu_s - before.cpu_s) * 1000.0 - model_ms) / served
    return max(0.0, excess) if clamp else excess


@dataclass(frozen=True)
class Replay:
    """The served deployment the simulator replays: workers sharing one queue, and their batching."""

    workers: int
    max_batch: int
    max_wait_ms: float


def replay(
    curve: ServiceCurve,
    rate: float,
    arrivals_ms: Any,
    ratios: Any,
    served: Replay,
    request_samples: int,
    warmup_s: float,
    draws: int = REPLAYS,
) -> SimResult:
    """The simulator on one arrival schedule (requests from ``warmup_s`` on counted): the median of each
    percentile, of the busy fraction and of the mean batch over ``draws`` service-time draws; ``ratios``
    as in ``simulate``."""
    from rightsize.plan.sim import SimConfig, SimResult, simulate

    config = SimConfig(
        rate_per_s=rate, replicas=served.workers, max_batch=served.max_batch, max_wait_ms=served.max_wait_ms,
        request_samples=request_samples,
    )  # fmt: skip
    start_ms = 1000.0 * warmup_s
    runs = [
        simulate(
            curve,
            config,
            seed=d,
            arrivals_ms=arrivals_ms,
            record_from_ms=start_ms,
            service_ratios=ratios,
            ratios_in_order=True,
        )
        for d in range(draws)
    ]

    def med(get: Any) -> float:
        return float(statistics.median(get(r) for r in runs))

    latency = Latency(
        p50=med(lambda r: r.latency.p50), p95=med(lambda r: r.latency.p95), p99=med(lambda r: r.latency.p99),
        mean=med(lambda r: r.latency.mean), n=runs[0].latency.n,
    )  # fmt: skip
    return SimResult(latency, med(lambda r: r.utilization), med(lambda r: r.mean_batch), runs[0].n_requests,
                     runs[0].engine)  # fmt: skip
