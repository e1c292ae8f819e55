"""The report's charts, each a function ReportData -> HTML (a ``<figure data-chart=...>`` or a skipped note).

latency-batch     p50 / p95 per batch, per device × precision: measured points, projected bands
throughput-batch  samples/s per batch, same series
p95-rate          p95 vs request rate per top candidate, with the SLO and the peak rate
pareto            cost vs p95 (online) or total cost vs time (batch, training), budget / SLO / deadline
memory            memory breakdown per device vs GPU memory tiers
cluster-time/-cost  training and batch: time and cost vs cluster size (``charts_jobs``)
spot-cost/-time   spot and mixed vs on-demand per configuration (``charts_jobs``)
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rightsize.models.byo import ENGINE_NAMES
from rightsize.plan.explain import PARETO_STEP
from rightsize.profile import Environment, Measurement, ServiceCurve
from rightsize.report.charts_jobs import cluster_charts, spot_charts
from rightsize.report.data import GIB, RateSweep, ReportData, Targets, candidate_key, candidate_label
from rightsize.report.fmt import finite, hours, num, quality_word, usd
from rightsize.report.svg import PALETTE, REF_COLORS, Axis, Point, Ref, Series, xy_chart
from rightsize.report.svg_bars import stacked_hbars

__all__ = [
    "all_charts",
    "cluster_charts",
    "latency_charts",
    "memory_chart",
    "pareto_chart",
    "rate_chart",
    "spot_charts",
]

MAX_CURVES = 6  # projected curves drawn in the batch charts (those of the top candidates first)
MAX_POINTS = 400  # candidates drawn in the Pareto chart


def _device_name(m: Measurement, env: Environment | None) -> str:
    if m.device == "cuda" and env is not None and env.gpu_name:
        return env.gpu_name
    return m.device


def _pick_curves(data: ReportData) -> list[ServiceCurve]:
    """Projected curves (and measured ones when no profile is given), the top candidates' first."""
    curves = [c for c in data.curves if c.provenance != "measured" or not data.measurements]
    if len(curves) <= MAX_CURVES:
        return curves
    wanted: list[tuple[Any, ...]] = []
    for c in data.candidates[:20]:
        wanted += [(c.get("device"), c.get("precision")), (f"cpu:{c.get('instance')}", c.get("precision"))]
        wanted += [(c.get("instance"), c.get("precision"))]

    def rank(cv: ServiceCurve) -> int:
        keys = [(cv.device, cv.precision), (cv.instance, cv.precision)]
        return min((wanted.index(k) for k in keys if k in wanted), default=len(wanted))

    return sorted(curves, key=rank)[:MAX_CURVES]


def latency_charts(data: ReportData) -> list[str]:
    """Latency p50/p95 and throughput vs batch size per device and precision."""
    # one series per thread count too: a 1-thread and a 2-thread point at the same batch are two configs
    groups: dict[tuple[str, str, str, int], list[Measurement]] = {}
    for m in data.measurements:
        groups.setdefault((_device_name(m, data.env), m.precision, m.mode, m.threads or 0), []).append(m)
    several = len({k[3] for k in groups}) > 1
    lat: list[Series] = []
    thr: list[Series] = []
    color = 0

    def seen(m: Measurement) -> str:  # "measured", or with what disturbed it
        return "measured" + (f", {q}" if (q := quality_word(m)) else "")

    for (dev, prec, mode, threads), ms in sorted(groups.items()):
        c = PALETTE[color % len(PALETTE)]
        color += 1
        ms = sorted(ms, key=lambda m: m.batch_size)
        label = f"{dev} {prec}" + (f" {threads} thr" if several and threads else "")
        label += " (train step)" if mode == "training" else ""
        p50 = [
            Point(
                m.batch_size, m.latency_ms.p50, f"{label} b{m.batch_size}: p50 {num(m.latency_ms.p50)} ms ({seen(m)})"
            )
            for m in ms
            if m.latency_ms
        ]
        p95 = [
            Point(
                m.batch_size, m.latency_ms.p95, f"{label} b{m.batch_size}: p95 {num(m.latency_ms.p95)} ms ({seen(m)})"
            )
            for m in ms
            if m.latency_ms
        ]
        lat += [Series(f"{label} p50 measured", p50, c), Series(f"{label} p95 measured", p95, c, marker="square")]
        tp = [
            Point(m.batch_size, m.throughput_per_s, f"{label} b{m.batch_size}: {num(m.throughput_per_s)} samples/s")
            for m in ms
            if m.throughput_per_s
        ]
        thr.append(Series(f"{label} measured", tp, c))
    # instances one projection serves alike (one CPU family and size) draw one line, named for each: the second
    # had been drawn exactly over the first, a legend entry with no line to see
    from rightsize.plan.sim import sim_key

    same: dict[tuple[Any, ...], list[ServiceCurve]] = {}
    for cv in _pick_curves(data):  # alike as the planner simulates them alike (its numbers, not its labels)
        same.setdefault(sim_key(cv) if cv.provenance == "projected" else (id(cv),), []).append(cv)
    picked = [group[0] for group in same.values()]
    names = {id(group[0]): " = ".join(dict.fromkeys(k.instance or k.device for k in group)) for group in same.values()}
    # k workers x t threads of one instance are curves alike but for their layout: name it when it tells them apart
    alike = Counter((names[id(cv)], cv.precision, cv.provenance) for cv in picked)
    for cv in picked:
        c = PALETTE[color % len(PALETTE)]
        color += 1
        dev = names[id(cv)]
        tag = cv.provenance
        shape = f" {cv.workers} × {cv.threads} thr" if cv.threads and alike[(dev, cv.precision, tag)] > 1 else ""
        label = f"{dev} {cv.precision}{shape} {tag}"
        bs, ts = cv.batch_sizes, cv.latency_ms
        edges = [cv.band_at(b) for b in bs]
        band = [(b, t * lo, t * hi) for b, t, (lo, hi) in zip(bs, ts, edges, strict=True)] if tag == "projected" else []
        pts = [
            Point(b, t, f"{label} b{b}: {num(t)} ms (band {num(t * lo)}–{num(t * hi)})")
            for b, t, (lo, hi) in zip(bs, ts, edges, strict=True)
        ]
        proj = tag == "projected"
        lat.append(Series(f"{label} (median)", pts, c, dashed=proj, hollow=proj, band=band))
        tband = [(b, b * 1000 / hi, b * 1000 / lo) for b, lo, hi in band if lo > 0]
        tpts = [
            Point(b, b * 1000 / t, f"{label} b{b}: {num(b * 1000 / t)} samples/s")
            for b, t in zip(bs, ts, strict=True)
            if t > 0
        ]
        thr.append(Series(label, tpts, c, dashed=proj, hollow=proj, band=tband))
    note = "Filled marks: measured on the environment below. Hollow marks, dashed lines and shaded bands: projected."
    empty = "no measured profile or service curve was given"
    x = Axis("batch size (samples)", log=True)
    return [
        xy_chart(
            "latency-batch",
            "Latency per batch vs batch size",
            lat,
            x,
            Axis("latency per batch (ms)", log=True),
            note=note,
            empty=empty,
        ),
        xy_chart(
            "throughput-batch",
            "Throughput vs batch size",
            thr,
            x,
            Axis("throughput (samples/s)", log=True),
            note=note,
            empty=empty,
        ),
    ]


def _slo_ref(t: Targets, axis: str) -> list[Ref]:
    if t.bound_ms is None:
        return []
    return [Ref(axis, t.bound_ms, f"SLO p{num(t.percentile or 95)} ≤ {num(t.bound_ms)} ms", REF_COLORS["slo"])]  # type: ignore[arg-type]


def rate_chart(data: ReportData) -> str:
    """p95 latency vs request rate per top candidate, with the SLO line and the target rate."""
    t = data.targets

    def tip(s: RateSweep, r: float, p: float) -> str:
        own = f" (the plan's figure: {s.plan_method})" if s.plan_method and r == t.rate_per_s else ""
        return f"{s.label}: p95 {num(p, zeros=True)} ms at {num(r)} req/s{own}"

    series = []
    for i, s in enumerate(data.sweeps):
        pts = [Point(r, p, tip(s, r, p)) for r, p in zip(s.rates_per_s, s.p95_ms, strict=False) if p is not None]
        series.append(
            Series(
                s.label + (" (recommended)" if s.recommended else ""),
                pts,
                PALETTE[i % len(PALETTE)],
                highlight=s.recommended,
            )
        )
    refs = _slo_ref(t, "y")
    if t.rate_per_s is not None:
        refs.append(Ref("x", t.rate_per_s, f"peak {num(t.rate_per_s)} req/s", REF_COLORS["rate"]))
    return xy_chart(
        "p95-rate",
        "p95 latency vs request rate (top candidates)",
        series,
        Axis("request rate (req/s)"),
        Axis("p95 latency (ms)", log=True),
        refs=refs,
        empty=data.sweep_note or "no rate sweep",
        note="Points stop before the rate reaches a candidate's capacity (its replicas' full-batch throughput)."
        + (
            " At the peak rate each point is the plan's own p95, as in the table; the other rates are simulated."
            if any(s.plan_method for s in data.sweeps)
            else ""
        ),
    )


def _latency_at(c: Mapping[str, Any], t: Targets) -> float | None:
    lat = c.get("latency_ms") or {}
    q = t.percentile
    key = {50.0: "p50", 95.0: "p95", 99.0: "p99"}.get(float(q)) if q is not None else "p95"
    return finite(lat.get(key) if key else lat.get("target_percentile")) or finite(lat.get("p95"))


def pareto_chart(data: ReportData) -> str:
    """Cost vs latency (online) or total cost vs time (batch, training): candidates, frontier, recommendation."""
    t = data.targets
    online = data.kind == "online"
    rec = data.recommendation

    def xy(c: Mapping[str, Any]) -> tuple[float | None, float | None]:
        if online:
            return _latency_at(c, t), finite(c.get("cost_usd_per_hour"))
        return finite(c.get("runtime_hours")), finite(c.get("cost_usd_total"))

    def point(c: Mapping[str, Any]) -> Point | None:
        x, y = xy(c)
        if x is None or y is None:
            return None
        what = f"{num(x)} ms, {usd(y)}/h" if online else f"{hours(x)}, {usd(y)} total"
        prov = c.get("provenance", "")
        return Point(x, y, f"{candidate_label(c)} ({c.get('device', '')}, {prov}): {what}")

    pareto_keys = {candidate_key(c) for c in data.plan.get("pareto") or []}
    others = [
        p
        for c in data.candidates[:MAX_POINTS]
        if c.get("feasible") and candidate_key(c) not in pareto_keys
        if (p := point(c))
    ]
    infeasible = [p for c in data.candidates[:MAX_POINTS] if not c.get("feasible") if (p := point(c))]
    front = [p for c in data.plan.get("pareto") or [] if (p := point(c))]
    rec_pt = [p for p in [point(rec)] if p] if rec else []
    series = [
        Series("other feasible candidates", others, PALETTE[6], line=False, hollow=True),
        Series("infeasible (shown for scale)", infeasible, "#C0392B", line=False, hollow=True, marker="square"),
        Series("Pareto frontier", front, PALETTE[0]),
        Series("recommendation", rec_pt, PALETTE[1], line=False, marker="diamond", highlight=True),
    ]
    if elsewhere := _other_engine_points(data, point):
        series.append(Series("best plans on the other engines", elsewhere, PALETTE[3], line=False, marker="square"))
    if online:
        refs = _slo_ref(t, "x")
        if t.budget_usd_per_hour is not None:
            refs.append(Ref("y", t.budget_usd_per_hour, f"budget {usd(t.budget_usd_per_hour)}/h", REF_COLORS["budget"]))
        x, y = Axis(f"p{num(t.percentile or 95)} latency (ms)", log=True), Axis("cost (USD/h)", log=True)
        title = "Cost vs latency: the Pareto frontier"
    else:
        refs = []
        if t.deadline_hours is not None:
            refs.append(Ref("x", t.deadline_hours, f"deadline {hours(t.deadline_hours)}", REF_COLORS["deadline"]))
        if t.budget_usd is not None:
            refs.append(Ref("y", t.budget_usd, f"budget {usd(t.budget_usd)}", REF_COLORS["budget"]))
        label = "time to train (h)" if data.kind == "training" else "run time (h)"
        x, y = Axis(label, log=True), Axis("total cost (USD)", log=True)
        title = (
            "Total cost vs " + ("time to train" if data.kind == "training" else "run time") + ": the Pareto frontier"
        )
    return xy_chart(
        "pareto",
        title,
        series,
        x,
        y,
        refs=refs,
        empty="no candidate has both a cost and a latency/time",
        note="Down and left is better: cheaper and faster. The frontier joins candidates nothing beats on both"
        + (f" among {ENGINE_NAMES.get(data.plan.get('engine', ''), 'this engine')}'s plans" if elsewhere else "")
        + f", each at least {PARETO_STEP[online]:.0%} faster than the cheaper one before it (closer is noise).",
    )


def _other_engine_points(data: ReportData, point: Callable[[Mapping[str, Any]], Point | None]) -> list[Point]:
    """The other engines' best plans and a best alternative another engine planned (``engines: [torch, onnxruntime]``):
    the chart's candidates are the winning engine's only, so the runner-up and the other device class's answer
    that "why not" names had no point."""
    engine = data.plan.get("engine")
    pts, seen = [], set()
    for c in [*(data.plan.get("engine_plans") or {}).values(), data.plan.get("alternative")]:
        if not c or c.get("engine") in (None, engine) or (key := (c["engine"], candidate_key(c))) in seen:
            continue
        seen.add(key)
        if (p := point(c)) is not None:
            pts.append(Point(p.x, p.y, f"{ENGINE_NAMES.get(c['engine'], c['engine'])}: {p.tip}"))
    return pts


def memory_chart(data: ReportData) -> str:
    """Stacked memory breakdown per device vs the GPU memory tiers that could hold it (a CPU's: no tiers)."""
    mv = data.memory
    if mv is None:
        return stacked_hbars(
            "memory", "Memory per device vs GPU tiers", [], {}, Axis("GiB"), empty="no memory estimate was given"
        )
    rows: list[tuple[str, Sequence[tuple[str, float]]]] = [(mv.label, [(k, v / GIB) for k, v in mv.breakdown.items()])]
    if mv.measured_peak_bytes:
        rows.append(("measured peak", [("measured peak (CUDA)", mv.measured_peak_bytes / GIB)]))
    need = max(mv.total_bytes, mv.measured_peak_bytes or 0) / GIB
    fits = [g for g, _ in mv.tiers if g >= need]
    shown_upto = max(need * 1.5, min(fits) if fits else need)
    refs = [Ref("x", g, label, REF_COLORS["tier"]) for g, label in mv.tiers if g <= shown_upto]
    comps = [*mv.breakdown, "measured peak (CUDA)"]
    colors = {c: PALETTE[i % len(PALETTE)] for i, c in enumerate(comps)}
    fit_note = (
        f"Smallest GPU tier that holds it: {min(fits):g} GiB."
        if fits
        else "No catalog GPU tier holds it on one device."
    )
    on_cpu = "on a CPU" in mv.label  # a CPU recommendation's own breakdown: GPU tiers say nothing of it
    return stacked_hbars(
        "memory",
        "Memory of one worker on a CPU" if on_cpu else "Memory per device vs GPU memory tiers",
        rows,
        colors,
        Axis("GiB"),
        refs=[] if on_cpu else refs,
        note=f"Total {need:.3g} GiB. {fit_note if mv.tiers and not on_cpu else ''}".strip(),
    )


def all_charts(data: ReportData) -> list[str]:
    """The charts that fit this plan's kind, in page order."""
    if data.kind == "rules":  # classic ML / ETL: a rule-based CPU pick has no curves to draw
        return []
    charts = latency_charts(data)
    if data.kind == "online":
        charts.append(rate_chart(data))
    charts += [pareto_chart(data), memory_chart(data)]
    if data.kind in ("training", "batch"):
        charts += cluster_charts(data) + spot_charts(data)
    return charts
