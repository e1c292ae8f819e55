"""``rightsize results``: list stored runs, show one run's measurements, export them."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import typer

from rightsize.cli._common import JSON_OPTION, STORE_OPTION, emit_json, err_console, out_console
from rightsize.errors import SpecError


def results(
    run: str | None = typer.Argument(None, help="Run id (or a 4+ character prefix) to show its measurements."),
    json_out: bool = JSON_OPTION,
    model: str | None = typer.Option(None, "--model", help="Only this model's measurements."),
    limit: int = typer.Option(20, "--limit", min=1, help="How many runs to list."),
    export: Path | None = typer.Option(None, "--export", help="Write measurements to FILE.csv or FILE.json."),
    store: Path | None = STORE_OPTION,
) -> None:
    """List runs in the store, or the measurements of one run; export to CSV/JSON."""
    from rightsize.cli.bench import record, sweep_table
    from rightsize.store import Store

    if export is not None and export.suffix not in (".csv", ".json"):
        raise SpecError("--export", f"must end in .csv or .json, got {export.name!r}")
    db = Store(store, read_only=True)  # reading never creates a store (a missing path: exit 2)
    if run is None and model is None and export is None:
        runs = db.runs(limit=limit)
        if json_out:
            emit_json(runs)
            return
        from rich.table import Table

        t = Table(title=f"runs in {db.path}", title_justify="left")
        for col in ("id", "created", "kind", "name", "model", "env", "status", "results", "failed"):
            t.add_column(col)
        for r in runs:
            t.add_row(r.id, r.created_at, r.kind, r.name or "", r.model or "", r.env_id or "", r.status,
                      str(r.n_measurements), str(r.n_failed))  # fmt: skip
        out_console.print(t)
        return
    run_id = db.run(run).id if run else None
    ms = db.measurements(run_id=run_id, model=model)
    records = [record(m) for m in ms]
    if export is not None:
        _export(records, export)
        err_console.print(f"wrote {len(records)} measurement(s) to {export}")
    if json_out:
        emit_json(records)
    elif export is None:
        out_console.print(sweep_table(ms, f"run {run_id}" if run_id else f"model {model}"))


def _export(records: list[dict[str, object]], path: Path) -> None:
    if path.suffix == ".json":
        path.write_text(json.dumps(records, indent=2))
        return
    flat = []
    for r in records:
        row = {k: v for k, v in r.items() if k not in ("latency_ms", "input", "extra")}
        lat = r.get("latency_ms") or {}
        assert isinstance(lat, dict)
        row |= {f"latency_{k}_ms": lat.get(k) for k in ("p50", "p95", "p99", "mean", "std")}
        row["input"] = json.dumps(r.get("input"))
        flat.append(row)
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(flat[0]) if flat else ["model"])
        w.writeheader()
        w.writerows(flat)


def register(app: typer.Typer) -> None:
    app.command("results")(results)
