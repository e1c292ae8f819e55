"""``rightsize catalog``: list instances with prices, dates and sources (and the accelerator/CPU tables)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from rightsize.cli._common import (
    CATALOG_OPTION,
    JSON_OPTION,
    catalog_paths,
    check_providers,
    check_writable,
    emit_json,
    load_catalog_option,
    out_console,
    same_file,
    split_values,
)
from rightsize.errors import NotFoundError, SpecError, did_you_mean
from rightsize.inputfile import short

if TYPE_CHECKING:
    from rightsize.catalog import Catalog


def catalog(
    ctx: typer.Context,
    gpu: bool = typer.Option(False, "--gpu", help="Only GPU instances."),
    cpu: bool = typer.Option(False, "--cpu", help="Only CPU instances."),
    provider: list[str] = typer.Option(
        None, "--provider", help="Only this provider (aws, gcp, azure); repeatable, or comma-separated."
    ),
    region: list[str] = typer.Option(None, "--region", help="Only this region; repeatable, or comma-separated."),
    as_json: bool = JSON_OPTION,
    catalog_file: list[Path] | None = CATALOG_OPTION,
) -> None:
    """List the hardware and price catalog (shipped data plus --catalog FILE); `catalog import` refreshes prices."""
    if ctx.invoked_subcommand is not None:
        return
    from rightsize.catalog import filter_instances, interruptions_per_hour
    from rightsize.catalog.model import is_unverified

    if gpu and cpu:
        raise SpecError("--gpu/--cpu", "pick one of --gpu and --cpu, or neither for both")
    cat = load_catalog_option(catalog_file)
    provider, region = split_values(provider, "--provider"), split_values(region, "--region")
    check_providers(provider, cat)
    _check_regions(region, cat)
    device = "gpu" if gpu else "cpu" if cpu else None
    rows = filter_instances(cat.instances, providers=provider or None, regions=region or None, device_class=device)
    if not rows:
        _refuse_empty(cat, provider, region, device)
    if as_json:
        instances = []
        for i in rows:
            d = i.__dict__ | {"device_class": i.device_class, "cores": i.cores}
            d["spot_interruptions_per_hour"] = interruptions_per_hour(i.spot_interruption)
            instances.append(d)
        emit_json(
            {
                "count": len(instances),
                "instances": instances,
                "accelerators": list(cat.accelerators.values()),
                "cpu_families": list(cat.cpus.values()),
            }
        )
        return
    from rich import box
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=f"{len(rows)} instances (USD/hour)", box=box.SIMPLE)
    for col in (
        "provider",
        "region",
        "instance",
        "vCPU",
        "RAM GiB",
        "accelerator",
        "on-demand",
        "spot",
        "interrupt",
        "date",
    ):
        table.add_column(
            col, justify="right" if col in ("vCPU", "RAM GiB", "on-demand", "spot") else "left", no_wrap=True
        )
    marked = False  # a price not read off a price list (estimate, re-check, a reservation rate): "*" after it
    for i in rows:
        acc = f"{i.accelerator_count}x {i.accelerator}" if i.accelerator else f"cpu {i.cpu_family}"
        spot = i.price_usd_per_hour("spot")
        od_mark = "*" if is_unverified(i.source, "on_demand") else ""
        spot_mark = "*" if spot is not None and is_unverified(i.source, "spot") else ""
        marked = marked or bool(od_mark or spot_mark)
        table.add_row(
            *map(escape, (i.provider, i.region, i.instance_type)),  # a user's --catalog rows: text, not markup
            str(i.vcpus),
            f"{i.ram_gib:g}",
            escape(acc),
            f"{i.on_demand_usd_per_hour:.4g}{od_mark}",
            f"{spot:.4g}{spot_mark}" if spot is not None else "-",
            escape(i.spot_interruption or "-"),
            i.price_date,
        )
    # Rows are wide; a narrow or piped console would cut names to "…", so print at >= 150 columns.
    console = out_console if out_console.width >= 150 else Console(width=150)
    console.print(table)
    if marked:
        out_console.print("* price not read off a price list (an estimate, a reservation rate, or marked re-check): "
                          "see its source in `rightsize catalog --json`", markup=False)  # fmt: skip
    out_console.print("Sources per row: `rightsize catalog --json`. Override or add rows with --catalog FILE.")


def _check_regions(regions: list[str] | None, cat: Catalog) -> None:
    """Refuse a ``--region`` no instance is in, naming the known regions (like ``check_providers``)."""
    known = sorted({i.region.lower() for i in cat.instances})
    for r in regions or []:
        if r.lower() not in known:
            listed = ", ".join(known[:12]) + (f", … ({len(known) - 12} more)" if len(known) > 12 else "")
            raise NotFoundError(f"--region: no instances in region {r!r} in the catalog (known: {listed})."
                                f"{did_you_mean(r.lower(), known)} Add rows with --catalog FILE")  # fmt: skip


def _refuse_empty(cat: Catalog, providers: list[str] | None, regions: list[str] | None, device: str | None) -> None:
    """Each filter names known values but together they match nothing: say what each provider has, and where."""
    from rightsize.catalog.query import where_instances_are

    given = [*(f"--provider {p}" for p in providers or []), *(f"--region {r}" for r in regions or [])]
    filters = " ".join([*given, *([f"--{device}"] if device else [])]) or "no filter"
    have = where_instances_are(cat.instances, providers)
    raise NotFoundError(f"no instances match {filters} ({have or 'the catalog is empty'}); drop a filter "
                        "or add rows with --catalog FILE")  # fmt: skip


def _is_date(text: str) -> bool:
    """YYYY-MM or YYYY-MM-DD naming a real month or day (2026-02-30 is not one)."""
    import datetime as dt

    for fmt, pattern in (("%Y-%m", r"\d{4}-\d{2}"), ("%Y-%m-%d", r"\d{4}-\d{2}-\d{2}")):
        if re.fullmatch(pattern, text):
            try:
                dt.datetime.strptime(text, fmt)
            except ValueError:
                return False
            return True
    return False


def catalog_import(
    path: Path = typer.Argument(..., help="A skypilot-catalog checkout (or any folder holding <cloud>/vms.csv)."),
    output: Path = typer.Option(Path("skypilot-prices.csv"), "--output", "-o", help="User catalog CSV to write."),
    date: str | None = typer.Option(
        None, "--date", help="Date of the prices, YYYY-MM or YYYY-MM-DD (default: the newest vms.csv's file date)."
    ),
    force: bool = typer.Option(False, "--force", help="Replace OUTPUT if it exists."),
    as_json: bool = JSON_OPTION,
    catalog_file: list[Path] | None = CATALOG_OPTION,
) -> None:
    """Re-price the catalog's instances from SkyPilot's vms.csv tables; use the result with --catalog OUTPUT."""
    import datetime as dt

    from rightsize.catalog.skypilot import CLOUDS, find_tables, import_skypilot, write_rows
    from rightsize.catalog.table import today

    if date is not None and not _is_date(date):
        raise SpecError("--date", f"must be a date like 2026-11 or 2026-11-24, got {short(date)}")
    if date is not None and dt.date.fromisoformat(date if len(date) == 10 else f"{date}-01") > today():
        raise SpecError("--date", f"{date} is after today ({today().isoformat()}); pass the date of the prices, "
                        "which --catalog refuses in the future")  # fmt: skip
    check_writable(output, "--output")  # first: a directory, with --force, had then been refused as one
    read = next((p for p in catalog_paths(catalog_file) if same_file(output, p)), None)
    if read is not None:
        # the import writes only the cloud rows it re-priced: the file's own rows (on-prem, negotiated) were lost
        raise SpecError("--output", f"is the catalog being read ({read}); write the import to another file "
                        "and keep yours as it is (or merge them by hand)")  # fmt: skip
    if output.exists() and not force:
        raise SpecError("--output", f"{output} exists; pass --force to replace it or choose another file")
    if date is None:
        newest = max(p.stat().st_mtime for p in find_tables(path).values())
        date = dt.date.fromtimestamp(newest).strftime("%Y-%m")
    cat = load_catalog_option(catalog_file)
    result = import_skypilot(path, cat, date)
    if not result.rows and result.bad_prices:
        raise SpecError("path", f"{len(result.bad_prices)} of the catalog's instances are listed under {path} with no "
                        f"valid Price (e.g. {result.bad_prices[0]}); a price is dollars per hour above 0 and below "
                        "100,000. Nothing written; pass SkyPilot's own vms.csv")  # fmt: skip
    if not result.rows:
        raise SpecError("path", f"none of the catalog's instances are listed under {path}; nothing written")
    write_rows(result.rows, output)
    if as_json:
        emit_json({"output": str(output), "updated": result.updated, "missing": result.missing, "date": date,
                   "bad_prices": result.bad_prices,
                   "tables": {c: str(p) for c, p in result.tables.items()}})  # fmt: skip
        return
    out_console.print(result.summary())
    # the summary counts the rows of the clouds it read; the other clouds' rows were never looked up
    others = {c: sum(i.provider == c for i in cat.instances) for c in CLOUDS if c not in result.tables}
    if left := [f"{c} ({n} rows)" for c, n in others.items() if n]:
        out_console.print(f"{' and '.join(left)} not in the import (no <cloud>/vms.csv for them under {path}): "
                          "their rows keep their shipped prices", markup=False)  # fmt: skip
    out_console.print(f"wrote {output}; plan with it: rightsize plan SPEC --catalog {output}  (or RIGHTSIZE_CATALOG)",
                      markup=False)  # fmt: skip


def register(app: typer.Typer) -> None:
    group = typer.Typer(add_completion=False, help="The hardware and price catalog.")
    group.callback(invoke_without_command=True)(catalog)
    group.command("import")(catalog_import)
    app.add_typer(group, name="catalog")
