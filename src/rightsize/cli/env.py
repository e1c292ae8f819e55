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
    family, how, hidden, gpus_in_catalog = _catalog_match(fp)
    if json_out:
        emit_json({**fp.to_dict(), "catalog_cpu_family": family, "catalog_cpu_matched_by": how or None,
                   "catalog_cpu_isa_hidden": hidden, "catalog_gpus": gpus_in_catalog})  # fmt: skip
        return
    out_console.print(f"id            {fp.id}")
    out_console.print(f"cpu           {fp.cpu_model} ({fp.physical_cores} cores, {fp.logical_cores} threads)")
    out_console.print(f"isa           {', '.join(fp.isa) or '-'}")
    out_console.print(f"ram           {format_bytes(fp.ram_bytes)}")
    gpus = ", ".join(f"{g.name} {format_bytes(g.memory_bytes)} (driver {g.driver})" for g in fp.gpus)
    out_console.print(f"gpus          {gpus or 'none'}")
    out_console.print(f"torch         {fp.torch or 'not installed'}")
    out_console.print(f"python / os   {fp.python} / {fp.os}")
    label = family_label(family, how, hidden, fp) if family else "none (projections onto other CPUs need one)"
    matched = f"CPU family {label}"
    if fp.gpus:
        matched += "; GPUs " + ", ".join(g or "not in the catalog" for g in gpus_in_catalog)
    out_console.print(f"catalog       {matched}", highlight=False)


def _catalog_match(fp: Environment) -> tuple[str | None, str, list[str], list[str | None]]:
    """The shipped catalog's CPU family for this machine (the one its measurements anchor CPU projections on), how
    it matched ("name", "sku", "signature", "isa"), the family's ISA entries this machine does not show (a hypervisor
    hides them: its kernels run without), and the catalog accelerator of each GPU."""
    from rightsize.catalog import load_catalog
    from rightsize.catalog.query import cpu_family_match, match_accelerator

    cat = load_catalog()
    fam, how = cpu_family_match(cat.cpus, fp)
    hidden = [f for f in cat.cpus[fam.name].isa if f not in fam.isa] if fam is not None else []
    accs = [match_accelerator(g.name, cat.accelerators, g.memory_bytes or None) for g in fp.gpus]
    return (fam.name if fam else None), how, hidden, [a.name if a else None for a in accs]


def family_label(family: str, how: str, hidden: list[str], fp: Environment) -> str:
    """The family, and how it was matched when by the CPU's family/model numbers or when this machine shows less of
    its ISA: "amd-genoa (from cpu family 25 model 17; AVX-512 hidden here: avx2, fma kernels)"."""
    said = []
    if how == "signature":
        number, _, model = fp.cpu_signature.partition("/")
        said.append(f"from cpu family {number} model {model}")
    if hidden:
        what = "AVX-512" if "avx512f" in hidden else "AMX" if any(f.startswith("amx") for f in hidden) else "ISA"
        runs = ", ".join(f for f in fp.isa if f not in ("avx512_vp2intersect", "amx_tile")) or "no vector"
        said.append(f"{what} hidden here: {runs} kernels")
    return family + (f" ({'; '.join(said)})" if said else "")


def register(app: typer.Typer) -> None:
    app.command("env")(env)
