"""``rightsize pipeline SPEC``: offline batch inference over N items, locally or on Ray, with a full-job cost table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from rightsize.cli._common import (
    CATALOG_OPTION,
    JSON_OPTION,
    STORE_OPTION,
    emit_json,
    err_console,
    load_catalog_option,
    out_console,
)


def pipeline(
    spec: Path = typer.Argument(..., help="Workload spec (YAML): the model, input shape, batch sizes, targets.batch."),
    items: int = typer.Option(10_000, "--items", min=1, help="Synthetic items to process (ignored with --input)."),
    input_file: Path | None = typer.Option(
        None, "--input", help="Your items: .parquet or .jsonl with 'text' or 'features'."
    ),
    output: Path | None = typer.Option(
        None, "--output", help="Write id,label,score to .parquet or .jsonl (default: temp)."
    ),
    ray: str | None = typer.Option(None, "--ray", help="Run on Ray Data: 'auto' or a cluster address."),
    workers: int | None = typer.Option(None, "--workers", min=1, help="Local processes or Ray actors."),
    batch_size: int | None = typer.Option(
        None, "--batch-size", min=1, help="Micro-batch per model call (default: spec max)."
    ),
    device: str | None = typer.Option(None, "--device", help="cpu (CPU workers/actors) or cuda (GPU actors)."),
    precision: str | None = typer.Option(None, "--precision", help="fp32, bf16, fp16 (cuda) or int8 (cpu)."),
    full_items: int | None = typer.Option(
        None, "--full-items", min=1, help="Full job size to project (default: targets)."
    ),
    top: int = typer.Option(10, "--top", min=1, help="Rows of the projected cost table to print."),
    json_out: bool = JSON_OPTION,
    store: Path | None = STORE_OPTION,
    catalog: Path | None = CATALOG_OPTION,
) -> None:
    """Run batch inference end to end (read, preprocess, infer, write) and project the full job's cost."""
    from rightsize.spec import load_spec
    from rightsize.store import Store
    from rightsize.workflows.pipeline import run_and_project

    workload = load_spec(spec)
    cat = load_catalog_option(catalog)
    with Store(store) as db:
        result = run_and_project(
            workload, items=items, input_path=input_file, output_path=output, ray_address=ray, workers=workers,
            batch_size=batch_size, device=device, precision=precision, full_items=full_items, catalog=cat, store=db,
        )  # fmt: skip
        payload = result.to_dict()
        payload["artifact_id"] = db.save_artifact(None, "pipeline", payload)
    if json_out:
        emit_json(payload)
    else:
        _print(payload, top)
    for note in result.notes:
        err_console.print(f"note: {note}")
    if not result.exactly_once:
        err_console.print(f"[red]items not processed exactly once[/red]: {payload['ids']}")
        raise typer.Exit(1)


def _print(p: dict[str, Any], top: int) -> None:
    from rich.table import Table

    ids = p["ids"]
    out_console.print(
        f"[bold]{p['model']}[/bold] {p['engine']} {p['device']} {p['precision']}: {p['items']} items in "
        f"{p['wall_s']:.1f} s = [bold]{p['throughput_items_per_s']:.1f} items/s[/bold] "
        f"({p['workers']} worker(s), micro-batch {p['batch_size']}); "
        f"ids: {ids['unique']}/{ids['expected']} unique, {ids['missing']} missing, {ids['duplicated']} duplicated"
    )
    stages = Table(title="per-stage busy time (summed over workers)", title_justify="left")
    for col in ("stage", "wall s", "CPU s", "share of wall", "µs/item (CPU)"):
        stages.add_column(col, justify="left" if col == "stage" else "right")
    total_wall = sum(s["wall_s"] for s in p["stages"].values()) or 1.0
    for name, s in p["stages"].items():
        per_item = s["cpu_s"] / max(p["items"], 1) * 1e6
        stages.add_row(
            name, f"{s['wall_s']:.2f}", f"{s['cpu_s']:.2f}", f"{s['wall_s'] / total_wall:.0%}", f"{per_item:.1f}"
        )
    out_console.print(stages)
    if p["projection"]:
        out_console.print(projection_table(p["projection"][:top], p["full_items"]))


def _num(x: float) -> str:
    """2 decimals, or 3 significant digits below 1 (a $0.004 job is not $0.00)."""
    return f"{x:.2f}" if abs(x) >= 1 or x == 0 else f"{x:.3g}"


def projection_table(rows: list[dict[str, Any]], full_items: int) -> Any:
    from rich.table import Table

    placeholder = any("placeholder" in r["provenance"] for r in rows)
    how = "placeholder: catalog peak ratios" if placeholder else "inference from the stored profile's ServiceCurves"
    t = Table(title=f"projected full job: {full_items:,} items ({how})", title_justify="left")
    for col in (
        "instance",
        "accel",
        "items/s",
        "bound by",
        "h on 1",
        "n",
        "wall h",
        "$/h",
        "cost $",
        "spot $",
        "deadline",
    ):
        t.add_column(col, justify="left" if col in ("instance", "accel", "bound by") else "right")
    for r in rows:
        ok = {None: "-", True: "yes", False: "[red]no[/red]"}[r["meets_deadline"]]
        spot = _num(r["spot_cost_usd"]) if r["spot_cost_usd"] is not None else "-"
        bound = "input (CPU)" if r["bottleneck"].startswith("input") else r["bottleneck"].split(" ")[0]
        t.add_row(
            f"{r['provider']}:{r['instance_type']}", r["accelerator"] or "-", f"{r['items_per_s']:,.0f}", bound,
            _num(r["runtime_h"]), str(r["instances"]), _num(r["wall_h"]), f"{r['price_usd_per_hour']:.3f}",
            _num(r["cost_usd"]), spot, ok,
        )  # fmt: skip
    return t


def register(app: typer.Typer) -> None:
    app.command("pipeline")(pipeline)
