"""``rightsize env``: print this machine's environment fingerprint."""

from __future__ import annotations

import typer

from rightsize.cli._common import JSON_OPTION, emit_json, out_console
from rightsize.units import format_bytes


def env(json_out: bool = JSON_OPTION) -> None:
    """Print the fingerprint stored with every measurement (CPU, ISA, RAM, GPUs, torch)."""
    from rightsize.measure.env import fingerprint

    fp = fingerprint()
    if json_out:
        emit_json(fp.to_dict())
        return
    out_console.print(f"id            {fp.id}")
    out_console.print(f"cpu           {fp.cpu_model} ({fp.physical_cores} cores, {fp.logical_cores} threads)")
    out_console.print(f"isa           {', '.join(fp.isa) or '-'}")
    out_console.print(f"ram           {format_bytes(fp.ram_bytes)}")
    gpus = ", ".join(f"{g.name} {format_bytes(g.memory_bytes)} (driver {g.driver})" for g in fp.gpus)
    out_console.print(f"gpus          {gpus or 'none'}")
    out_console.print(f"torch         {fp.torch or 'not installed'}")
    out_console.print(f"python / os   {fp.python} / {fp.os}")


def register(app: typer.Typer) -> None:
    app.command("env")(env)
