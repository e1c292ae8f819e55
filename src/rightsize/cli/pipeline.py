"""``rightsize pipeline SPEC``: offline batch inference over N items, locally or on Ray, with a full-job cost table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from rightsize.cli._common import (
    CATALOG_OPTION,
    JSON_OPTION,
    STORE_OPTION,
    check_writable,
    emit_json,
    err_console,
    load_catalog_option,
    out_console,
    same_file,
)


def pipeline(
    spec: Path = typer.Argument(..., help="Workload spec (YAML): the model, input shape, batch sizes, targets.batch."),
    items: int = typer.Option(
        10_000, "--items", min=1, max=100_000_000, help="Synthetic items to process (ignored with --input)."
    ),
    input_file: Path | None = typer.Option(
        None, "--input", help="Your items: .parquet or .jsonl with 'text' or 'features'."
    ),
    output: Path | None = typer.Option(
        None, "--output", help="Write id,label,score to .parquet or .jsonl (default: temp)."
    ),
    ray: str | None = typer.Option(None, "--ray", help="Run on Ray Data: 'auto' or a cluster address."),
    workers: int | None = typer.Option(
        None,
        "--workers",
        min=1,
        max=1024,
        help="Local processes (default one a core; at most 4 a core, memory allowing) or Ray actors.",
    ),
    batch_size: int | None = typer.Option(
        None, "--batch-size", min=1, max=1_000_000, help="Micro-batch per model call (default: spec max)."
    ),
    device: str | None = typer.Option(None, "--device", help="cpu (CPU workers/actors) or cuda (GPU actors)."),
    precision: str | None = typer.Option(None, "--precision", help="fp32, bf16, fp16 (cuda) or int8 (cpu)."),
    full_items: int | None = typer.Option(
        None, "--full-items", min=1, max=10**15, help="Full job size to project (default: targets)."
    ),
    top: int = typer.Option(
        10, "--top", min=1, max=10_000, help="Rows of the full job's plan table to print (and to put in --json)."
    ),
    json_out: bool = JSON_OPTION,
    store: Path | None = STORE_OPTION,
    catalog: list[Path] | None = CATALOG_OPTION,
) -> None:
    """Run batch inference end to end (read, preprocess, infer, write), then plan the full job as `plan` does."""
    from rightsize.cli.plan import print_plan
    from rightsize.errors import SpecError
    from rightsize.spec import load_spec
    from rightsize.store import Store
    from rightsize.workflows.pipeline import run_and_project

    workload = load_spec(spec)
    if ray is not None:  # checked before anything starts, as bench checks it
        from rightsize.cli.bench import ray_address

        ray = ray_address(ray)
    if output is not None:
        if input_file is not None and same_file(output, input_file):  # the items were overwritten by the results
            raise SpecError("--output", f"is the --input file {str(input_file)!r}; pass another path")
        check_writable(output, "--output", store, only_ours=True)  # a user's own file had been replaced, silently
    cat = load_catalog_option(catalog)
    with Store(store) as db:
        result = run_and_project(
            workload, items=items, input_path=input_file, output_path=output, ray_address=ray, workers=workers,
            batch_size=batch_size, device=device, precision=precision, full_items=full_items, catalog=cat, store=db,
            progress=not json_out,
        )  # fmt: skip
        payload = result.to_dict()
        payload["artifact_id"] = db.save_artifact(None, "pipeline", payload)
    if json_out:  # stored whole, as `plan` stores its plans; printed with the --top candidates, as `plan --json`
        emit_json(payload | {"plan": result.plan.to_dict(top=top) if result.plan is not None else None})
    else:
        _print(payload)
        if result.plan is not None:
            print_plan(result.plan, top)
            _print_bound(result.plan.recommendation)
    for note in result.notes:
        err_console.print(f"note: {note}")
    if not result.exactly_once:
        from rich.markup import escape

        err_console.print(f"[red]items not processed exactly once[/red]: {escape(str(payload['ids']))}", markup=True)
        raise typer.Exit(1)


def _print(p: dict[str, Any]) -> None:
    from rich.table import Table

    ids = p["ids"]
    out_console.print(
        f"[bold]{p['model']}[/bold] {p['engine']} {p['device']} {p['precision']}: {p['items']} items in "
        f"{p['wall_s']:.1f} s = [bold]{p['throughput_items_per_s']:.1f} items/s[/bold] "
        f"({p['workers']} worker(s), micro-batch {p['batch_size']}); "
        f"ids: {ids['unique']}/{ids['expected']} unique, {ids['missing']} missing, {ids['duplicated']} duplicated"
    )
    # Each stage's time is summed over the workers, so with 2 workers it can exceed the run's wall time: the columns
    # said "wall s" (13.70 s of infer in a 12.3 s run) and "share of wall", which read as a measuring error.
    title = f"per-stage busy time, summed over {p['workers']} worker(s): can exceed the {p['wall_s']:.1f} s run"
    stages = Table(title=title, title_justify="left")
    for col in ("stage", "busy s (all workers)", "CPU s (all workers)", "share of busy", "µs/item (CPU)"):
        stages.add_column(col, justify="left" if col == "stage" else "right")
    total_busy = sum(s["wall_s"] for s in p["stages"].values()) or 1.0  # JSON key: the stage's wall-clock busy time
    for name, s in p["stages"].items():
        per_item = s["cpu_s"] / max(p["items"], 1) * 1e6
        stages.add_row(
            name, f"{s['wall_s']:.2f}", f"{s['cpu_s']:.2f}", f"{s['wall_s'] / total_busy:.0%}", f"{per_item:.1f}"
        )
    out_console.print(stages)
    for name, s in p.get("fixed_stages", {}).items():  # a file's imports had read as 5,924 µs/item on 60 rows
        out_console.print(f"{name}: {s['cpu_s']:.2f} CPU s ({s['wall_s']:.2f} s) more, paid once a run (imports, the "
                          "reader's setup): not in the µs/item above, nor in the plan")  # fmt: skip


BOUND_NOTES = (
    "input pipeline",
    "share the cores",
)  # plan/batch.py InputStage.bound's notes say what bounds a candidate


def _print_bound(rec: Any) -> None:
    """Which side bounds the recommendation, the input stages or inference (docs/cluster.md; the text said neither)."""
    note = next((n for n in rec.notes if any(m in n for m in BOUND_NOTES)), None) if rec is not None else None
    if note is not None:
        out_console.print(f"input stages, for the recommendation: {note}")


def register(app: typer.Typer) -> None:
    app.command("pipeline")(pipeline)
