"""The one-page HTML report: recommendation, why / why not, target, environment, charts, ranked table.

One self-contained file: the stylesheet is inlined from ``assets/report.css`` and the charts are
inline SVG (``rightsize.report.svg``), so it opens offline. Every user string passes through ``esc``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from importlib import resources
from typing import Any

from rightsize import __version__
from rightsize.plan.online import FLUID_METHOD
from rightsize.profile import Environment
from rightsize.report.charts import all_charts
from rightsize.report.data import FLEET_HEAD, RULES_NOTE, ReportData, candidate_key, fleet_rows, ranked_by
from rightsize.report.fmt import checkpoint_every, esc, finite, format_bytes, hours, num, pct, usd

__all__ = ["asset_text", "candidates_table", "env_rows", "flatten", "page", "render_html"]

TABLE_ROWS = 25


def asset_text(name: str) -> str:
    """A packaged file under ``rightsize/report/assets``."""
    return resources.files("rightsize.report").joinpath("assets", name).read_text(encoding="utf-8")


def page(title: str, body: str, *, extra_css: str = "", script: str = "") -> str:
    """A complete offline HTML document around ``body`` (already escaped HTML)."""
    js = f"<script>{script}</script>" if script else ""
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<meta name="generator" content="rightsize {__version__}">'
        f"<title>{esc(title)}</title><style>{asset_text('report.css')}{extra_css}</style></head>"
        f"<body>{body}{js}</body></html>"
    )


def flatten(obj: Any, prefix: str = "") -> list[tuple[str, str]]:
    """Nested dicts -> [("online.latency.bound_ms", "120")] for definition lists."""
    if isinstance(obj, Mapping):
        out: list[tuple[str, str]] = []
        for k, v in obj.items():
            if v is None or v == {} or v == []:
                continue
            out += flatten(v, f"{prefix}.{k}" if prefix else str(k))
        return out
    if isinstance(obj, list | tuple):  # a request mix's entries read "samples 1 share 0.95", not a Python dict
        return [(prefix, ", ".join(" ".join(f"{k} {_value(x)}" for k, x in v.items()) if isinstance(v, Mapping)
                                   else _value(v) for v in obj))]  # fmt: skip
    return [(prefix, _value(obj))]


def _value(v: Any) -> str:
    """One value as the spec writes it: true / false (not Python's False), floats to 4 significant digits."""
    if isinstance(v, bool):
        return "true" if v else "false"
    return num(v, 4) if isinstance(v, float) else str(v)


def _dl(rows: Sequence[tuple[str, str]], cls: str = "kv") -> str:
    return f'<dl class="{cls}">' + "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in rows) + "</dl>"


def env_rows(env: Environment | None) -> list[tuple[str, str]]:
    """The fingerprint fields a reader needs to judge the numbers."""
    if not env:
        return [("environment", "not recorded")]
    gpus = env.gpus
    gpu = ", ".join(f"{g.name} ({format_bytes(g.memory_bytes or None)})" for g in gpus) or "none"
    rows = [
        ("CPU", env.cpu_model),
        ("cores", f"{env.physical_cores} physical / {env.logical_cores} logical"),
        ("ISA", ", ".join(env.isa) or "-"),
        ("RAM", format_bytes(env.ram_bytes or None)),
        ("GPUs", gpu),
        ("torch", env.torch or "-"),
        ("python", env.python or "-"),
        ("OS", env.os or "-"),
        ("host", env.hostname or "-"),
        ("env id", env.id or "-"),
    ]
    return [(k, v) for k, v in rows if v not in ("?", "")]


def _badge(prov: object) -> str:
    p = str(prov or "?")
    return f'<span class="badge {esc(p)}">{esc(p)}</span>'


def _batching(c: Mapping[str, Any]) -> str:
    b = c.get("batching") or {}
    if not b:
        return "-"
    return f"≤{b.get('max_batch', '?')} / {num(b.get('max_wait_ms'))} ms"


def _stats(c: Mapping[str, Any], kind: str) -> list[tuple[str, str]]:
    """(label, value) boxes of the recommendation card."""
    lat = c.get("latency_ms") or {}
    if kind == "online":
        rows = [
            ("cost per hour", usd(c.get("cost_usd_per_hour"))),
            ("per 1M requests", usd(c.get("cost_usd_per_1m_requests"))),
            ("p50 / p95 / p99", " / ".join(num(lat.get(k), zeros=True) for k in ("p50", "p95", "p99")) + " ms"),
            ("utilization", pct(c.get("utilization"))),
            ("batching (max / wait)", _batching(c)),
        ]
        if lat.get("band"):
            lo, hi = lat["band"]
            rows.append(("target percentile band", f"{num(lo, zeros=True)}–{num(hi, zeros=True)} ms"))
        return rows
    rows = [
        ("total cost", usd(c.get("cost_usd_total"))),
        ("time to train" if kind == "training" else "run time", hours(c.get("runtime_hours"))),
        # a mixed run's $/h is its average: spot hours, then on-demand ones
        (
            "cost per hour (run average)" if c.get("purchase") == "mixed" else "cost per hour",
            usd(c.get("cost_usd_per_hour")),
        ),
    ]
    spot = c.get("spot") or {}
    if spot:
        rows.append(("P(meet deadline)", pct(spot.get("p_meet_deadline"))))
        rows.append(("checkpoint every", checkpoint_every(spot, c.get("runtime_hours"))))
    if (c.get("grad_accumulation") or 1) > 1:
        rows.append(("gradient accumulation", str(c["grad_accumulation"])))
    if finite(c.get("memory_bytes")):
        rows.append(
            (
                "memory / device",
                f"{format_bytes(c.get('memory_bytes'))} of {format_bytes(c.get('memory_capacity_bytes'))}",
            )
        )
    return rows


def _card(c: Mapping[str, Any], kind: str, cls: str, heading: str) -> str:
    where = " · ".join(str(v) for v in (c.get("provider"), c.get("region")) if v)
    dc = c.get("device_class") if c.get("device_class") != c.get("device") else None
    what = " · ".join(str(v) for v in (c.get("device"), dc, c.get("precision"), c.get("purchase")) if v)
    # An infeasible alternative was never simulated: show what is known and say why, not a row of "-".
    stats = [(k, v) for k, v in _stats(c, kind) if v not in ("-", "", None)]
    boxes = "".join(f'<div class="stat"><span>{esc(k)}</span><b>{esc(v)}</b></div>' for k, v in stats)
    if not c.get("feasible", True) and c.get("reasons"):
        boxes += f'<p class="infeasible">not feasible: {esc("; ".join(str(r) for r in c["reasons"]))}</p>'
    price = f"prices of {c.get('price_date') or '?'}" + (f" ({c['price_source']})" if c.get("price_source") else "")
    return (
        f'<section class="card {cls}"><h2>{esc(heading)}</h2>'
        f'<p class="headline">{esc(c.get("count") or 1)} × {esc(c.get("instance"))} {_badge(c.get("provenance"))}</p>'
        f'<p class="sub">{esc(what)} — {esc(where)} — {esc(price)}</p><div class="stats">{boxes}</div>'
        + _list(c.get("notes") or [], "notes")
        + "</section>"
    )


def _list(items: Sequence[object], cls: str) -> str:
    return f'<ul class="{cls}">' + "".join(f"<li>{esc(i)}</li>" for i in items) + "</ul>" if items else ""


def candidates_table(data: ReportData, rows: int = TABLE_ROWS) -> str:
    kind = data.kind
    cands = data.candidates[:rows]
    rec_key = candidate_key(data.recommendation) if data.recommendation else None
    # feasibility right after the rank: the table scrolls sideways on narrow screens, the verdict must not
    head = ["#", "ok", "instance", "device", "count", "precision", "purchase"]
    if kind == "online":
        head += ["batching", "p50 ms", "p95 ms", "p99 ms", "util", "$/h", "$/1M req"]
    elif kind in ("batch", "training"):
        head += ["scale"] if kind == "training" else []  # speed-up over one worker, per worker (plan.training)
        head += ["time", "$/h", "total $", "P(deadline)"]
    else:
        head += ["$/h"]
    head += ["memory", "provenance", "reasons"]
    body = []
    for i, c in enumerate(cands, 1):
        lat = c.get("latency_ms") or {}
        layout = (
            f" {c.get('workers_per_instance')}x{c.get('threads_per_worker')}t" if c.get("threads_per_worker") else ""
        )
        cells = [
            f"{c.get('device', '')}{layout}",
            str(c.get("count") or "-"),  # 0: no count was sized (e.g. it does not fit)
            str(c.get("precision", "")),
            str(c.get("purchase", "")),
        ]
        if kind == "online":
            est = "~" if c.get("latency_method") == FLUID_METHOD else ""  # estimated, not simulated
            cells += [
                _batching(c),
                est + num(lat.get("p50"), zeros=True),
                est + num(lat.get("p95"), zeros=True),
                est + num(lat.get("p99"), zeros=True),
                pct(c.get("utilization")),
                usd(c.get("cost_usd_per_hour")),
                usd(c.get("cost_usd_per_1m_requests")),
            ]
        elif kind in ("batch", "training"):
            spot = c.get("spot") or {}
            cells += [pct(c.get("scaling_efficiency"))] if kind == "training" else []
            cells += [
                hours(c.get("runtime_hours")),
                usd(c.get("cost_usd_per_hour")),
                usd(c.get("cost_usd_total")),
                pct(spot.get("p_meet_deadline")),
            ]
        else:
            cells += [usd(c.get("cost_usd_per_hour"))]
        cells.append(format_bytes(c.get("memory_bytes")))
        tds = "".join(f"<td>{esc(v)}</td>" for v in cells)
        ok = "✓" if c.get("feasible") else "✗"
        where = f"{c.get('provider', '')} {c.get('region', '')}".strip()
        inst = f'{esc(c.get("instance", ""))}<br><span class="where">{esc(where)}</span>'
        reasons = "; ".join(str(r) for r in (c.get("reasons") or []))
        cls = "rec" if candidate_key(c) == rec_key else ("ok" if c.get("feasible") else "no")
        body.append(
            f'<tr class="{cls}"><td>{i}</td><td class="verdict">{ok}</td><td>{inst}</td>{tds}'
            f"<td>{_badge(c.get('provenance'))}</td><td>{esc(reasons)}</td></tr>"
        )
    n = data.plan.get("n_candidates", len(data.candidates))
    ths = "".join(f"<th>{esc(h)}</th>" for h in head)
    return (
        f'<section><h2>Ranked candidates</h2><p class="sub">Top {len(cands)} of {esc(n)}: {esc(ranked_by(data))}.'
        + (" ~: latency estimated by a fluid approximation, not simulated." if data.kind == "online" else "")
        + "</p>"
        f'<div class="scroll"><table class="cands" data-table="candidates">'
        f"<thead><tr>{ths}</tr></thead><tbody>{''.join(body)}</tbody></table></div></section>"
    )


def _summary(data: ReportData) -> str:
    plan = data.plan
    rec = data.recommendation
    parts = []
    if rec is not None:
        parts.append(_card(rec, data.kind, "rec", "Recommendation"))
        parts.append(f"<section><h3>Why</h3>{_list(plan.get('why') or [], 'why') or '<p>-</p>'}</section>")
    else:
        inf = plan.get("infeasible_summary") or {}
        rows = "".join(f"<tr><td>{esc(k)}</td><td>{esc(v)}</td></tr>" for k, v in inf.items())
        parts.append(
            '<section class="card none"><h2>No candidate meets the target</h2>'
            + _list(plan.get("why") or [], "why")
            + (
                f"<table><thead><tr><th>reason</th><th>candidates</th></tr></thead><tbody>{rows}</tbody></table>"
                if rows
                else ""
            )
            + "</section>"
        )
    alt = plan.get("alternative")
    if isinstance(alt, Mapping):
        other = "GPU" if alt.get("device_class") == "gpu" else "CPU"
        parts.append(_card(alt, data.kind, "alt", f"Best {other} alternative: why not"))
    if plan.get("why_not"):
        parts.append(f"<section><h3>Why not the alternative</h3>{_list(plan['why_not'], 'why-not')}</section>")
    if plan.get("warnings"):
        parts.append(f'<section class="warn"><h3>Check</h3>{_list(plan["warnings"], "warnings")}</section>')
    title, mix_rows = fleet_rows(plan.get("fleet"))
    if mix_rows:
        head = "".join(f"<th>{esc(h)}</th>" for h in FLEET_HEAD)
        body = "".join("<tr>" + "".join(f"<td>{esc(v)}</td>" for v in r) + "</tr>" for r in mix_rows)
        notes = _list((plan.get("fleet") or {}).get("notes") or [], "fleet-notes")
        parts.append(f'<section class="fleet"><h3>{esc(title)}</h3><div class="scroll"><table><thead><tr>{head}'
                     f"</tr></thead><tbody>{body}</tbody></table></div>{notes}</section>")  # fmt: skip
    return "".join(parts)


def render_html(data: ReportData, *, generated_at: str | None = None) -> str:
    """The full report page for ``data``."""
    plan = data.plan
    when = generated_at or datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    title = f"rightsize: {plan.get('workload') or plan.get('model') or 'plan'}"
    meta = " · ".join(
        [
            f"model {plan.get('model', '?')}",
            f"{data.kind} plan",
            f"prices of {plan.get('price_date') or '?'}",
            f"generated {when}",
            f"rightsize {__version__}",
        ]
    )
    target = flatten(plan.get("target") or {})
    measured_on = "measured on" if data.measurements else "environment"
    charts = "".join(all_charts(data))
    assumptions = flatten(plan.get("assumptions") or {})
    body = (
        f'<header><h1>{esc(title)}</h1><p class="sub">{esc(meta)}</p></header><main>'
        + _summary(data)
        + '<section class="cols"><div><h3>Target</h3>'
        + (_dl(target) if target else "<p>-</p>")
        + f"</div><div><h3>{esc(measured_on.capitalize())}</h3>{_dl(env_rows(data.env))}</div></section>"
        + (f"<section><p>{esc(RULES_NOTE)}</p></section>" if data.kind == "rules" else "")
        + (f'<section><h2>Evidence</h2><div class="charts">{charts}</div></section>' if charts else "")
        + candidates_table(data)
        + (
            f"<section><details><summary>Assumptions and defaults</summary>{_dl(assumptions)}</details></section>"
            if assumptions
            else ""
        )
        + f"</main><footer>Every number says where it came from: {_badge('measured')} on the environment above, "
        f"{_badge('projected')} from the model's traced ops on each device's model (fitted to published results), "
        f"{_badge('rule')} from a rule of thumb. "
        f"Planning took {esc(num(plan.get('elapsed_s')))} s.</footer>"
    )
    return page(title, body)
