"""The dashboard's latency-vs-cost view, with filters (model, precision, device class, provider).

Two sources of points, each its own chart:

    planned   every online candidate of every stored plan: predicted p95 vs its cost
    measured  every stored measurement priced as the catalog instances that stand for its machine
              (``rightsize.report.pricing``): batch latency p95 vs cost per 1M samples
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from rightsize.catalog import Catalog
from rightsize.errors import SpecError
from rightsize.report.dashboard_views import shell
from rightsize.report.data import candidate_key, candidate_label
from rightsize.report.fmt import esc, finite, num, usd
from rightsize.report.pricing import price_env, usd_per_1m_samples
from rightsize.report.svg import PALETTE, Axis, Point, Series, xy_chart
from rightsize.store import Store

__all__ = ["FILTERS", "CostPoint", "cost_page", "measured_points", "planned_points"]

FILTERS = ("model", "precision", "device_class", "provider")
COSTS = {"per1m": "USD per 1M requests / samples", "hour": "USD per hour"}
TABLE_ROWS = 15


@dataclass(frozen=True)
class CostPoint:
    source: str  # planned | measured
    model: str
    precision: str
    device_class: str  # cpu | gpu
    provider: str
    label: str  # "2 × g5.xlarge fp16" or "g5.xlarge (measured b8 on host)"
    latency_ms: float  # planned: predicted request p95; measured: batch p95
    usd_per_hour: float
    usd_per_1m: float | None  # planned: per 1M requests; measured: per 1M samples
    detail: str = ""
    feasible: bool = True  # planned: meets the plan's target

    def field(self, name: str) -> str:
        return str(getattr(self, name))


def planned_points(st: Store) -> list[CostPoint]:
    """Online candidates of stored plans (the newest plan wins for a repeated workload × model × candidate: two
    specs planning one model are two sets of points)."""
    seen: set[tuple[Any, ...]] = set()
    out = []
    for a in st.artifacts(kind="plan"):
        p = a["payload"]
        if p.get("kind") != "online":
            continue
        model = str(p.get("model", "?"))
        for c in p.get("candidates") or []:
            key = (str(p.get("workload", "")), model, *candidate_key(c))
            lat = finite((c.get("latency_ms") or {}).get("p95"))
            cost = finite(c.get("cost_usd_per_hour"))
            if key in seen or lat is None or cost is None:
                continue
            seen.add(key)
            ok = "feasible" if c.get("feasible") else "infeasible: " + "; ".join(c.get("reasons") or [])
            out.append(
                CostPoint(
                    "planned",
                    model,
                    str(c.get("precision", "?")),
                    str(c.get("device_class", "?")),
                    str(c.get("provider", "?")),
                    candidate_label(c),
                    lat,
                    cost,
                    finite(c.get("cost_usd_per_1m_requests")),
                    f"plan {a['id']} ({p.get('workload', '')}), {c.get('provenance', '')}, {ok}",
                    bool(c.get("feasible")),
                )
            )
    return out


def measured_points(st: Store, catalog: Any, unpriced: list[str] | None = None) -> list[CostPoint]:
    """Stored inference measurements × the catalog instances that stand for their machine.

    Machines no catalog instance stands for are appended to ``unpriced`` ("box-a cpu")."""
    out = []
    for env in st.envs():
        ms = [m for m in st.measurements(env_id=env.id, mode="inference") if m.status == "ok" and m.latency_ms]
        for device in sorted({m.device for m in ms}):
            priced = price_env(env, device, catalog)
            if not priced and unpriced is not None:
                unpriced.append(f"{env.hostname or env.id} {device}")
            for inst in priced:
                for m in (m for m in ms if m.device == device):
                    assert m.latency_ms is not None
                    host = env.hostname or env.id
                    # a tiny variant (tests, --tiny) is not the model, and one model's input sizes cost apart: the
                    # tiny distilbert's 0.85 ms at seq_len 8 had headed the table as "distilbert c7a.large b2"
                    inputs = " ".join(f"{k} {v}" for k, v in sorted(m.input.items()))
                    out.append(
                        CostPoint(
                            "measured",
                            m.model + (" (tiny)" if m.tiny else ""),
                            m.precision,
                            inst.device_class,
                            inst.provider,
                            f"{inst.instance_type} b{m.batch_size}" + (f", {inputs}" if inputs else ""),
                            m.latency_ms.p95,
                            inst.usd_per_hour,
                            usd_per_1m_samples(inst.usd_per_hour, m.throughput_per_s),
                            f"measured on {host} ({m.device}); priced as {inst.instance_type}: {inst.how}, "
                            f"prices of {inst.price_date}",
                        )
                    )
    return out


def _apply(points: Sequence[CostPoint], filters: Mapping[str, str]) -> list[CostPoint]:
    return [p for p in points if all(not v or p.field(k) == v for k, v in filters.items())]


def _chart(
    name: str, title: str, points: Sequence[CostPoint], cost: str, x_label: str, empty: str, note: str = ""
) -> str:
    groups: dict[tuple[str, str, bool], list[CostPoint]] = {}
    for p in points:
        groups.setdefault((p.device_class, p.provider, p.feasible), []).append(p)
    series = []
    colors = {k: PALETTE[i % len(PALETTE)] for i, k in enumerate(sorted({(dc, prov) for dc, prov, _ in groups}))}
    for (dc, prov, ok), ps in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1], not kv[0][2])):
        pts = []
        for p in ps:
            y = p.usd_per_1m if cost == "per1m" else p.usd_per_hour
            if y is None:
                continue
            unit = "/1M" if cost == "per1m" else "/h"
            tip = f"{p.model} · {p.label} · {p.precision}: {num(p.latency_ms)} ms, {usd(y)}{unit} — {p.detail}"
            attrs = {"model": p.model, "precision": p.precision, "device-class": p.device_class, "provider": p.provider}
            pts.append(Point(p.latency_ms, y, tip, attrs))
        series.append(
            Series(
                f"{prov} {dc}" + ("" if ok else " (infeasible)"),
                pts,
                colors[(dc, prov)],
                line=False,
                hollow=not ok,
                marker="circle" if dc == "cpu" else "diamond",
            )
        )
    return xy_chart(name, title, series, Axis(x_label, log=True), Axis(COSTS[cost], log=True), empty=empty, note=note)


def _cost(p: CostPoint, cost: str) -> float | None:
    """The cost the user picked (``cost=``): the table is ranked by it, as the chart's y axis is drawn."""
    return p.usd_per_1m if cost == "per1m" else p.usd_per_hour


def _rows(query: Mapping[str, Sequence[str]]) -> int | None:
    """``rows=N`` table rows (default TABLE_ROWS), ``rows=all`` every one (None)."""
    raw = (query.get("rows") or [""])[0].strip().lower()
    if not raw:
        return TABLE_ROWS
    if raw == "all":
        return None
    if raw.isdigit() and int(raw) > 0:
        return int(raw)
    raise SpecError(
        "rows", f"must be a whole number above 0 or 'all', got {raw[:20]!r} (or leave it out: {TABLE_ROWS})"
    )


def _caption(rank: Sequence[CostPoint], shown_n: int, params: Mapping[str, str]) -> str:
    """How many rows the table shows of how many, where the infeasible ones are, and the link to the rest: the table
    had been cut to 15 rows without a word, under a heading that promised infeasible rows it never reached."""
    bad = sum(not p.feasible for p in rank)
    bad_shown = sum(not p.feasible for p in rank[:shown_n])
    text = f"{shown_n} of {len(rank)} rows shown"
    if bad:
        where = "all shown" if bad_shown == bad else f"{bad_shown or 'none'} of them shown"
        text += f"; {bad} infeasible planned candidates sort last ({where})"
    more = ""
    if shown_n < len(rank):
        href = "/cost?" + urlencode({k: v for k, v in params.items() if v} | {"rows": "all"})
        more = f' <a href="{esc(href)}">Show all {len(rank)}</a>, or narrow them with the filters above.'
    return f'<p class="sub" data-rows="{shown_n}" data-of="{len(rank)}">{esc(text)}.{more}</p>'


def _select(name: str, label: str, values: Sequence[str], current: str) -> str:
    opts = [f'<option value=""{" selected" if not current else ""}>all</option>']
    opts += [f'<option value="{esc(v)}"{" selected" if v == current else ""}>{esc(v)}</option>' for v in values]
    return f'<label>{esc(label)}<select name="{esc(name)}">{"".join(opts)}</select></label>'


def cost_page(st: Store, query: Mapping[str, Sequence[str]], catalog: Catalog | None) -> str:
    """Latency vs cost across stored plans and measurements priced from ``catalog`` (None: unpriced), filtered
    by the query string."""
    unpriced: list[str] = []
    planned, measured = planned_points(st), measured_points(st, catalog, unpriced)
    filters = {k: (query.get(k) or [""])[0] for k in FILTERS}
    limit = _rows(query)
    cost = (query.get("cost") or ["per1m"])[0].lower() or "per1m"
    if cost not in COSTS:
        raise SpecError("cost", f"unknown {cost!r}; use one of {', '.join(COSTS)} (or leave it out: per1m)")
    everything = planned + measured
    for k, v in filters.items():
        stored = sorted({p.field(k) for p in everything})
        if v and v not in stored:
            use = f"use one of {', '.join(stored)}" if stored else "the store has none"
            raise SpecError(k, f"no stored point has {v!r}; {use} (or leave it out: all)")
    selects = "".join(
        _select(k, k.replace("_", " "), sorted({p.field(k) for p in everything}), filters[k]) for k in FILTERS
    )
    cost_opts = "".join(
        f'<option value="{k}"{" selected" if k == cost else ""}>{esc(v)}</option>' for k, v in COSTS.items()
    )
    form = (
        f'<form class="filters" method="get" action="/cost">{selects}'
        f'<label>cost<select name="cost">{cost_opts}</select>'
        "</label>"
        + (f'<input type="hidden" name="rows" value="{esc(limit or "all")}">' if "rows" in query else "")
        + '<noscript><button type="submit">Apply</button></noscript><a href="/cost">clear filters</a></form>'
    )
    p_f, m_f = _apply(planned, filters), _apply(measured, filters)
    no_cat = "" if catalog is not None else " (no catalog was given, so measurements have no price)"
    charts = _chart(
        "cost-planned",
        "Planned candidates: predicted p95 vs cost",
        p_f,
        cost,
        "predicted request p95 (ms)",
        "no stored online plan matches the filters",
    ) + _chart(
        "cost-measured",
        "Measured on stored machines, priced from the catalog",
        m_f,
        cost,
        "measured batch latency p95 (ms)",
        "no priced measurement matches the filters" + no_cat,
        note="Not priced (no catalog instance of that CPU family or GPU): " + ", ".join(unpriced) if unpriced else "",
    )
    rank = sorted(
        p_f + m_f, key=lambda p: (not p.feasible, _cost(p, cost) is None, _cost(p, cost) or 0.0, p.latency_ms)
    )
    shown_n = len(rank) if limit is None else min(limit, len(rank))
    caption = _caption(rank, shown_n, {**filters, "cost": cost})
    rank = rank[:shown_n]
    rows = "".join(
        "<tr>"
        + "".join(
            f"<td>{esc(v)}</td>"
            for v in (
                p.source,
                p.model,
                p.label,
                p.precision,
                p.device_class,
                p.provider,
                num(p.latency_ms),
                usd(p.usd_per_hour),
                usd(p.usd_per_1m),
                p.detail,
            )
        )
        + "</tr>"
        for p in rank
    )
    head = "".join(
        f"<th>{h}</th>"
        for h in ("source", "model", "what", "precision", "device", "provider", "p95 ms", "$/h", "$/1M", "detail")
    )
    n = len(p_f) + len(m_f)
    body = (
        form + f'<p class="sub" data-count="{n}">{n} of {len(everything)} points match.</p>'
        f'<section><div class="charts">{charts}</div></section>'
        f"<section><h2>Cheapest by {esc(COSTS[cost])} first</h2>{caption}"
        f'<div class="scroll"><table data-table="cheapest"><thead><tr>{head}</tr></thead>'
        f"<tbody>{rows}</tbody></table></div></section>"
    )
    return shell("Latency vs cost", "/cost", body)
