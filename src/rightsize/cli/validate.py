"""``rightsize validate SPEC``: parse, run ``rightsize.workflows.validate.validate_spec``, print or store.

rightsize validate examples/sentiment-api.yaml [--duration 10] [--loads 0.5,0.8]
"""

from __future__ import annotations

from pathlib import Path

import typer

from rightsize.cli._common import CATALOG_OPTION, JSON_OPTION, STORE_OPTION, emit_json, err_console, load_catalog_option
from rightsize.errors import SpecError
from rightsize.inputfile import check_finite
from rightsize.workflows.validate import render_report, validate_spec


def validate(
    spec: Path = typer.Argument(..., help="Workload spec (YAML) with targets.online."),
    duration: float = typer.Option(
        10.0, "--duration", help="Seconds of load per level after warm-up (slow levels run longer, up to 6x)."
    ),
    warmup_s: float = typer.Option(1.0, "--warmup-s", min=0.0, help="Seconds sent but not recorded per level."),
    loads: str = typer.Option("0.5,0.8", "--loads", help="Load levels as fractions of local capacity."),
    seed: int = typer.Option(0, "--seed", help="Seed of the arrivals and the simulation."),
    no_retime: bool = typer.Option(
        False, "--no-retime", help="Skip re-timing the served configuration just before serving."
    ),
    no_store: bool = typer.Option(False, "--no-store", help="Do not save the report in the store."),
    store: Path | None = STORE_OPTION,
    catalog: Path | None = CATALOG_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """Serve SPEC's planned configuration here and compare measured p50/p95/p99 with the prediction."""
    from rightsize.loadgen.persist import save_result
    from rightsize.spec import load_spec
    from rightsize.store import Store

    check_finite("--duration", duration, 0.0, 86_400.0)
    check_finite("--warmup-s", warmup_s, 0.0, 3_600.0, low_open=False)

    try:
        fractions = tuple(float(x) for x in loads.split(",") if x.strip())
    except ValueError:
        raise SpecError("--loads", f"must be comma-separated fractions like 0.5,0.8, got {loads!r}") from None
    if not fractions or any(not 0 < f < 1 for f in fractions):
        raise SpecError("--loads", f"each load must be in (0, 1), got {loads!r}")
    if duration <= 0:
        raise SpecError("--duration", f"must be > 0, got {duration}")
    workload = load_spec(spec)
    db = Store(store)
    report = validate_spec(
        workload, db, load_catalog_option(catalog), fractions=fractions, duration_s=duration, warmup_s=warmup_s,
        progress=not as_json, seed=seed, retime=not no_retime,
    )  # fmt: skip
    if not no_store:
        report["artifact_id"] = save_result(report, db.path, kind="validate")
    if as_json:
        emit_json(report)
    else:
        typer.echo(render_report(report))
        if report.get("artifact_id"):
            err_console.print(f"stored as artifact {report['artifact_id']}")
    if not any(p["measured_ms"] for p in report["points"]):
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("validate")(validate)
