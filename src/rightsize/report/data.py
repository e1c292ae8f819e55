"""What a report renders, gathered into one plain value before any HTML or Markdown is written.

    ReportData
    ├── plan          PlanResult.to_dict() shape (a live PlanResult and a stored artifact look the same)
    ├── measurements  the measured profile's ok points (latency/throughput per batch, device, precision)
    ├── curves        ServiceCurves (measured or projected, with band_lo/band_hi)
    ├── memory        MemoryView: breakdown {component: bytes} + GPU tiers (GiB)
    ├── env           the environment fingerprint the profile was measured on
    └── sweeps        p95 vs request rate per top candidate (from the planner's ``sweep`` callable)

The report only renders: it computes no plan. The one call back into planning is the optional
``sweep(candidate, rates) -> p95s`` the planner hands in.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from rightsize.plan.result import Candidate, PlanResult
from rightsize.profile import Environment, Measurement, Profile, ServiceCurve
from rightsize.report.fmt import finite

__all__ = [
    "LOAD_PEAK",
    "RULES_NOTE",
    "MemoryView",
    "RateSweep",
    "ReportData",
    "SweepFn",
    "Targets",
    "at_planned_batch",
    "build_report_data",
    "candidate_key",
    "curve_from_dict",
    "fleet_rows",
    "memory_view",
    "targets_of",
]

SweepFn = Callable[[Candidate, list[float]], list[float]]
GIB = 1024**3
# Request rates of the p95-vs-rate chart, as fractions of the target peak rate.
SWEEP_FRACTIONS = (0.1, 0.25, 0.4, 0.55, 0.7, 0.8, 0.9, 1.0, 1.1, 1.25, 1.4, 1.6, 1.8, 2.0)
SWEEP_TOP = 4  # candidates in the p95-vs-rate chart


@dataclass(frozen=True)
class Targets:
    """The numbers the charts draw as lines (None when the spec does not set them)."""

    rate_per_s: float | None = None
    percentile: float | None = None
    bound_ms: float | None = None
    budget_usd_per_hour: float | None = None
    budget_usd: float | None = None
    deadline_hours: float | None = None


@dataclass(frozen=True)
class RateSweep:
    label: str
    rates_per_s: tuple[float, ...]
    p95_ms: tuple[float | None, ...]  # None: at or past the candidate's capacity, unstable, or not computed
    recommended: bool = False
    plan_method: str = ""  # at the target rate p95 is the plan's own figure, estimated this way (its latency_method)


@dataclass(frozen=True)
class MemoryView:
    breakdown: dict[str, float]  # component -> bytes (per device)
    tiers: tuple[tuple[float, str], ...]  # (GiB, "A10G/L4") ascending
    label: str = "estimate"
    measured_peak_bytes: float | None = None  # CUDA max_memory_allocated, when the profile has it
    at_batch: str = ""  # "micro-batch 32": the breakdown was brought to the batch the recommendation runs

    @property
    def total_bytes(self) -> float:
        return sum(self.breakdown.values())


@dataclass
class ReportData:
    plan: dict[str, Any]
    measurements: list[Measurement] = field(default_factory=list)
    curves: list[ServiceCurve] = field(default_factory=list)
    memory: MemoryView | None = None
    env: Environment | None = None
    sweeps: list[RateSweep] = field(default_factory=list)
    sweep_note: str = ""
    profile_model: str | None = None

    @property
    def kind(self) -> str:
        return str(self.plan.get("kind", "online"))

    @property
    def targets(self) -> Targets:
        return targets_of(self.plan.get("target") or {})

    @property
    def candidates(self) -> list[dict[str, Any]]:
        return list(self.plan.get("candidates") or [])

    @property
    def recommendation(self) -> dict[str, Any] | None:
        rec = self.plan.get("recommendation")
        return rec if isinstance(rec, dict) else None


def _find(obj: Any, key: str) -> Any:
    """The first value under ``key`` anywhere in nested dicts (targets may be flat or under 'online')."""
    if isinstance(obj, Mapping):
        if obj.get(key) is not None:
            return obj[key]
        for v in obj.values():
            found = _find(v, key)
            if found is not None:
                return found
    return None


def targets_of(target: Mapping[str, Any]) -> Targets:
    """Read the chart lines from a plan's ``target`` dict (the spec's targets as given)."""
    lat = _find(target, "latency")
    lat = lat if isinstance(lat, Mapping) else {}
    return Targets(
        rate_per_s=finite(_find(target, "rate_per_s")),
        percentile=finite(lat.get("percentile", _find(target, "percentile"))),
        bound_ms=finite(lat.get("bound_ms", _find(target, "bound_ms"))),
        budget_usd_per_hour=finite(_find(target, "budget_usd_per_hour")),
        budget_usd=finite(_find(target, "budget_usd")),
        deadline_hours=finite(_find(target, "deadline_hours")),
    )


def ranked_by(data: ReportData) -> str:
    """How the candidates table is ordered, as the planner ranked it (a rules plan is not by price alone: its header
    had said "feasible by cost" above a $0.38 row ranked below an $8.57 one)."""
    if data.plan.get("kind") == "rules":
        from rightsize.plan.rules import RULES_ORDER

        return RULES_ORDER
    # the ties as plan.explain.rank breaks them: a T4 fp32 row above a faster fp16 one at the same price had read
    # against "ties: faster" (fp32 is the precision the spec listed)
    return (
        "feasible by cost (ties: a verified price, a precision the spec lists, the narrower band, then faster), "
        "then infeasible by how close each comes"
    )


def candidate_key(c: Mapping[str, Any]) -> tuple[Any, ...]:
    """Identity of a candidate across the ranked list, the Pareto list and the recommendation."""
    b = c.get("batching") or {}
    return (
        c.get("instance"),
        c.get("provider"),
        c.get("region"),
        c.get("count"),
        c.get("precision"),
        c.get("purchase"),
        b.get("max_batch"),
        b.get("max_wait_ms"),
        c.get("workers_per_instance"),  # one CPU instance as 1x4t or 2x2t: different candidates
        c.get("threads_per_worker"),
    )


def candidate_label(c: Mapping[str, Any]) -> str:
    """'2 × g5.xlarge fp16' (spot/mixed appended)."""
    count = c.get("count") or 1
    purchase = c.get("purchase") or ""
    extra = f" {purchase}" if purchase and purchase not in ("on_demand", "on-demand") else ""
    return f"{count} × {c.get('instance', '?')} {c.get('precision', '')}{extra}".strip()


FLEET_HEAD = ("plan", "requests", "instance", "device", "instances", "replicas", "batch", "p95", "$/h")


def fleet_rows(fleet: Mapping[str, Any] | None) -> tuple[str, list[list[str]]]:
    """(title, rows of FLEET_HEAD) of a plan's request-mix section (``PlanResult.fleet``); no rows without one.
    Cells are plain text: the HTML and Markdown renderers escape them."""
    from rightsize.report.fmt import ms, usd

    if not fleet:
        return "", []
    mix = ", ".join(f"{m['share']:.0%} x {m['samples']}" for m in fleet.get("mix") or [])
    choice = {"single": "one pool serves every size", "split": "a fleet split by size"}.get(str(fleet.get("choice")))
    title = f"Request mix ({mix} samples): {choice or fleet.get('choice', '?')}"

    def row(plan: str, requests: str, c: Mapping[str, Any]) -> list[str]:
        lat, b = c.get("latency_ms") or {}, c.get("batching") or {}
        return [plan, requests, str(c.get("instance")), f"{c.get('device')} {c.get('precision')}",
                str(c.get("count", "-")), str(c.get("replicas")), str(b.get("max_batch", "-")), ms(lat.get("p95")),
                usd(c.get("cost_usd_per_hour"))]  # fmt: skip

    rows = []
    if fleet.get("single"):
        rows.append(row("one pool", "all", fleet["single"]))
    split = fleet.get("split")
    if split:
        cut = split["crossover_samples"]
        rows.append(row("size split", f"< {cut} samples", split["small"]))
        rows.append(row("size split", f">= {cut} samples", split["large"]))
    return title, rows


def curve_from_dict(d: Mapping[str, Any]) -> ServiceCurve:
    """A ServiceCurve from its ``dataclasses.asdict`` JSON (lists back to tuples; every field: a stored plan's CPU
    layouts had come back as 1 worker of all threads, two layouts of one instance drawn under one label)."""
    mem, share, compute = d.get("memory_bytes"), d.get("device_share"), d.get("compute_share")
    los, his = d.get("band_los"), d.get("band_his")
    return ServiceCurve(
        device=str(d["device"]),
        precision=str(d["precision"]),
        batch_sizes=tuple(int(b) for b in d["batch_sizes"]),
        latency_ms=tuple(float(t) for t in d["latency_ms"]),
        cv=tuple(float(c) for c in d["cv"]),
        provenance=d.get("provenance", "projected"),
        band_lo=float(d.get("band_lo", 1.0)),
        band_hi=float(d.get("band_hi", 1.0)),
        source=str(d.get("source", "")),
        memory_bytes=tuple(mem) if mem is not None else None,
        instance=d.get("instance"),
        threads=int(d["threads"]) if d.get("threads") is not None else None,
        workers=int(d.get("workers") or 1),
        device_share=tuple(float(x) for x in share) if share is not None else None,
        compute_share=tuple(float(x) for x in compute) if compute is not None else None,
        band_los=tuple(float(x) for x in los) if los is not None and his is not None else None,
        band_his=tuple(float(x) for x in his) if los is not None and his is not None else None,
        extrapolated=bool(d.get("extrapolated", False)),
        caveats=tuple(str(x) for x in d.get("caveats") or ()),
        batch_limit=int(d["batch_limit"]) if d.get("batch_limit") is not None else None,
    )


# -- memory ---------------------------------------------------------------------------------------


def _tiers(raw: Any) -> list[tuple[float, str]]:
    """GPU memory tiers from numbers (GiB), (GiB, names) pairs or {"memory_gib", "name(s)"} dicts."""
    out: list[tuple[float, str]] = []
    for t in raw or ():
        if finite(t) is not None:
            out.append((float(t), f"{float(t):g} GiB"))
        elif isinstance(t, list | tuple) and len(t) == 2 and finite(t[0]) is not None:
            names = t[1] if isinstance(t[1], str) else "/".join(str(n) for n in t[1])
            out.append((float(t[0]), f"{names} {float(t[0]):g} GiB"))
        elif isinstance(t, Mapping):
            gib = finite(t.get("memory_gib", t.get("gib")))
            names = t.get("names", t.get("name", ""))
            names = names if isinstance(names, str) else "/".join(str(n) for n in names)
            if gib is not None:
                out.append((gib, f"{names} {gib:g} GiB".strip()))
    return sorted(out)


def _component(key: str) -> str:
    """A breakdown key in words: "cuda_context" -> "CUDA context", "optimizer_states" -> "optimizer states"."""
    return {"cuda_context": "CUDA context", "kv_cache": "KV cache"}.get(key, key.replace("_", " "))


def memory_view(
    memory: Any, *, tiers: Sequence[Any] = (), measured_peak_bytes: float | None = None
) -> MemoryView | None:
    """Normalise a MemoryEstimate-like object, ``{"breakdown": {...}, "tiers": [...]}`` or a plain
    ``{component: bytes}`` dict. ``tiers`` (``catalog.gpu_memory_tiers`` rows) when the memory names none."""
    if memory is None:
        return None
    tiers_raw: Any = None
    label = "estimate"
    if hasattr(memory, "breakdown") and not isinstance(memory, Mapping):
        breakdown = dict(memory.breakdown)
        tiers_raw = getattr(memory, "tiers", None)
    elif isinstance(memory, Mapping) and isinstance(memory.get("breakdown"), Mapping):
        breakdown = dict(memory["breakdown"])
        tiers_raw = memory.get("tiers")
        label = str(memory.get("label", label))
        if tiers_raw is not None and not tiers_raw:  # "tiers": [] says none apply (a CPU plan): no GPU tiers added
            tiers = ()
    elif isinstance(memory, Mapping):
        breakdown = {k: v for k, v in memory.items() if k not in ("tiers", "label")}
        tiers_raw = memory.get("tiers")
    else:
        return None
    parts = {_component(str(k)): float(v) for k, v in breakdown.items() if (finite(v) or 0) > 0}
    if not parts:
        return None
    return MemoryView(
        breakdown=parts, tiers=tuple(_tiers(tiers_raw or tiers)), label=label, measured_peak_bytes=measured_peak_bytes
    )


RULES_NOTE = "No measured profile: this plan was sized by rules of thumb (see the recommendation)."
LOAD_PEAK = "load peak"  # MemoryView.at_batch when loading, not a batch, sets the recommendation's memory figure


def at_planned_batch(mem: MemoryView, plan: Mapping[str, Any]) -> MemoryView:
    """The breakdown brought to the batch the recommendation runs, so its total is the candidate's memory figure.

    The planner stores the estimate's breakdown at batch 1 (training: the optimizer step's peak, no activations)
    while a candidate's ``memory_bytes`` is its memory line, fixed + per-sample x batch, at the batch it runs
    (training: the micro-batch). The difference is what the batch adds: shown as one activations row, labelled
    with the batch; or, when loading sets the figure (``memory_at_load``), the float copy a quantizing worker
    holds. Unchanged for a CPU recommendation whose breakdown is the GPU estimate (plans stored before the CPU's
    own was: CUDA context included), for one without a batch or a memory figure, and for a breakdown that already
    reaches the figure.
    """
    c = plan.get("recommendation")
    if not isinstance(c, Mapping) or plan.get("kind") == "rules":
        return mem
    if c.get("device_class") == "cpu" and "on a CPU" not in mem.label:  # a GPU breakdown (older plans): not it
        return mem
    figure = finite(c.get("memory_bytes"))
    batch = (c.get("batching") or {}).get("max_batch")
    if figure is None or isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        return mem
    added = figure - mem.total_bytes
    if added < 1.0:  # already at that batch (or the figure is int()-truncated): nothing to add
        return mem
    at = f"{'micro-batch' if plan.get('kind') == 'training' else 'batch'} {batch}"
    if c.get("memory_at_load"):  # the figure is loading's peak: an int8 worker quantizing a copy of its float model
        row, at = "float model copied while quantizing", LOAD_PEAK
    else:
        row = f"{'more activations' if 'activations' in mem.breakdown else 'activations'} at {at}"
    return replace(mem, breakdown=mem.breakdown | {row: added}, label=f"{mem.label}, {at}", at_batch=at)


# -- sweeps ---------------------------------------------------------------------------------------


def _sweep_candidates(result: PlanResult) -> list[Candidate]:
    picks: list[Candidate] = []
    seen: set[tuple[Any, ...]] = set()
    pool = [c for c in (result.recommendation, result.alternative) if c is not None]
    pool += [c for c in result.candidates if c.feasible and c.latency is not None]
    for c in pool:
        k = candidate_key(c.to_dict())
        if k not in seen:
            seen.add(k)
            picks.append(c)
        if len(picks) >= SWEEP_TOP:
            break
    return picks


def _capacity_per_s(c: Candidate, request_samples: float) -> float | None:
    """Requests/s a candidate's serving replicas keep up with at full batches (``throughput_per_s``, less a spot
    plan's standby instance, as ``plan.checks`` counts it); None when the plan gave no throughput."""
    from rightsize.plan.verify import spare_instances

    thr = finite(c.throughput_per_s)
    if thr is None or thr <= 0:
        return None
    serving = 1.0 - spare_instances(c) / max(1, c.count)
    return thr * serving / max(1.0, request_samples)


def compute_sweeps(result: PlanResult, sweep: SweepFn) -> tuple[list[RateSweep], str]:
    """p95 at SWEEP_FRACTIONS of the target rate for the top candidates; (sweeps, note when none).

    A rate at or past a candidate's capacity is not simulated: its queue grows for as long as a run lasts, so a
    finite run's p95 (a T4 of 568 req/s at 1,878 ms at 800 req/s) measures the run, not the server. At the target
    rate the point is the plan's own p95, so the chart agrees with the table beside it (the sweep is another draw,
    and may be another method: a CPU row screened on a shared queue read 57.6 ms there, the sweep 53.1)."""
    rate = targets_of(result.target).rate_per_s
    if result.kind != "online" or rate is None:
        return [], "only online plans have a request rate"
    if _find(result.target, "request_mix"):  # the sweep sends one request size: 18.6 ms at the peak against 61.5
        return [], (
            "the rate sweep simulates one request size; this plan's request mix is judged class by class in "
            "its request-mix table"
        )
    rates = [rate * f for f in SWEEP_FRACTIONS]
    samples = finite(_find(result.target, "request_samples")) or 1.0
    rec_key = candidate_key(result.recommendation.to_dict()) if result.recommendation else None
    out: list[RateSweep] = []
    for c in _sweep_candidates(result):
        cap = _capacity_per_s(c, samples)
        under = [r for r in rates if cap is None or r < cap]
        try:
            p95 = list(sweep(c, under)) if under else []
        except Exception as exc:  # one candidate's sweep failing must not lose the whole report
            return out, f"the rate sweep failed ({type(exc).__name__}: {exc})"
        vals = [finite(v) for v in p95[: len(under)]]
        vals += [None] * (len(rates) - len(vals))
        method = ""
        if c.latency is not None and rate in under and (own := finite(c.latency.p95)) is not None:
            vals[rates.index(rate)] = own
            method = c.latency.method
        key = candidate_key(c.to_dict())
        out.append(RateSweep(candidate_label(c.to_dict()), tuple(rates), tuple(vals), key == rec_key, method))
    return out, "" if out else "no feasible online candidate to sweep"


def _stored_sweeps(raw: Any) -> list[RateSweep]:
    out = []
    for s in raw or ():
        if isinstance(s, Mapping) and s.get("rates_per_s") and s.get("p95_ms"):
            out.append(
                RateSweep(
                    str(s.get("label", "?")),
                    tuple(float(r) for r in s["rates_per_s"]),
                    tuple(finite(v) for v in s["p95_ms"]),
                    bool(s.get("recommended", False)),
                    str(s.get("plan_method") or ""),
                )
            )
    return out


# -- assembly -------------------------------------------------------------------------------------


def build_report_data(
    result: PlanResult | Mapping[str, Any],
    *,
    profile: Profile | None = None,
    measurements: Sequence[Measurement] = (),
    curves: Sequence[ServiceCurve] = (),
    memory: Any = None,
    env: Environment | Mapping[str, Any] | None = None,
    sweep: SweepFn | None = None,
    tiers: Sequence[Any] = (),
) -> ReportData:
    """Gather everything one report shows. ``result`` is a PlanResult or its ``to_dict()`` (a stored plan).

    A stored plan may carry optional extras the planner chose to save: ``curves`` (ServiceCurve dicts),
    ``memory``, ``env`` and ``rate_sweeps`` ([{label, rates_per_s, p95_ms}]); arguments win over them.
    ``tiers``: GPU memory tiers (``catalog.gpu_memory_tiers(catalog)``) for a memory view that names none;
    the caller loads the catalog, this module reads no file.
    """
    plan = result.to_dict() if isinstance(result, PlanResult) else dict(result)
    ms = list(measurements) or (profile.ok() if profile is not None else [])
    ms = [m for m in ms if m.status == "ok" and m.latency_ms is not None]
    cs = list(curves)
    if not cs:
        for d in plan.get("curves") or ():
            try:
                cs.append(curve_from_dict(d))
            except (KeyError, TypeError, ValueError):
                continue
    peaks = [m.peak_memory_bytes for m in ms if m.device == "cuda" and m.peak_memory_bytes]
    mem = memory_view(
        memory if memory is not None else plan.get("memory"), tiers=tiers, measured_peak_bytes=max(peaks, default=None)
    )
    if mem is None:
        mem = _memory_from_candidates(plan, tiers)
    else:
        mem = at_planned_batch(mem, plan)
    env_d = env if isinstance(env, Environment) else Environment.from_dict(env) if env else None
    if env_d is None:
        env_d = profile.env if profile is not None else Environment.from_dict(plan["env"]) if plan.get("env") else None
    data = ReportData(
        plan=plan, measurements=ms, curves=cs, memory=mem, env=env_d, profile_model=profile.model if profile else None
    )
    if sweep is not None and isinstance(result, PlanResult):
        data.sweeps, data.sweep_note = compute_sweeps(result, sweep)
    else:
        data.sweeps = _stored_sweeps(plan.get("rate_sweeps"))
        if not data.sweeps:  # the plan's own reason when it stored one (e.g. no feasible candidate to sweep)
            data.sweep_note = (
                "only online plans have a request rate"
                if data.kind != "online"
                else str(plan.get("rate_sweep_note") or "no rate sweep was stored with this plan")
            )
    return data


def _memory_from_candidates(plan: Mapping[str, Any], tiers: Sequence[Any]) -> MemoryView | None:
    """Without an estimate breakdown: the recommendation's estimated peak per device as one bar."""
    for key in ("recommendation", "alternative"):
        c = plan.get(key)
        if isinstance(c, Mapping) and (finite(c.get("memory_bytes")) or 0) > 0:
            return MemoryView(
                breakdown={"estimated peak": float(c["memory_bytes"])},
                tiers=tuple(_tiers(tiers)),
                label=f"{c.get('device', '?')} {c.get('precision', '')}".strip(),
            )
    return None
