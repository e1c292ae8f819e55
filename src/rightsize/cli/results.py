"""``rightsize results``: list stored runs, show one run's measurements, export them."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape

from rightsize.cli._common import (
    JSON_OPTION,
    STORE_OPTION,
    check_ours,
    check_writable,
    emit_json,
    err_console,
    out_console,
)
from rightsize.errors import NotFoundError, SpecError, did_you_mean
from rightsize.inputfile import shown, write_whole
from rightsize.store.db import MIN_RUN_PREFIX

DEFAULT_RUNS = 20  # runs listed without --limit
MODELS_SHOWN = 6  # models named when --model matches none


def results(
    run: str | None = typer.Argument(
        None, help=f"Run id (or a {MIN_RUN_PREFIX}+ character prefix) to show its measurements."
    ),
    json_out: bool = JSON_OPTION,
    model: str | None = typer.Option(None, "--model", help="Only this model's measurements."),
    limit: int | None = typer.Option(
        None,
        "--limit",
        min=1,
        max=1_000_000_000,
        help=f"How many runs to list (default {DEFAULT_RUNS}); with RUN or --model, show only the newest N "
        "measurements (--export still writes all).",
    ),
    export: Path | None = typer.Option(
        None,
        "--export",
        help="Write measurements, plans and load tests: FILE.json, or FILE.csv + FILE-plans.csv + "
        "FILE-generative.csv + FILE-loadtests.csv (each sibling when non-empty). An existing file rightsize did not "
        "write is refused.",
    ),
    store: Path | None = STORE_OPTION,
) -> None:
    """List runs in the store, or the measurements of one run; export to CSV/JSON."""
    from rightsize.cli.bench import record, sweep_table
    from rightsize.store import Store

    if run is not None and not run.strip():  # an unset "$RUN" had listed every run instead
        raise SpecError("RUN", "is empty; give a run id (or its first 4+ characters), or leave it out to list runs")
    if export is not None and export.suffix not in (".csv", ".json"):
        raise SpecError("--export", f"must end in .csv or .json, got {export.name!r}")
    if export is not None:
        check_writable(export, "--export", store, only_ours=True)
        if export.suffix == ".csv":  # plans and load tests go beside it (_export)
            for tail in CSV_SIBLINGS:
                check_writable(_sibling(export, tail), "--export", store)  # a foreign one: refused if written (_export)
    db = Store(store, read_only=True)  # reading never creates a store (a missing path: exit 2)
    if run is None and model is None and export is None:
        runs = db.runs(limit=limit or DEFAULT_RUNS)
        if json_out:
            emit_json(runs)
            return
        from rich.table import Table

        t = Table(title=escape(f"runs in {db.path}"), title_justify="left")
        for col in ("id", "created", "kind", "name", "model", "env", "status", "results", "failed"):
            t.add_column(col)
        for r in runs:
            t.add_row(*(escape(shown(v)) for v in (r.id, r.created_at, r.kind, r.name, r.model, r.env_id, r.status)),
                      str(r.n_measurements), str(r.n_failed))  # fmt: skip
        out_console.print(t)
        return
    info = db.run(run) if run else None
    run_id = info.id if info else None
    ms = db.measurements(run_id=run_id, model=model)
    if model is not None and not ms and (export is None or not _model_artifacts(db, run_id, model)):
        raise _no_measurements(db, run_id, model)  # nothing matched: exit 2, as a run id not in the store
    records = [record(m) for m in ms]
    if export is not None:
        written = _export(db, records, export, run_id, model)
        err_console.print(f"wrote {written}")
    if limit is not None and len(ms) > limit and (json_out or export is None):  # newest N, in measured order
        err_console.print(f"showing the newest {limit} of {len(ms)} measurements; --limit N shows more")
        ms, records = ms[-limit:], records[-limit:]
    lines = _stored_results(db, run_id) if run_id and not ms and export is None else []
    if json_out:
        emit_json(records)
        if lines:  # stdout stays the (empty) list of measurements; stderr names what the run stored instead
            err_console.print(f"run {run_id} measured nothing itself; it stored: " + "; ".join(lines), highlight=False)
    elif export is None:
        if lines:  # a plan, load test or validation measures nothing itself: say what it stored instead
            out_console.print(f"run {run_id} measured nothing itself; it stored:", highlight=False)
            for line in lines:
                out_console.print(f"  {escape(line)}", highlight=False)
        else:
            # the run's kind, name and status: a killed sweep's table had read as a whole one
            title = (f"run {info.id} ({info.kind}{' ' + shown(info.name) if info.name else ''}, {info.status})"
                     if info else f"model {shown(model)}")  # fmt: skip
            out_console.print(sweep_table(ms, title))


def _model_artifacts(db: Any, run_id: str | None, model: str) -> list[dict[str, Any]]:
    """The plans and load tests (of ``run_id`` when given) that name ``model``: what an export writes for it."""
    arts = db.artifacts(run_id=run_id) if run_id else db.artifacts()
    return [a for a in arts if a["payload"].get("model") == model]


def _no_measurements(db: Any, run_id: str | None, model: str) -> NotFoundError:
    """``--model`` matched nothing: name what the store (or the run) has measured instead."""
    counts = db.measured_models(run_id)
    where = f"run {run_id}" if run_id else f"the store {str(db.path)!r}"
    if not counts:
        return NotFoundError(f"--model: no measurements of model {model!r} in {where}, which has none; "
                             "`rightsize bench SPEC` measures a model")  # fmt: skip
    names = list(counts)
    shown = ", ".join(f"{n} ({counts[n]})" for n in names[:MODELS_SHOWN])
    more = f" and {len(names) - MODELS_SHOWN} more" if len(names) > MODELS_SHOWN else ""
    return NotFoundError(f"--model: no measurements of model {model!r} in {where}.{did_you_mean(model, names)} "
                         f"Measured models: {shown}{more}")  # fmt: skip


def _stored_results(db: Any, run_id: str) -> list[str]:
    """One line per result a run stored (plans, generative plans, load tests, validations)."""
    out: list[str] = []
    for a in db.artifacts(run_id=run_id):
        kind, p = a["kind"], a["payload"]
        if kind == "plan":
            out.append(f"plan {a['id']}: `rightsize report {a['id']}` writes its report")
        elif kind == "generative-plan":
            from rightsize.report.generative import recommendation_words

            out.append(f"generative plan {a['id']}: {recommendation_words(p.get('recommendation'))}; `rightsize "
                       f"report {a['id']}` writes its report")  # fmt: skip
        elif kind == "loadtest" and p.get("kind") == "loadtest-generate":  # TTFT/TPOT, not request latency
            from rightsize.llm.loadgen import load_problems

            t, o = p.get("ttft_ms") or {}, p.get("tpot_ms") or {}
            problems = load_problems(p.get("sent"), p.get("answered"), p.get("send_lag_p99_ms"), p.get("recorded"))
            out.append(f"generation load test {a['id']}: {p.get('rate_per_s', 0):g}/s offered, {p.get('sent', 0)} "
                       f"sent, {p.get('answered', 0)} answered, TTFT p50 {t.get('p50', 0):.1f} ms, p95 "
                       f"{t.get('p95', 0):.1f} ms, TPOT p50 {o.get('p50', 0):.2f} ms, "
                       f"{p.get('output_tokens_per_s', 0):.1f} output tokens/s, {_validity(p, problems)}")  # fmt: skip
        elif kind == "loadtest":
            lat = p.get("latency_ms") or {}
            out.append(f"load test {a['id']}: {p.get('achieved_rate_per_s', 0):.1f}/s achieved of "
                       f"{p.get('offered_rate_per_s', 0):.1f}/s offered, p50 {lat.get('p50', 0):.1f} ms, "
                       f"p99 {lat.get('p99', 0):.1f} ms, {_validity(p, p.get('problems'))}")  # fmt: skip
        elif kind == "validate":
            for pt in p.get("points") or []:
                pr, me = pt.get("predicted_ms") or {}, pt.get("measured_ms") or {}
                out.append(f"validation {a['id']}, {pt.get('label')} load ({pt.get('rate_per_s', 0):.1f}/s): p95 "
                           f"predicted {pr.get('p95', 0):.1f} ms, measured {me.get('p95', 0):.1f} ms")  # fmt: skip
    return out


def _validity(payload: Any, problems: Any) -> str:
    """``valid``, or ``NOT valid: <why>`` with the stored reasons (it read "NOT valid" alone)."""
    if payload.get("valid"):
        return "valid"
    why = [str(x) for x in problems] if isinstance(problems, list) else []
    return "NOT valid" + (": " + "; ".join(why) if why else "")


def _export(db: Any, records: list[dict[str, object]], path: Path, run_id: str | None, model: str | None) -> str:
    """Measurements, plans and load tests (of ``run_id`` / ``model`` when given) to JSON or CSV files.

    JSON: one file ``{"measurements", "plans", "loadtests"}``. CSV: measurements to PATH (``extra`` as JSON
    text), plan summaries to PATH-plans.csv, load tests to PATH-loadtests.csv (each only when non-empty).
    """
    from rightsize.report.dashboard_api import plan_summary

    arts = db.artifacts(run_id=run_id) if run_id else db.artifacts()
    if model:
        arts = [a for a in arts if a["payload"].get("model") == model]
    plans = [a for a in arts if a["kind"] == "plan"]
    # without the state the report is rebuilt from (the simulator's lengths and step costs: not results)
    generative = [a | {"payload": {k: v for k, v in a["payload"].items() if k != "report_state"}}
                  for a in arts if a["kind"] == "generative-plan"]  # fmt: skip
    tests = [a for a in arts if a["kind"] in ("loadtest", "validate")]
    if path.suffix == ".json":
        write_whole(path, json.dumps({"measurements": records, "plans": plans, "generative_plans": generative,
                                      "loadtests": tests}, indent=2, default=str), "--export")  # fmt: skip
        return (f"{len(records)} measurement(s), {len(plans)} plan(s), {len(generative)} generative plan(s), "
                f"{len(tests)} load test(s) to {path}")  # fmt: skip
    flat = []
    for r in records:
        row = {k: v for k, v in r.items() if k not in ("latency_ms", "input", "extra")}
        lat = r.get("latency_ms") or {}
        assert isinstance(lat, dict)
        row |= {f"latency_{k}_ms": lat.get(k) for k in ("p50", "p95", "p99", "mean", "std")}
        row["input"] = json.dumps(r.get("input"))
        row["extra"] = json.dumps(r.get("extra") or {}, sort_keys=True)
        flat.append(row)
    files = [(path, flat, f"{len(records)} measurement(s)")]
    files += [(_sibling(path, "plans"), [plan_summary(a) for a in plans], f"{len(plans)} plan(s)")] if plans else []
    if generative:
        files.append((_sibling(path, "generative"), [_generative_row(a) for a in generative],
                      f"{len(generative)} generative plan(s)"))  # fmt: skip
    if tests:
        files.append((_sibling(path, "loadtests"), [_loadtest_row(a) for a in tests], f"{len(tests)} load test(s)"))
    for file, _, _ in files[1:]:  # before any is written; a sibling this export does not write is left alone
        check_ours(file, "--export")
    out: list[str] = []
    for file, rows, what in files:
        try:
            _write_csv(file, rows)
        except SpecError as exc:  # the files before it are this export's already: say which, not "left as it was"
            done = ", ".join(str(f) for f, _, _ in files[: len(out)])
            rewritten = f"; already rewritten by this export: {done}" if done else ""
            raise SpecError("--export", exc.problem + rewritten) from None
        out.append(f"{what} to {file}")
    written = {"plans": plans, "generative": generative, "loadtests": tests}
    stale = [str(_sibling(path, t)) for t in CSV_SIBLINGS if not written[t] and _sibling(path, t).exists()]
    if stale:  # an earlier export's: read beside this one, it would pass for this export's
        out.append(f"left as they were (not from this export, which has none of theirs): {', '.join(stale)}")
    return ", ".join(out)


CSV_SIBLINGS = ("plans", "loadtests", "generative")  # a CSV export's other files: PATH-<tail>.csv


def _sibling(path: Path, tail: str) -> Path:
    return path.with_name(f"{path.stem}-{tail}.csv")


def _generative_row(art: dict[str, Any]) -> dict[str, Any]:
    """One generative plan as a flat row: what it was asked, what it recommends."""
    p = art["payload"]
    rec = p.get("recommendation") or {}
    target = p.get("target") or {}
    return {"artifact_id": art["id"], "run_id": art["run_id"], "created_at": art["created_at"], "name": p.get("name"),
            "model": p.get("model"), "rate_per_s": target.get("rate_per_s"),
            "ttft_percentile": p.get("ttft_percentile"), "tpot_percentile": p.get("tpot_percentile"),
            "purchase": p.get("purchase"), "provider": rec.get("provider"), "instance": rec.get("instance"),
            "device": rec.get("device"), "tp": rec.get("tp"), "replicas": rec.get("replicas"),
            "instances": rec.get("instances"), "usd_per_hour": rec.get("usd_per_hour"), "ttft_ms": rec.get("ttft_ms"),
            "tpot_ms": rec.get("tpot_ms"), "usd_per_m_output_tokens": rec.get("usd_per_m_output_tokens"),
            "feasible": bool(rec)}  # fmt: skip


def _loadtest_row(art: dict[str, Any]) -> dict[str, Any]:
    p = art["payload"]
    lat = p.get("latency_ms") or {}
    return {
        "id": art["id"], "kind": art["kind"], "created_at": art["created_at"], "url": p.get("url"),
        "mode": p.get("mode"), "offered_rate_per_s": p.get("offered_rate_per_s"),
        "achieved_rate_per_s": p.get("achieved_rate_per_s"), "throughput_per_s": p.get("throughput_per_s"),
        "p50_ms": lat.get("p50") if isinstance(lat, dict) else None,
        "p95_ms": lat.get("p95") if isinstance(lat, dict) else None,
        "p99_ms": lat.get("p99") if isinstance(lat, dict) else None,
        "valid": p.get("valid"), "payload": json.dumps(p, sort_keys=True, default=str),
    }  # fmt: skip


def _write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(rows[0]) if rows else ["model"])
    w.writeheader()
    w.writerows(rows)
    write_whole(path, buf.getvalue(), "--export")


def register(app: typer.Typer) -> None:
    app.command("results")(results)
