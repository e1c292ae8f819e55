"""``/compare?run=A&run=B``: stored runs side by side.

    measured runs (bench)   one column per machine, latency and throughput vs batch, matching configs joined
    plan runs               each plan's pick, its cost, its predicted p95 against its SLO, the options side by side

A bench run and a plan run hold different things (a machine's measurements, a priced recommendation), and a run
with neither has nothing to line up: such a mix is not compared; the page names each run, what it holds, and links
the comparisons that can be made. Two plans had rendered as empty machine columns and an empty table.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlencode

from rightsize.inputfile import shown
from rightsize.profile import Measurement
from rightsize.report.dashboard_views import ok_measurements, shell, table
from rightsize.report.data import candidate_label, targets_of
from rightsize.report.fmt import esc, finite, hours, num, usd
from rightsize.report.html import env_rows
from rightsize.report.svg import PALETTE, Axis, Marker, Point, Series, xy_chart
from rightsize.store import RunInfo, Store

__all__ = ["compare_page"]

_MARKERS: tuple[Marker, ...] = ("circle", "square", "diamond")
OPTIONS_TOP = 8  # options per plan in the side-by-side table (its best-ranked; every option is in its report)
_HOLDS = {
    "measured": "measurements of one machine (compared as latency and throughput per batch)",
    "plan": "a plan: a recommendation and its priced options (compared pick by pick)",
    "": "nothing to compare: no successful measurement and no plan (its page shows what it stored)",
    "generative-plan": "a generative (LLM) plan: not compared here (its page lists its candidates)",
}


def compare_page(st: Store, run_ids: Sequence[str]) -> str:
    """Runs side by side, as measured runs or as plans; a mix of the two is named run by run, not compared."""
    ids = list(dict.fromkeys(run_ids))
    if len(ids) < 2:
        return shell(
            "Compare runs", "", '<p>Pick at least two runs on the <a href="/">runs page</a> to compare them.</p>'
        )
    runs = [st.run(i) for i in ids]
    plans = {r.id: st.artifacts(kind="plan", run_id=r.id) for r in runs}  # newest first
    measured = {r.id for r in runs if ok_measurements(st.measurements(run_id=r.id))}
    what = {r.id: "plan" if plans[r.id] else "measured" if r.id in measured else "" for r in runs}
    kinds = set(what.values())
    if kinds == {"plan"}:
        return _plans_page(runs, [plans[r.id][0] for r in runs])
    if kinds == {"measured"}:
        return _measured_page(st, runs)
    return _not_comparable(runs, what)


def _holds(run: RunInfo, what: str) -> str:
    return _HOLDS["generative-plan" if not what and run.kind == "generative-plan" else what]


def _not_comparable(runs: Sequence[RunInfo], what: Mapping[str, str]) -> str:
    rows = [
        [
            f'<a href="/run/{esc(r.id)}">{esc(shown(r.id))}</a>',
            shown(r.kind),
            shown(r.name),
            _holds(r, what[r.id]),
        ]
        for r in runs
    ]
    links = []
    for kind, label in (("measured", "measured"), ("plan", "plan")):
        group = [r.id for r in runs if what[r.id] == kind]
        if len(group) >= 2:
            href = "/compare?" + urlencode([("run", i) for i in group])
            links.append(f'<a href="{esc(href)}">Compare the {len(group)} {label} runs</a>')
    body = (
        '<p class="warn">These runs cannot be compared with one another: a bench run holds one machine\'s '
        "measurements, a plan run holds a recommendation and its priced options, and a run with neither has nothing "
        "to line up. Pick runs of one kind.</p>"
        + table(["run", "kind", "name", "holds"], rows, "not-comparable", raw=0)
        + (f"<p>{' · '.join(links)}</p>" if links else '<p>Back to the <a href="/">runs page</a>.</p>')
    )
    return shell("Cannot compare these runs", "", body)


def _slo(p: Mapping[str, Any]) -> tuple[float | None, float | None]:
    """(percentile, bound ms) of a plan's latency target (None, None: it has none)."""
    t = targets_of(p.get("target") or {})
    return t.percentile, t.bound_ms


def _latency_vs_slo(c: Mapping[str, Any] | None, p: Mapping[str, Any]) -> str:
    """'p95 24.9 ms of ≤ 100 ms (25%)': the predicted latency at the percentile the plan's SLO names."""
    if not isinstance(c, Mapping):
        return "-"
    pct_, bound = _slo(p)
    lat = c.get("latency_ms") or {}
    at = finite(lat.get("target_percentile")) if pct_ is not None else None
    value, label = (at, f"p{pct_:g}") if at is not None and pct_ is not None else (finite(lat.get("p95")), "p95")
    if value is None:
        return "-"
    if bound is None:
        return f"{label} {num(value)} ms (no latency target)"
    return f"{label} {num(value)} ms of ≤ {num(bound)} ms ({value / bound:.0%})"


def _picks(runs: Sequence[RunInfo], arts: Sequence[Mapping[str, Any]]) -> str:
    """One column per plan, one row per fact an engineer weighs: the target, the pick, its cost and latency."""
    facts: list[tuple[str, list[str]]] = []

    def row(label: str, cells: list[str]) -> None:
        facts.append((label, cells))

    ps = [a["payload"] for a in arts]
    recs = [p.get("recommendation") if isinstance(p.get("recommendation"), Mapping) else None for p in ps]
    row("workload", [shown(p.get("workload") or p.get("name") or "-") for p in ps])
    row("model", [shown(p.get("model") or "-") for p in ps])
    row("plan kind", [str(p.get("kind", "-")) for p in ps])
    rates = [targets_of(p.get("target") or {}).rate_per_s for p in ps]
    row("target rate", [f"{num(r)} req/s" if r is not None else "-" for r in rates])
    slos = [_slo(p) for p in ps]
    row("latency SLO", [f"p{q:g} ≤ {num(b)} ms" if q is not None and b is not None else "none" for q, b in slos])
    row("pick", [f"{candidate_label(c)} ({c.get('provider', '?')} {c.get('region', '')}, {c.get('device', '?')})"
                 if c else "no feasible candidate" for c in recs])  # fmt: skip
    row("$/h", [usd((c or {}).get("cost_usd_per_hour")) for c in recs])
    row("$/1M requests", [usd((c or {}).get("cost_usd_per_1m_requests")) for c in recs])
    row("predicted latency vs SLO", [_latency_vs_slo(c, p) for c, p in zip(recs, ps, strict=True)])
    if any(targets_of(p.get("target") or {}).deadline_hours is not None for p in ps):  # a batch or training plan
        deadlines = [targets_of(p.get("target") or {}).deadline_hours for p in ps]
        row("deadline", [hours(d) if d is not None else "none" for d in deadlines])
    if any(finite((c or {}).get("runtime_hours")) is not None for c in recs):
        row("run time", [hours(h) if (h := finite((c or {}).get("runtime_hours"))) is not None else "-" for c in recs])
        row("total cost", [usd((c or {}).get("cost_usd_total")) for c in recs])
    cands = [list(p.get("candidates") or []) for p in ps]
    row("feasible options", [f"{sum(bool(c.get('feasible')) for c in cs)} of {len(cs)}" for cs in cands])
    row("prices of", [str(p.get("price_date") or "-") for p in ps])
    heads = "".join(
        f'<th><a href="/run/{esc(r.id)}">{esc(shown(r.id))}</a> · <a href="/report/{esc(a["id"])}">report</a></th>'
        for r, a in zip(runs, arts, strict=True)
    )
    body = "".join(
        f"<tr><th>{esc(label)}</th>{''.join(f'<td>{esc(c)}</td>' for c in cells)}</tr>" for label, cells in facts
    )
    return (
        f'<div class="scroll"><table data-table="compare-plans"><thead><tr><th>plan</th>{heads}</tr></thead>'
        f"<tbody>{body}</tbody></table></div>"
    )


def _hardware(c: Mapping[str, Any]) -> tuple[Any, ...]:
    """One option across plans: the same machines bought the same way (batching is each plan's own choice)."""
    return (c.get("instance"), c.get("provider"), c.get("region"), c.get("count"), c.get("precision"),
            c.get("purchase"))  # fmt: skip


def _options(arts: Sequence[Mapping[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """(head, rows): each plan's OPTIONS_TOP best-ranked options and its pick, one row per option, each plan's rank,
    $/h and predicted p95 (or why it misses) side by side; best rank first."""
    ranked: list[dict[tuple[Any, ...], tuple[int, Mapping[str, Any]]]] = []
    wanted: dict[tuple[Any, ...], int] = {}
    for a in arts:
        p = a["payload"]
        first: dict[tuple[Any, ...], tuple[int, Mapping[str, Any]]] = {}
        for c in p.get("candidates") or []:
            first.setdefault(_hardware(c), (len(first), c))
        ranked.append(first)
        rec = p.get("recommendation")
        picks = [_hardware(rec)] if isinstance(rec, Mapping) else []
        for key in [*list(first)[:OPTIONS_TOP], *picks]:
            if key in first:
                wanted[key] = min(wanted.get(key, first[key][0]), first[key][0])
    rows = []
    for key in sorted(wanted, key=lambda k: wanted[k]):
        c0 = next(f[key][1] for f in ranked if key in f)
        cells = []
        for f in ranked:
            if key not in f:
                cells.append("not in this plan")
                continue
            rank, c = f[key]
            ok = "meets" if c.get("feasible") else "misses: " + "; ".join(str(x) for x in (c.get("reasons") or [])[:1])
            cells.append(", ".join([f"#{rank + 1}", f"{usd(c.get('cost_usd_per_hour'))}/h", *_speed(c), ok]))
        rows.append([f"{candidate_label(c0)} ({c0.get('provider', '?')} {c0.get('region', '')})", *cells])
    return ["option", *(f"plan {shown(a['run_id'] or a['id'])}" for a in arts)], rows


def _speed(c: Mapping[str, Any]) -> list[str]:
    """An option's predicted p95 (online), else its run time and total (jobs); nothing for a plan by rules (it had
    read "p95 - ms")."""
    if (p95 := finite((c.get("latency_ms") or {}).get("p95"))) is not None:
        return [f"p95 {num(p95)} ms"]
    if (h := finite(c.get("runtime_hours"))) is not None:
        return [hours(h), f"{usd(c.get('cost_usd_total'))} total"]
    return []


def _plans_page(runs: Sequence[RunInfo], arts: Sequence[Mapping[str, Any]]) -> str:
    head, rows = _options(arts)
    body = (
        f'<section data-compare="{len(runs)}"><h2>Picks</h2>{_picks(runs, arts)}</section>'
        f'<section><h2>Options side by side</h2><p class="sub">Each plan\'s {OPTIONS_TOP} best-ranked options and '
        "its pick, the same machines on one row: the rank in that plan, $/h, predicted p95 and whether it meets that "
        f"plan's target. Every option is in each plan's report.</p>{table(head, rows, 'compare-options')}</section>"
    )
    return shell(f"Compare {len(runs)} plans", "", body)


def _config(m: Measurement) -> tuple[str, str, str, str, int, str]:
    inp = ",".join(f"{k}={v}" for k, v in sorted(m.input.items()))
    return (m.model, m.mode, m.device, m.precision, m.batch_size, inp)


def _measured_page(st: Store, runs: Sequence[RunInfo]) -> str:
    """Measured runs side by side: one column each (machine, best numbers), then matching configs joined."""
    envs = [st.env(r.env_id) if r.env_id else None for r in runs]
    per_run = [{_config(m): m for m in ok_measurements(st.measurements(run_id=r.id))} for r in runs]
    cols, lat_series, thr_series = [], [], []
    for i, (r, env, ms) in enumerate(zip(runs, envs, per_run, strict=True)):
        best = max(ms.values(), key=lambda m: m.throughput_per_s or 0, default=None)
        best_txt = (
            f"{num(best.throughput_per_s)} samples/s ({best.device} {best.precision} b{best.batch_size})"
            if best
            else "no ok measurement"
        )
        dl = "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in env_rows(env)[:6])
        cols.append(
            f'<div class="compare-col" data-run="{esc(r.id)}"><h3><a href="/run/{esc(r.id)}">{esc(r.id)}</a> · '
            f"{esc((env.hostname if env else '') or r.env_id or '?')}</h3>"
            f'<p class="sub">{esc(r.kind)} · model {esc(r.model or "-")} · '
            f'{esc(r.created_at)}</p><dl class="kv">{dl}<dt>results</dt><dd>{esc(len(ms))}</dd>'
            f"<dt>best throughput</dt><dd>{esc(best_txt)}</dd></dl></div>"
        )
        groups: dict[tuple[str, str], list[Measurement]] = {}
        for m in ms.values():
            groups.setdefault((m.device, m.precision), []).append(m)
        for j, ((dev, prec), gm) in enumerate(sorted(groups.items())):
            gm.sort(key=lambda m: m.batch_size)
            name = f"{r.id[:6]} ({(env.hostname if env else '') or '?'}) {dev} {prec}"
            color = PALETTE[(i * 3 + j) % len(PALETTE)]
            marker = _MARKERS[i % 3]
            lat_series.append(
                Series(
                    name,
                    [
                        Point(m.batch_size, m.latency_ms.p50, f"{name} b{m.batch_size}: {num(m.latency_ms.p50)} ms")
                        for m in gm
                        if m.latency_ms
                    ],
                    color,
                    marker=marker,
                )
            )
            thr_series.append(
                Series(
                    name,
                    [
                        Point(m.batch_size, m.throughput_per_s, f"{name} b{m.batch_size}: {num(m.throughput_per_s)}/s")
                        for m in gm
                        if m.throughput_per_s
                    ],
                    color,
                    marker=marker,
                )
            )
    keys = sorted({k for ms in per_run for k in ms}, key=lambda k: (k[0], k[1], k[2], k[3], k[5], k[4]))
    head = (
        ["model", "device", "precision", "batch"]
        + [f"p50 ms {r.id[:6]}" for r in runs]
        + [f"samples/s {r.id[:6]}" for r in runs]
    )
    head += [f"speed {r.id[:6]} vs {runs[0].id[:6]}" for r in runs[1:]]
    rows = []
    for k in keys:
        ms_k = [ms.get(k) for ms in per_run]
        lat = [num(m.latency_ms.p50) if m and m.latency_ms else "-" for m in ms_k]
        thr = [num(m.throughput_per_s) if m else "-" for m in ms_k]
        base = finite(ms_k[0].throughput_per_s) if ms_k[0] else None
        ratios = [f"×{(finite(m.throughput_per_s) or 0) / base:.2f}" if m and base else "-" for m in ms_k[1:]]
        rows.append([k[0], k[2], k[3], str(k[4]), *lat, *thr, *ratios])
    same = len({e.id if e else r.id for e, r in zip(envs, runs, strict=True)}) < len(envs)
    warn = '<p class="warn">Some of these runs come from the same machine.</p>' if same else ""
    x = Axis("batch size (samples)", log=True)
    charts = xy_chart(
        "compare-latency", "p50 latency per batch, run by run", lat_series, x, Axis("p50 latency (ms)", log=True)
    ) + xy_chart("compare-throughput", "Throughput, run by run", thr_series, x, Axis("samples/s", log=True))
    body = (
        f'{warn}<section class="compare" data-compare="{len(runs)}">{"".join(cols)}</section>'
        f'<section><div class="charts">{charts}</div></section>'
        f"<section><h2>Matching configurations</h2>{table(head, rows, 'compare')}</section>"
    )
    return shell(f"Compare {len(runs)} runs", "", body)
