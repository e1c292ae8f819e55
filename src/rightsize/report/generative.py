"""The one-page report of a generative plan: candidates with $ per 1M tokens, TTFT and TPOT against the
request rate, decode tokens/s against concurrency (HTML with inline SVG, or Markdown by suffix).

    write_generative_report(plan, target, "llama-7b-chat", Path("report.html"))

Every curve is the planner's own model at the band's slow edge: the continuous-batching simulator over
the candidate's replicas (TTFT, TPOT vs rate) and its projected decode step (tokens/s vs concurrency =
B x 1000 / decode_ms(B, B x mean context)). Nothing here is measured; the page says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from rightsize import __version__
from rightsize.inputfile import write_whole
from rightsize.llm.plan import LLMCandidate, LLMPlan
from rightsize.llm.plan_result import NO_TPOT
from rightsize.report.fmt import esc, md, num, usd
from rightsize.report.html import page
from rightsize.report.svg import PALETTE, REF_COLORS, Axis, Point, Ref, Series, xy_chart
from rightsize.spec.targets import GenerativeTarget

__all__ = [
    "recommendation_words",
    "render_generative_html",
    "render_generative_markdown",
    "stored_generative",
    "write_generative_report",
]

RATE_FACTORS = (0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0)
CHART_CANDIDATES = 4


def stored_generative(artifact: Mapping[str, Any]) -> tuple[LLMPlan, GenerativeTarget, str]:
    """(plan, target, name) of a stored generative plan artifact, rebuilt from the plan state stored with it
    (``LLMPlan.state``): what ``rightsize report ID`` and the dashboard's /report/ID render."""
    from rightsize.errors import SpecError

    payload = artifact["payload"]
    if "report_state" not in payload:
        run_id = artifact.get("run_id") or artifact["id"]
        raise SpecError("run", f"generative plan {run_id} was stored before its report could be written from the "
                        "store; plan it again (`rightsize plan SPEC --report PATH`)")  # fmt: skip
    plan = LLMPlan.from_state(payload["report_state"])
    return plan, GenerativeTarget.model_validate(payload["target"]), str(payload.get("name", "?"))


def recommendation_words(rec: Mapping[str, Any] | None) -> str:
    """A stored generative plan's recommendation (its ``--json`` / artifact dict) in one line."""
    if not isinstance(rec, Mapping):
        return "no plan meets the target"
    split = f"tensor parallel {rec.get('tp')}, " if rec.get("device_class") != "cpu" else ""  # a CPU: all its cores
    return (f"{rec.get('instances')} x {rec.get('instance')} ({rec.get('device')}, {split}"
            f"{rec.get('replicas')} replica(s)) at {usd(rec.get('usd_per_hour'))}/h, "
            f"{usd(rec.get('usd_per_m_output_tokens'))} per 1M output tokens")  # fmt: skip


def _shown(plan: LLMPlan) -> list[LLMCandidate]:
    return [c for c in plan.candidates if c.meets][:CHART_CANDIDATES]


def _label(c: LLMCandidate) -> str:
    return f"{c.instances} x {c.instance}" + (f" (tp {c.tp})" if c.tp > 1 else "")


def _past_capacity(pts: list[tuple[float, float, float]], target: GenerativeTarget) -> float | None:
    """The lowest swept rate ``LLMPlan.sweep`` left out as past capacity (None: every rate is under it)."""
    kept = {round(r, 9) for r, _, _ in pts}
    return next((f * target.rate_per_s for f in RATE_FACTORS if round(f * target.rate_per_s, 9) not in kept), None)


def rate_charts(plan: LLMPlan, target: GenerativeTarget) -> list[str]:
    """TTFT and TPOT (at the target's percentiles) vs the request rate, per shown candidate."""
    ttft, tpot = [], []
    ends = []  # where each candidate's capacity ends, for the note
    for i, c in enumerate(_shown(plan)):
        pts = plan.sweep(c, target, RATE_FACTORS)
        if (end := _past_capacity(pts, target)) is not None:
            ends.append(f"{_label(c)} at {num(end)} req/s")
        color, rec = PALETTE[i % len(PALETTE)], c is plan.recommendation
        name = _label(c) + (" (recommended)" if rec else "")
        ttft.append(Series(name, [Point(r, t, f"{name}: TTFT {num(t)} ms at {num(r)} req/s") for r, t, _ in pts],
                           color, dashed=True, hollow=True, highlight=rec))  # fmt: skip
        tpot.append(Series(name, [Point(r, p, f"{name}: TPOT {num(p)} ms at {num(r)} req/s") for r, _, p in pts],
                           color, dashed=True, hollow=True, highlight=rec))  # fmt: skip
    rate = Ref("x", target.rate_per_s, f"target {num(target.rate_per_s)} req/s", REF_COLORS["rate"])
    note = "Projected (roofline step times x the band's slow edge) and simulated; points past capacity are left out"
    note += f" (from {', '.join(ends)})." if ends else "."
    # one output token a request: no TPOT to chart (it drew a flat 0 under its bound)
    return [
        xy_chart("ttft-rate", f"TTFT p{target.ttft.percentile:g} vs request rate", ttft, Axis("request rate (req/s)"),
                 Axis(f"TTFT p{target.ttft.percentile:g} (ms)", log=True),
                 refs=[Ref("y", target.ttft.bound_ms, f"TTFT bound {num(target.ttft.bound_ms)} ms"), rate], note=note),
        xy_chart("tpot-rate", f"TPOT p{target.tpot.percentile:g} vs request rate", tpot, Axis("request rate (req/s)"),
                 Axis(f"TPOT p{target.tpot.percentile:g} (ms)"),
                 refs=[Ref("y", target.tpot.bound_ms, f"TPOT bound {num(target.tpot.bound_ms)} ms"), rate], note=note),
    ][: 2 if plan.judges_tpot else 1]  # fmt: skip


def _mean_context(plan: LLMPlan) -> float:
    return float(plan.prompts.mean() + plan.outputs.mean() / 2) if plan.prompts.size else 512.0


def concurrency_points(plan: LLMPlan, c: LLMCandidate) -> list[tuple[int, float]]:
    """(sequences decoding together, one replica's output tokens/s) while the KV cache holds them."""
    ctx = _mean_context(plan)
    costs, cfg = plan.replicas[(c.provider, c.region, c.instance)]
    bs = [b for b in (1, 2, 4, 8, 16, 32, 64, 128, 256) if b <= cfg.max_seqs and b * ctx <= cfg.kv_tokens]
    return [(b, b * 1000.0 / costs.decode_ms(b, b * ctx)) for b in bs]


def concurrency_chart(plan: LLMPlan) -> str:
    """Decode tokens/s of one replica against the number of sequences decoding together."""
    ctx = _mean_context(plan)
    series = []
    for i, c in enumerate(_shown(plan)):
        pts = [Point(b, tps, f"{_label(c)}: {num(tps)} tokens/s at {b} sequence{'s' if b != 1 else ''}")
               for b, tps in concurrency_points(plan, c)]  # fmt: skip
        series.append(Series(_label(c), pts, PALETTE[i % len(PALETTE)], dashed=True, hollow=True))
    return xy_chart("tokens-concurrency", "decode tokens/s vs concurrency (one replica)", series,
                    Axis("sequences decoding together", log=True), Axis("output tokens/s", log=True),
                    note=f"Mean context {ctx:.0f} tokens; stops where the KV cache is full.")  # fmt: skip


def _rows(plan: LLMPlan) -> list[list[str]]:
    def tpot(ms: float) -> str:  # the column's head says "ms"
        return plan.tpot_words(ms, cell=True).removesuffix(" ms")

    return [[c.instance, c.device, c.tp_words(), str(c.replicas), str(c.instances), usd(c.usd_per_hour, sign=False),
             f"{c.ttft_ms:.0f}", tpot(c.tpot_ms), usd(c.usd_per_m_output_tokens, sign=False),
             _kwh(c.kwh_per_m_output_tokens), f"{c.kv_tokens:,}"] for c in plan.candidates]  # fmt: skip


def _kwh(value: float | None) -> str:
    """kWh per 1M output tokens as the CLI prints them (3 decimals)."""
    return "-" if value is None else f"{value:.3f}"


PROJECTED_ONLY = (
    "Every figure is projected from the model's shape and each device's catalog numbers: nothing was "
    "timed for this plan."
)  # it had said no GPU was timed, of CPU plans too


def _head(target: GenerativeTarget) -> tuple[str, ...]:
    """The candidates table's columns, the latencies with the target's percentiles (they had read "TTFT ms")."""
    return ("instance", "device", "tp", "replicas", "instances", "$/h", f"TTFT p{target.ttft.percentile:g} ms",
            f"TPOT p{target.tpot.percentile:g} ms", "$/1M out tok", "kWh/1M out tok", "KV tokens")  # fmt: skip


def _headline(plan: LLMPlan, name: str, target: GenerativeTarget) -> str:
    rec = plan.recommendation
    goal = (f"{name}: {num(target.rate_per_s)} req/s, TTFT p{target.ttft.percentile:g} <= {num(target.ttft.bound_ms)} "
            f"ms, TPOT p{target.tpot.percentile:g} <= {num(target.tpot.bound_ms)} ms")  # fmt: skip
    if rec is None:
        return f"{goal}. No plan meets the target."
    return f"{goal}. Recommended: {recommendation_words(asdict(rec))}."


def _stats(plan: LLMPlan, rec: LLMCandidate) -> str:
    """The recommendation card's boxes, as the main report's (report.css ``.stat``)."""
    split = f"tp {rec.tp}, " if rec.device_class == "gpu" else ""  # a CPU replica: all its cores
    latency = (
        f"{num(rec.ttft_ms)} / {num(rec.tpot_ms)} ms" if plan.judges_tpot else f"{num(rec.ttft_ms)} ms / {NO_TPOT}"
    )
    boxes = [("cost per hour", usd(rec.usd_per_hour)),
             ("per 1M output tokens", usd(rec.usd_per_m_output_tokens)),
             ("TTFT / TPOT", latency),
             ("layout", f"{rec.instances} x {rec.instance}, {split}{rec.replicas} replica(s)"),
             ("energy per 1M output tokens", f"{_kwh(rec.kwh_per_m_output_tokens)} kWh")]  # fmt: skip
    if rec.watts is not None:  # what the fleet draws, and for GPUs what the GPUs do (the CLI's energy line)
        gpu = f"; {rec.gpu_work()}" if rec.gpu_work() else ""
        boxes.append(("power", f"{rec.watts:.0f} W at {rec.busy:.0%} busy{gpu}"))
    return '<div class="stats">' + "".join(f"<div class=\"stat\"><span>{esc(k)}</span><b>{esc(v)}</b></div>"
                                           for k, v in boxes) + "</div>"  # fmt: skip


def render_generative_html(
    plan: LLMPlan, target: GenerativeTarget, name: str, *, generated_at: str | None = None
) -> str:
    """The page, laid out as the main report: header, recommendation card, charts, candidates, notes."""
    head = "".join(f"<th>{esc(h)}</th>" for h in _head(target))
    body_rows = "".join("<tr>" + "".join(f"<td>{esc(v)}</td>" for v in r) + "</tr>" for r in _rows(plan))
    charts = "".join([*rate_charts(plan, target), concurrency_chart(plan)])
    notes = "".join(f"<li>{esc(n)}</li>" for n in plan.notes)
    infeasible = "".join(f"<li>{esc(i)}: {esc(r)}</li>" for i, r in plan.infeasible)
    when = generated_at or datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    meta = f"generative serving plan · generated {when} · rightsize {__version__}"
    rec = plan.recommendation
    if rec is None:
        card = f'<section class="card none"><p class="headline">{esc(_headline(plan, name, target))}</p></section>'
    else:
        card = (f'<section class="card rec"><h2>Recommendation</h2><p class="headline">{esc(rec.instances)} x '
                f'{esc(rec.instance)} <span class="badge projected">projected</span></p>'
                f'<p class="sub">{esc(_headline(plan, name, target))}</p>{_stats(plan, rec)}</section>')  # fmt: skip
    body = (f'<header><h1>{esc(name)}: generative serving plan</h1><p class="sub">{esc(meta)}</p></header><main>'
            f"{card}<p class=\"note\">{esc(PROJECTED_ONLY)}</p>"
            f'<section><h2>Evidence</h2><div class="charts">{charts}</div></section>'
            + (f'<section><h2>Candidates</h2><div class="scroll"><table data-table="candidates"><thead><tr>{head}</tr>'
               f"</thead><tbody>{body_rows}</tbody></table></div></section>" if body_rows else
               "<section><h2>Candidates</h2><p>No instance option serves it: see why below.</p></section>")
            + f"<section><h2>Notes</h2><ul>{notes}</ul></section>"
            + (f"<section><h2>Cannot serve it</h2><ul>{infeasible}</ul></section>" if infeasible else "")
            + "</main>")  # fmt: skip
    return page(f"{name}: generative plan", body)


def render_generative_markdown(plan: LLMPlan, target: GenerativeTarget, name: str) -> str:
    lines = [f"# {md(name)}: generative serving plan", "", f"generative serving plan · rightsize {__version__}", "",
             _headline(plan, name, target), "", PROJECTED_ONLY, ""]  # fmt: skip
    rows = _rows(plan)  # none serves it: a sentence, not a header over no rows
    lines += (
        ["| " + " | ".join(_head(target)) + " |", "|" + "---|" * len(_head(target))]
        if rows
        else ["No instance option serves it: see why below."]
    )
    lines += ["| " + " | ".join(md(v) for v in r) + " |" for r in rows]
    for c in _shown(plan):
        pts = plan.sweep(c, target, RATE_FACTORS)
        end = _past_capacity(pts, target)
        tpot = plan.judges_tpot  # one output token a request: TTFT alone
        lines += ["", f"TTFT{' / TPOT' if tpot else ''} vs rate, {md(_label(c))}: " + ", ".join(
            f"{num(r)}/s {num(t)}{f' / {num(p)}' if tpot else ''} ms" for r, t, p in pts)
            + (f"; past capacity at {num(end)}/s" if end is not None else "")]  # fmt: skip
        tps = ", ".join(f"{b} seq {num(t)}" for b, t in concurrency_points(plan, c))
        lines += [f"Decode tokens/s vs concurrency (one replica, mean context {_mean_context(plan):.0f} tokens), "
                  f"{md(_label(c))}: {tps}"]  # fmt: skip
    lines += ["", *[f"- {md(n)}" for n in plan.notes]]
    if plan.infeasible:
        lines += ["", "Cannot serve it:", *[f"- {md(i)}: {md(r)}" for i, r in plan.infeasible]]
    return "\n".join(lines) + "\n"


def write_generative_report(plan: LLMPlan, target: GenerativeTarget, name: str, path: Path) -> None:
    """HTML, or Markdown when ``path`` ends in .md or .markdown."""
    markdown = path.suffix.lower() in (".md", ".markdown")
    text = (render_generative_markdown if markdown else render_generative_html)(plan, target, name)
    write_whole(path, text, "--report")
