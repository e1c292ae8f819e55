"""The dashboard's pages, each a function (Store, query) -> HTML. Read-only: no page writes the store.

/                 runs (pick ≥ 2 to compare), environments, stored plans, load tests
/run/ID           one run: its environment, measurements and charts
/compare?run=A&run=B   runs side by side (dashboard_compare)
/cost?model=&precision=&device_class=&provider=&cost=&rows=   latency vs cost with filters
/report/ID        a stored plan as the full HTML report
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rightsize.catalog import Catalog
from rightsize.inputfile import shown
from rightsize.profile import Environment, Measurement
from rightsize.report.charts import latency_charts
from rightsize.report.data import ReportData, candidate_label
from rightsize.report.fmt import esc, finite, format_bytes, num, pct, usd
from rightsize.report.html import env_rows, page
from rightsize.store import Store

__all__ = ["index_page", "not_found", "ok_measurements", "report_page", "run_page", "shell", "table"]

SCRIPT = """
document.querySelectorAll('form.filters select').forEach(s => s.addEventListener('change', () => s.form.submit()));
const boxes = document.querySelectorAll('input[name=run]');
const btn = document.getElementById('compare-btn');
function sync() { if (btn) { const n = [...boxes].filter(b => b.checked).length; btn.disabled = n < 2;
  btn.textContent = n < 2 ? 'Pick 2 or more runs to compare' : 'Compare ' + n + ' runs'; } }
boxes.forEach(b => b.addEventListener('change', sync)); sync();
function cellValue(row, i) { const t = row.cells[i] ? row.cells[i].textContent.trim() : '';
  const n = parseFloat(t.replace(/[$,%]/g, '')); return isNaN(n) ? t.toLowerCase() : n; }
document.querySelectorAll('table[data-table]').forEach(table => {
  const body = table.tBodies[0]; if (!body) return;
  const filter = document.createElement('input');
  filter.type = 'search'; filter.placeholder = 'filter rows'; filter.className = 'table-filter';
  filter.addEventListener('input', () => { const q = filter.value.toLowerCase();
    [...body.rows].forEach(r => { r.hidden = q !== '' && !r.textContent.toLowerCase().includes(q); }); });
  table.parentNode.insertBefore(filter, table);
  [...table.tHead.rows[0].cells].forEach((th, i) => {
    th.title = 'sort'; th.style.cursor = 'pointer';
    th.addEventListener('click', () => {
      const asc = th.dataset.sort !== 'asc';
      [...table.tHead.rows[0].cells].forEach(h => { delete h.dataset.sort; });
      th.dataset.sort = asc ? 'asc' : 'desc';
      const rows = [...body.rows].sort((a, b) => { const x = cellValue(a, i), y = cellValue(b, i);
        return (x < y ? -1 : x > y ? 1 : 0) * (asc ? 1 : -1); });
      rows.forEach(r => body.appendChild(r)); }); }); });
"""


def shell(title: str, active: str, body: str) -> str:
    links = [("/", "Runs"), ("/cost", "Latency vs cost"), ("/api/runs", "JSON API")]
    nav = "".join(f'<a href="{h}"{" class=active" if h == active else ""}>{esc(t)}</a>' for h, t in links)
    head = f"<header><h1>{esc(title)}</h1><nav>{nav}</nav></header>"
    return page(f"rightsize dashboard: {title}", f"{head}<main>{body}</main>", script=SCRIPT)


def table(head: Sequence[str], rows: Sequence[Sequence[str]], name: str, raw: int = -1) -> str:
    """A table; cells are escaped except column ``raw`` (already-built HTML such as a link)."""
    ths = "".join(f"<th>{esc(h)}</th>" for h in head)
    trs = "".join(
        "<tr>" + "".join(f"<td>{c if i == raw else esc(c)}</td>" for i, c in enumerate(r)) + "</tr>" for r in rows
    )
    return (
        f'<div class="scroll"><table data-table="{esc(name)}"><thead><tr>{ths}</tr></thead>'
        f"<tbody>{trs}</tbody></table></div>"
    )


def _gpus(env: Environment | None) -> str:
    return ", ".join(g.name for g in env.gpus) if env is not None and env.gpus else "none"


def index_page(st: Store) -> str:
    runs = st.runs()
    envs = {e.id: e for e in st.envs()}
    rows = []
    for r in runs:
        env = envs.get(r.env_id or "")
        box = f'<input type="checkbox" name="run" value="{esc(r.id)}" aria-label="compare {esc(r.id)}">'
        cells = [
            box,
            f'<a href="/run/{esc(r.id)}">{esc(shown(r.id))}</a>',
            esc(r.created_at),
            esc(shown(r.kind)),
            esc(shown(r.name)),
            esc(shown(r.model)),
            esc((env.hostname if env else "") or r.env_id or ""),
            esc(r.status),
            esc(r.n_measurements),
            esc(r.n_failed),
        ]
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    head = "".join(
        f"<th>{h}</th>"
        for h in ("", "run", "created", "kind", "name", "model", "machine", "status", "results", "failed")
    )
    runs_html = (
        '<section><h2>Runs</h2><form method="get" action="/compare">'
        f'<div class="scroll"><table data-table="runs"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table></div>"
        '<p><button id="compare-btn" type="submit">Compare selected runs</button></p></form></section>'
        if rows  # an empty store had shown two header-only tables
        else "<section><h2>Runs</h2><p>No run stored yet: <code>rightsize bench SPEC</code> or <code>rightsize plan "
        "SPEC</code> stores one.</p></section>"
    )
    env_rows_ = [
        [
            e.id,
            e.hostname,
            e.cpu_model,
            f"{e.physical_cores}/{e.logical_cores}",
            format_bytes(e.ram_bytes or None),
            _gpus(e),
            e.torch or "-",
        ]
        for e in envs.values()
    ]
    envs_html = (
        "<section><h2>Environments</h2>"
        + table(["id", "host", "CPU", "cores (phys/log)", "RAM", "GPUs", "torch"], env_rows_, "envs")
        + "</section>"
        if env_rows_
        else ""
    )
    plans = []
    for a in st.artifacts(kind="plan"):
        p = a["payload"]
        rec = p.get("recommendation")
        what = candidate_label(rec) if isinstance(rec, Mapping) else "no feasible candidate"
        link = f'<a href="/report/{esc(a["id"])}">{esc(a["id"])}</a>'
        plans.append(
            [
                link,
                a["created_at"],
                shown(p.get("workload", "")),
                shown(p.get("model", "")),
                str(p.get("kind", "")),
                what,
                usd((rec or {}).get("cost_usd_per_hour")),
            ]
        )
    plans_html = (
        "<section><h2>Plans</h2>"
        + (
            table(["report", "created", "workload", "model", "kind", "recommendation", "$/h"], plans, "plans", raw=0)
            if plans
            else "<p>No plan stored yet: run <code>rightsize plan SPEC</code>.</p>"
        )
        + "</section>"
    )
    gen_html = _generative_plans(st)
    tests = [
        [a["id"], a["created_at"], shown(a["payload"].get("name", a["payload"].get("mode", "")))]
        for a in st.artifacts(kind="loadtest")
    ]
    tests_html = (
        f"<section><h2>Load tests</h2>{table(['id', 'created', 'name'], tests, 'loadtests')}</section>" if tests else ""
    )
    empty = "" if runs else f"<p>The store {esc(st.path)} has no runs yet: run <code>rightsize bench SPEC</code>.</p>"
    return shell("Runs and environments", "/", empty + runs_html + envs_html + plans_html + gen_html + tests_html)


def _generative_plans(st: Store) -> str:
    """Stored generative (LLM serving) plans: the recommendation, its cost per hour and per 1M output tokens."""
    rows = []
    for a in st.artifacts(kind="generative-plan"):
        p = a["payload"]
        rec = p.get("recommendation")
        if isinstance(rec, Mapping):
            what = f"{rec.get('instances')} x {rec.get('instance')} ({rec.get('device')}, tp {rec.get('tp')})"
            cells = [usd(rec.get("usd_per_hour")), f"{rec.get('usd_per_m_output_tokens', 0):.2f}",
                     f"{rec.get('ttft_ms', 0):.0f}", f"{rec.get('tpot_ms', 0):.1f}"]  # fmt: skip
        else:
            what, cells = "no plan meets the target", ["-", "-", "-", "-"]
        # the full report when the plan state was stored with it (rightsize report ID); else the run's page
        to = f"/report/{a['id']}" if "report_state" in p else f"/run/{a['run_id'] or a['id']}"
        link = f'<a href="{esc(to)}">{esc(a["id"])}</a>'
        rows.append([link, a["created_at"], str(p.get("name", "")), str(p.get("model", "")), what, *cells])
    if not rows:
        return ""
    head = ["id", "created", "workload", "model", "recommendation", "$/h", "$/1M out tok", "TTFT ms", "TPOT ms"]
    return f"<section><h2>Generative plans</h2>{table(head, rows, 'generative-plans', raw=0)}</section>"


def _generative_run(st: Store, run_id: str, name: str, created: str) -> str:
    """A stored generative plan: its recommendation, every candidate with $/1M output tokens, TTFT and TPOT,
    what cannot serve it and the notes (all projected: the plan measured nothing)."""
    arts = st.artifacts(kind="generative-plan", run_id=run_id)
    if not arts:
        return f'<p class="sub">generative plan · {esc(name)} · {esc(created)}</p><p>No plan was stored.</p>'
    from rightsize.report.generative import PROJECTED_ONLY, recommendation_words  # llm.plan: only for this page

    p = arts[0]["payload"]
    what = recommendation_words(p.get("recommendation"))
    # a CPU row has no tensor parallelism: "-" (stored as 1 before its --json tp was null)
    rows = [[str(c.get("instance")), str(c.get("device")), "-" if c.get("device_class") == "cpu" else str(c.get("tp")),
             str(c.get("replicas")),
             usd(c.get("usd_per_hour")), num(c.get("ttft_ms")), num(c.get("tpot_ms")),
             usd(c.get("usd_per_m_output_tokens")), "yes" if c.get("meets") else f"no: {c.get('why') or ''}"]
            for c in p.get("candidates") or []]  # fmt: skip
    g = p.get("target") or {}
    pct_of = {k: (g.get(k) or {}).get("percentile") for k in ("ttft", "tpot")}
    ttft, tpot = (f"{k.upper()}{f' p{v:g}' if isinstance(v, int | float) else ''} ms" for k, v in pct_of.items())
    head = ["instance", "device", "tp", "replicas", "$/h", ttft, tpot, "$/1M out tok", "meets"]

    def option(i: dict[str, Any]) -> str:  # "p4d.24xlarge tp=8" (a tensor-parallel degree), or the instance
        return str(i.get("instance")) + (f" tp={i['tp']}" if i.get("tp") else "")

    cannot = "".join(f"<li>{esc(option(i))}: {esc(i.get('reason'))}</li>" for i in p.get("infeasible") or [])
    notes = "".join(f"<li>{esc(n)}</li>" for n in p.get("notes") or [])
    return (f'<p class="sub">generative plan · {esc(name)} · model {esc(p.get("model", "-"))} · {esc(created)}</p>'
            f'<section class="card rec"><h2>Recommendation</h2><p class="headline">{esc(what)}</p>'
            f'<p class="note">{esc(PROJECTED_ONLY)}</p>'
            + (f'<p><a href="/report/{esc(arts[0]["id"])}">Full report</a>: TTFT and TPOT vs rate, tokens/s vs '
               "concurrency</p>" if "report_state" in p else "") + "</section>"
            f"<section><h2>Candidates</h2>{table(head, rows, 'generative-candidates')}</section>"
            + (f"<section><h2>Cannot serve it</h2><ul>{cannot}</ul></section>" if cannot else "")
            + (f"<section><h2>Notes</h2><ul>{notes}</ul></section>" if notes else ""))  # fmt: skip


def _pcts(d: Mapping[str, Any] | None, keys: Sequence[str] = ("p50", "p95", "p99")) -> str:
    d = d or {}
    return " / ".join(num(d.get(k)) for k in keys)


def _loadtest_sections(st: Store, run_id: str) -> str:
    """A load test's result: what was offered and achieved, the latency percentiles, errors and validity."""
    out = ""
    for a in st.artifacts(kind="loadtest", run_id=run_id):
        p = a["payload"]
        if p.get("kind") == "loadtest-generate":  # TTFT/TPOT, not request latency (as `rightsize results` reads it)
            out += _generation_loadtest_section(a["id"], p)
            continue
        lat, lag = p.get("latency_ms"), p.get("send_lag_ms") or {}
        valid = "yes" if p.get("valid") else "no: " + "; ".join(map(str, p.get("problems") or []))
        rows = [
            ("target", str(p.get("url", "-"))),
            ("load", f"{p.get('mode', '?')} loop, {p.get('arrival') or '-'}"),
            ("offered / achieved", f"{num(p.get('offered_rate_per_s'))} / {num(p.get('achieved_rate_per_s'))} req/s"),
            ("sent / ok", f"{p.get('requests_sent', '-')} / {p.get('responses_ok', '-')}"),
            ("latency p50 / p90 / p95 / p99 / max (ms)", _pcts(lat, ("p50", "p90", "p95", "p99", "max"))),
            ("send lag p99 (ms)", num(lag.get("p99"))),
            ("errors", ", ".join(f"{k}: {v}" for k, v in (p.get("errors") or {}).items()) or "none"),
            ("valid", valid),
        ]
        dl = "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in rows)
        out += f'<section><h2>Load test {esc(a["id"])}</h2><dl class="kv">{dl}</dl></section>'
    return out


def _validate_sections(st: Store, run_id: str) -> str:
    """A validation: the plan it served and, per load level, predicted vs measured latency."""
    out = ""
    for a in st.artifacts(kind="validate", run_id=run_id):
        p = a["payload"]
        if p.get("kind") == "validate-generative":  # the simulator's TTFT/TPOT per level, not latency points
            out += _generation_validate_section(a["id"], p)
            continue
        cand = p.get("candidate") or {}
        what = (f"{cand.get('instance', '?')} ({cand.get('device', '?')}, {cand.get('precision', '?')}), "
                f"max batch {cand.get('max_batch', '?')}, wait {num(cand.get('max_wait_ms'))} ms")  # fmt: skip
        rows = [[str(pt.get("label", "")), num(pt.get("rate_per_s")), pct(pt.get("utilization")),
                 _pcts(pt.get("predicted_ms")), _pcts(pt.get("measured_ms")), _errors(pt.get("error_pct"))]
                for pt in p.get("points") or []]  # fmt: skip
        head = ["load", "rate/s", "busy", "predicted p50 / p95 / p99 ms", "measured p50 / p95 / p99 ms", "error"]
        out += (f'<section><h2>Validation {esc(a["id"])}</h2><p class="sub">served {esc(what)}</p>'
                f"{table(head, rows, 'validation')}</section>")  # fmt: skip
    return out


def _generation_loadtest_section(art_id: str, p: Mapping[str, Any]) -> str:
    """A generation load test (``rightsize loadtest URL --generate``, payload kind ``loadtest-generate``): the
    schedule offered, the requests sent and answered, TTFT and TPOT percentiles, output tokens/s and validity."""
    from rightsize.llm.loadgen import load_problems

    sent, answered, lag = p.get("sent"), p.get("answered"), finite(p.get("send_lag_p99_ms"))
    problems = load_problems(sent, answered, lag, p.get("recorded"))
    valid = "yes" if p.get("valid") else "no" + (": " + "; ".join(problems) if problems else "")
    refused = {f"HTTP {k}": v for k, v in (p.get("statuses") or {}).items() if k not in ("0", "200")}
    errors = {**(p.get("errors") or {}), **refused}

    def tokens(which: str) -> str:
        lo_hi = p.get(which)
        if not isinstance(lo_hi, list | tuple) or len(lo_hi) != 2:
            return "-"
        return f"{lo_hi[0]}" if lo_hi[0] == lo_hi[1] else f"{lo_hi[0]}-{lo_hi[1]}"

    rows = [
        ("target", str(p.get("url", "-"))),
        ("load", f"open loop, poisson; prompts {tokens('prompt_tokens')}, outputs {tokens('output_tokens')} tokens"),
        # the schedule is fixed before the run: what was sent is what was offered, within the send lag
        ("offered rate", f"{num(p.get('rate_per_s'))} req/s (send lag p99 {num(lag)} ms)"),
        ("sent / answered", f"{sent if sent is not None else '-'} / {answered if answered is not None else '-'}"),
        ("TTFT p50 / p95 / p99 (ms)", _pcts(p.get("ttft_ms"))),
        ("TPOT p50 / p95 / p99 (ms)", _pcts(p.get("tpot_ms"))),
        ("output tokens/s", num(p.get("output_tokens_per_s"))),
        ("errors", ", ".join(f"{k}: {v}" for k, v in errors.items()) or "none"),
        ("valid", valid),
    ]
    dl = "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in rows)
    return f'<section><h2>Generation load test {esc(art_id)}</h2><dl class="kv">{dl}</dl></section>'


def _generation_validate_section(art_id: str, p: Mapping[str, Any]) -> str:
    """A generative validation (``rightsize validate SPEC`` with targets.generative): per load level the
    simulator's forecast vs the measured TTFT p50 / p95 and TPOT p50, the errors, and the forecast's summary."""
    from rightsize.llm.loadgen import QUANTITIES

    rows = [[pct(lv.get("level_busy")), num(lv.get("rate_per_s")), str(lv.get("requests", "-")),
             "yes" if lv.get("valid") else "no", _pcts(lv.get("forecast"), QUANTITIES),
             _pcts(lv.get("measured"), QUANTITIES), _errors(lv.get("forecast_err_pct")),
             _errors(lv.get("served_err_pct"))]
            for lv in p.get("levels") or []]  # fmt: skip
    q = "TTFT p50 / p95, TPOT p50 ms"
    head = ["load (busy)", "rate/s", "requests", "valid", f"predicted {q}", f"measured {q}", "error",
            "error, costs refit on the level"]  # fmt: skip
    served = f"{p.get('served_model', '-')}" + (" (a stand-in)" if p.get("stand_in") else "")
    f = p.get("forecast") or {}
    summary = (f"forecast: median |error| {num(f.get('median_abs_err_pct'))}%, worst "
               f"{num(f.get('worst_abs_err_pct'))}%, within 20%: {f.get('within_20pct', '-')}/"
               f"{f.get('n', '-')}")  # fmt: skip
    notes = "".join(f"<li>{esc(n)}</li>" for n in p.get("notes") or [])
    return (f'<section><h2>Validation {esc(art_id)}</h2><p class="sub">spec {esc(p.get("spec", "-"))}, served '
            f"{esc(served)}; per-request overhead {esc(num(p.get('overhead_ms')))} ms, per token "
            f"{esc(num(p.get('per_token_ms')))} ms</p>{table(head, rows, 'validation')}<p>{esc(summary)}</p>"
            + (f"<ul>{notes}</ul>" if notes else "") + "</section>")  # fmt: skip


def _errors(err: Any) -> str:
    """Predicted vs measured error per percentile, '+3% / -1% / -5%'."""
    if not isinstance(err, Mapping):
        return "-"
    return " / ".join(f"{v:+.0f}%" if finite(v) is not None else "-" for v in err.values())


def ok_measurements(ms: Sequence[Measurement]) -> list[Measurement]:
    return [m for m in ms if m.status == "ok" and m.latency_ms is not None]


def run_page(st: Store, run_id: str) -> str:
    run = st.run(run_id)
    if run.kind == "generative-plan":  # no measurements, no environment: the stored plan is the page
        return shell(f"Run {run.id}", "", _generative_run(st, run.id, shown(run.name), run.created_at))
    env = st.env(run.env_id) if run.env_id else None
    ms = st.measurements(run_id=run.id)
    data = ReportData(plan={}, measurements=ok_measurements(ms), env=env)
    rows = [
        [
            m.model,
            m.mode,
            m.device,
            m.precision,
            str(m.batch_size),
            m.status,
            num(m.latency_ms.p50 if m.latency_ms else None),
            num(m.latency_ms.p95 if m.latency_ms else None),
            num(m.throughput_per_s),
            format_bytes(m.peak_memory_bytes),
            m.reason or "",
        ]
        for m in ms
    ]
    results = _loadtest_sections(st, run.id) + _validate_sections(st, run.id)
    head = ["model", "mode", "device", "precision", "batch", "status", "p50 ms", "p95 ms", "samples/s", "peak memory",
            "reason"]  # fmt: skip
    dl = "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in env_rows(env))
    plans = st.artifacts(kind="plan", run_id=run.id)
    plan_links = "".join(f'<li><a href="/report/{esc(a["id"])}">plan {esc(a["id"])}</a></li>' for a in plans)
    body = (
        f'<p class="sub">{esc(shown(run.kind))} · {esc(shown(run.name))} · model {esc(shown(run.model or "-"))} · '
        f"{esc(run.created_at)} · "
        f'{esc(run.status)}</p><section class="cols"><div><h3>Environment</h3><dl class="kv">{dl}</dl></div>'
        f"<div><h3>Plans</h3><ul>{plan_links or '<li>none</li>'}</ul></div></section>"
        + results
        + (f'<section><div class="charts">{"".join(latency_charts(data))}</div></section>' if ms or not results else "")
        + (f"<section><h2>Measurements</h2>{table(head, rows, 'measurements')}</section>" if ms or not results else "")
    )
    return shell(f"Run {run.id}", "", body)


def not_found(message: str) -> str:
    return shell("Not found", "", f'<p>{esc(message)}</p><p><a href="/">Back to the runs</a></p>')


def bad_request(message: str) -> str:
    return shell("Bad request", "", f'<p>{esc(message)}</p><p><a href="/">Back to the runs</a></p>')


def report_page(st: Store, artifact_id: str, catalog: Catalog | None = None) -> str:
    """The full report of a stored plan: the main report, or a generative plan's (its charts and candidates)."""
    from rightsize.report.html import render_html
    from rightsize.report.stored import find_generative_plan, find_plan, stored_report_data

    if (generative := find_generative_plan(st, artifact_id)) is not None:
        from rightsize.report.generative import render_generative_html, stored_generative  # llm.plan: only here

        return render_generative_html(*stored_generative(generative))
    return render_html(stored_report_data(st, find_plan(st, artifact_id), catalog))
