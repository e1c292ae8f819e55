"""``rightsize report [RUN] -o out.html|out.md``: render a stored plan as a one-page report."""

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
)


def report(
    run: str | None = typer.Argument(None, help="Run or plan id (or a 4+ character prefix); default: the newest plan."),
    output: Path = typer.Option(Path("rightsize-report.html"), "-o", "--output", help="Write FILE.html or FILE.md."),
    json_out: bool = JSON_OPTION,
    store: Path | None = STORE_OPTION,
    catalog: list[Path] | None = CATALOG_OPTION,
) -> None:
    """Write the report of a stored plan (with its measured profile when the store has it)."""
    from rightsize.inputfile import write_whole
    from rightsize.report import check_report_path
    from rightsize.report.html import render_html
    from rightsize.report.markdown import render_markdown
    from rightsize.report.stored import find_generative_plan, find_plan, stored_report_data
    from rightsize.store import Store
    from rightsize.store.opening import default_store_path, missing_store_error

    check_report_path(output, "--output")
    check_writable(output, "--output", store, only_ours=True)
    path = store if store is not None else default_store_path()
    if not Path(path).is_file():
        raise missing_store_error(Path(path), "`rightsize plan SPEC`")
    with Store(path, read_only=True) as db:  # a report never writes to the store (an empty file got a schema)
        if (generative := find_generative_plan(db, run)) is not None:
            _generative_report(generative, output, json_out)
            return
        record = find_plan(db, run)
        data = stored_report_data(db, record, load_catalog_option(catalog))
    markdown = output.suffix.lower() in (".md", ".markdown")
    text = render_markdown(data) if markdown else render_html(data)
    write_whole(output, text, "--output")  # makes the folder; a write can still fail after check_writable
    info = {
        "path": str(output),
        "format": "markdown" if markdown else "html",
        "plan": record["id"],
        "run_id": record["run_id"],
        "workload": data.plan.get("workload"),
        "measured_points": len(data.measurements),
        "environment": data.env.id if data.env else None,
    }
    if json_out:
        emit_json(info)
    else:
        err_console.print(f"wrote {output} (plan {record['id']}, {len(data.measurements)} measured point(s))")


def _generative_report(artifact: dict[str, Any], output: Path, json_out: bool) -> None:
    """Write a stored generative plan's report from the plan state stored with it (``LLMPlan.state``)."""
    from rightsize.errors import SpecError
    from rightsize.report.generative import stored_generative, write_generative_report

    payload = artifact["payload"]
    plan, target, name = stored_generative(artifact)
    try:
        write_generative_report(plan, target, name, output)
    except OSError as exc:
        raise SpecError("--output", f"cannot write {str(output)!r} ({exc.strerror}); pass a writable path") from None
    markdown = output.suffix.lower() in (".md", ".markdown")
    if json_out:
        emit_json({"path": str(output), "format": "markdown" if markdown else "html", "plan": artifact["id"],
                   "run_id": artifact["run_id"], "workload": payload.get("name"),
                   "kind": "generative-plan"})  # fmt: skip
    else:
        err_console.print(f"wrote {output} (generative plan {artifact['id']}, {payload.get('name', '?')})")


def register(app: typer.Typer) -> None:
    app.command("report")(report)
