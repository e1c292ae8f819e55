"""The Markdown report: the recommendation, why / why not, and tables, for pull requests and tickets.

User strings go through ``md`` (escapes Markdown syntax and raw HTML, which GitHub would render).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rightsize import __version__
from rightsize.report.data import (
    FLEET_HEAD,
    LOAD_PEAK,
    RULES_NOTE,
    ReportData,
    candidate_key,
    candidate_label,
    fleet_rows,
    ranked_by,
)
from rightsize.report.fmt import checkpoint_every, format_bytes, hours, md, num, pct, quality_word, usd
from rightsize.report.html import env_rows, flatten

__all__ = ["render_markdown"]

TABLE_ROWS = 15


def _table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    out = ["| " + " | ".join(md(h) for h in head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    out += ["| " + " | ".join(md(c) for c in r) + " |" for r in rows]
    return out


def _headline(c: Mapping[str, Any], kind: str) -> str:
    lat = c.get("latency_ms") or {}
    if kind == "online":
        nums = (
            f"{usd(c.get('cost_usd_per_hour'))}/h, {usd(c.get('cost_usd_per_1m_requests'))} per 1M requests, "
            f"p50/p95/p99 {'/'.join(num(lat.get(k), zeros=True) for k in ('p50', 'p95', 'p99'))} ms"
        )
    else:
        total, per_h = usd(c.get("cost_usd_total")), usd(c.get("cost_usd_per_hour"))
        averaged = " averaged over the run" if c.get("purchase") == "mixed" else ""  # spot hours, then on-demand
        nums = f"{total} total, {hours(c.get('runtime_hours'))}, {per_h}/h{averaged}"
    what = ", ".join(str(v) for v in (c.get("device"), c.get("precision"), c.get("purchase")) if v)
    return f"**{md(candidate_label(c))}** ({md(what)}; {md(c.get('provenance', '?'))}) — {md(nums)}"


def _rows(data: ReportData) -> tuple[list[str], list[list[str]]]:
    kind = data.kind
    rec_key = candidate_key(data.recommendation) if data.recommendation else None
    head = ["#", "instance", "device", "count", "precision", "purchase"]
    if kind == "online":
        head += ["p95 ms", "p99 ms", "$/h", "$/1M req"]
    elif kind in ("batch", "training"):
        head += ["scale"] if kind == "training" else []  # speed-up over one worker, per worker (plan.training)
        head += ["time", "$/h", "total $"]
    else:
        head += ["$/h"]
    head += ["memory", "provenance", "feasible"]
    rows = []
    for i, c in enumerate(data.candidates[:TABLE_ROWS], 1):
        lat = c.get("latency_ms") or {}
        mark = " ★" if candidate_key(c) == rec_key else ""
        layout = (
            f" {c.get('workers_per_instance')}x{c.get('threads_per_worker')}t" if c.get("threads_per_worker") else ""
        )
        r = [
            f"{i}{mark}",
            str(c.get("instance", "")),
            f"{c.get('device', '')}{layout}",  # a CPU's k worker processes x t threads, as the HTML table
            str(c.get("count") or "-"),  # 0: no count was sized (e.g. it does not fit)
            str(c.get("precision", "")),
            str(c.get("purchase", "")),
        ]
        if kind == "online":
            r += [
                num(lat.get("p95"), zeros=True),
                num(lat.get("p99"), zeros=True),
                usd(c.get("cost_usd_per_hour")),
                usd(c.get("cost_usd_per_1m_requests")),
            ]
        elif kind in ("batch", "training"):
            r += [pct(c.get("scaling_efficiency"))] if kind == "training" else []
            r += [hours(c.get("runtime_hours")), usd(c.get("cost_usd_per_hour")), usd(c.get("cost_usd_total"))]
        else:
            r += [usd(c.get("cost_usd_per_hour"))]
        reasons = "; ".join(str(x) for x in c.get("reasons") or [])
        r += [
            format_bytes(c.get("memory_bytes")),
            str(c.get("provenance", "")),
            "yes" if c.get("feasible") else f"no: {reasons}",
        ]
        rows.append(r)
    return head, rows


def render_markdown(data: ReportData) -> str:
    plan = data.plan
    kind = data.kind
    out = [f"# rightsize: {md(plan.get('workload') or plan.get('model') or 'plan')}", ""]
    out.append(
        f"Model **{md(plan.get('model', '?'))}** · {md(kind)} plan · prices of "
        f"{md(plan.get('price_date') or '?')} · rightsize {__version__}"
    )
    out.append("")
    rec = data.recommendation
    if rec is not None:
        out += ["## Recommendation", "", _headline(rec, kind), ""]
        out += [f"- {md(w)}" for w in plan.get("why") or []]
        out += [f"- note: {md(n)}" for n in rec.get("notes") or []]  # its caveats, as the HTML card lists them
    else:
        out += ["## No candidate meets the target", ""]
        out += [f"- {md(w)}" for w in plan.get("why") or []]
        inf = plan.get("infeasible_summary") or {}
        if inf:
            out += ["", *_table(["reason", "candidates"], [[str(k), str(v)] for k, v in inf.items()])]
    alt = plan.get("alternative")
    if isinstance(alt, Mapping) or plan.get("why_not"):
        out += ["", "## Why not the alternative", ""]
        if isinstance(alt, Mapping):
            out += [_headline(alt, kind), ""]
            out += [f"- note: {md(n)}" for n in alt.get("notes") or []]
        out += [f"- {md(w)}" for w in plan.get("why_not") or []]
    if plan.get("warnings"):
        out += ["", "## Check", ""] + [f"- {md(w)}" for w in plan["warnings"]]
    title, fleet = fleet_rows(plan.get("fleet"))
    if fleet:
        out += ["", f"## {md(title)}", "", *_table(FLEET_HEAD, fleet)]
        out += ["", *[f"- {md(n)}" for n in (plan.get("fleet") or {}).get("notes") or []]]
    target = flatten(plan.get("target") or {})
    if target:
        out += ["", "## Target", "", *_table(["field", "value"], target)]
    out += ["", "## Measured on" if data.measurements else "## Environment", "", *_table(["", ""], env_rows(data.env))]
    head, rows = _rows(data)
    n = plan.get("n_candidates", len(data.candidates))
    order = ranked_by(data)
    out += [
        "",
        f"## Ranked candidates (top {len(rows)} of {n})",
        "",
        f"{order[:1].upper()}{order[1:]}.",
        "",
        *_table(head, rows),
    ]
    pareto = plan.get("pareto") or []
    if pareto:
        x = "p95 ms" if kind == "online" else "time"
        prow = [
            [
                candidate_label(c),
                num((c.get("latency_ms") or {}).get("p95")) if kind == "online" else hours(c.get("runtime_hours")),
                usd(c.get("cost_usd_per_hour")),
                usd(c.get("cost_usd_total")),
            ]
            for c in pareto
        ]
        out += ["", "## Pareto frontier", "", *_table(["candidate", x, "$/h", "total $"], prow)]
    if data.measurements:
        mrows = [
            [
                m.device,
                m.precision,
                "all" if m.threads is None else str(m.threads),  # as `rightsize results` says it
                str(m.batch_size),
                num(m.latency_ms.p50 if m.latency_ms else None),
                num(m.latency_ms.p95 if m.latency_ms else None),
                num(m.throughput_per_s),
                format_bytes(m.peak_memory_bytes),
                quality_word(m),
            ]
            for m in data.measurements
        ]
        out += ["", "## Measured profile", ""]
        head = ["device", "precision", "threads", "batch", "p50 ms", "p95 ms", "samples/s", "peak memory", "quality"]
        out += _table(head, mrows)
    elif kind == "rules":
        out += ["", "## Measured profile", "", RULES_NOTE]
    if data.memory is not None:
        mem = [[k, format_bytes(v)] for k, v in data.memory.breakdown.items()]
        at = data.memory.at_batch
        mem.append([f"total at {at}" if at else "total", format_bytes(data.memory.total_bytes)])
        fits = [g for g, _ in data.memory.tiers if g * 1024**3 >= data.memory.total_bytes]
        out += ["", "## Memory per device", ""]
        if at == LOAD_PEAK:
            out += ["At load: an int8 worker quantizes a copy of its float model, so loading, not serving, sets the "
                    "peak (the total is the candidate's memory figure).", ""]  # fmt: skip
        elif at:
            out += [
                f"At {md(at)}, the batch the recommendation runs: the estimate's components at batch 1 plus the "
                "activations its memory line adds at that batch (the total is the candidate's memory figure).",
                "",
            ]
        out += _table(["component", "bytes"], mem)
        if data.memory.tiers:
            out += [
                "",
                f"Smallest GPU tier that holds it: {min(fits):g} GiB." if fits else "No catalog GPU tier holds it.",
            ]
    spot = [c for c in data.candidates[:TABLE_ROWS] if c.get("spot")]
    if spot:
        srows = [
            [
                candidate_label(c),
                hours(c["spot"].get("expected_hours")),
                usd(c["spot"].get("expected_cost_usd")),
                pct(c["spot"].get("p_meet_deadline")),
                checkpoint_every(c["spot"], c.get("runtime_hours")),
            ]
            for c in spot
        ]
        out += ["", "## Spot with checkpoints", ""]
        out += _table(["candidate", "expected time", "expected cost", "P(deadline)", "checkpoint every"], srows)
    out += [
        "",
        "Provenance: *measured* on the environment above, *projected* from the model's traced ops on each device's "
        "model (fitted to published results), *rule* of thumb.",
        "",
    ]
    return "\n".join(out)
