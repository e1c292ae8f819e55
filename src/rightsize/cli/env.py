"""``rightsize env``: print this machine's environment fingerprint."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

from rightsize.cli._common import JSON_OPTION, emit_json, out_console

if TYPE_CHECKING:
    from rightsize.profile import Environment
from rightsize.units import format_bytes


def env(json_out: bool = JSON_OPTION) -> None:
    """Print the fingerprint stored with every measurement (CPU, ISA, RAM, GPUs, torch)."""
    from rightsize.measure.env import fingerprint

    fp = fingerprint()
    family, gpus_in_catalog = _catalog_match(fp)
    if json_out:
        emit_json({**fp.to_dict(), "catalog_cpu_family": family, "catalog_gpus": gpus_in_catalog})
        return
    out_console.print(f"id            {fp.id}")
    out_console.print(f"cpu           {fp.cpu_model} ({fp.physical_cores} cores, {fp.logical_cores} threads)")
    out_console.print(f"isa           {', '.join(fp.isa) or '-'}")
    out_console.print(f"ram           {format_bytes(fp.ram_bytes)}")
    gpus = ", ".join(f"{g.name} {format_bytes(g.memory_bytes)} (driver {g.driver})" for g in fp.gpus)
    out_console.print(f"gpus          {gpus or 'none'}")
    out_console.print(f"torch         {fp.torch or 'not installed'}")
    out_console.print(f"python / os   {fp.python} / {fp.os}")
    matched = f"CPU family {family or 'none (projections onto other CPUs need one)'}"
    if fp.gpus:
        matched += "; GPUs " + ", ".join(g or "not in the catalog" for g in gpus_in_catalog)
    out_console.print(f"catalog       {matched}", highlight=False)


def _catalog_match(fp: Environment) -> tuple[str | None, list[str | None]]:
    """The shipped catalog's CPU family for this machine (the one its measurements anchor CPU projections on) and
    the catalog accelerator of each GPU."""
    from rightsize.catalog import load_catalog, match_cpu_family
    from rightsize.catalog.query import match_accelerator

    cat = load_catalog()
    fam = match_cpu_family(cat.cpus, fp)
    accs = [match_accelerator(g.name, cat.accelerators, g.memory_bytes or None) for g in fp.gpus]
    return (fam.name if fam else None), [a.name if a else None for a in accs]


def register(app: typer.Typer) -> None:
    app.command("env")(env)
