"""Read the shipped CSV tables (catalog/data/) and an optional user file that adds or overrides rows.

    load_catalog()                    shipped data, plus $RIGHTSIZE_CATALOG if set
    load_catalog("my-prices.csv")     shipped data, plus that file
    load_catalog(["gpus.csv", "vms.csv"])   plus several (a new accelerator's row, and the instances that carry it)

Each user file is one CSV whose header says which table it extends: ``instance_type`` → instances
(key provider, region, instance_type), ``bandwidth_gbps`` → accelerators (key name),
``sustained_ghz`` → CPU families (key name). Rows with an existing key replace it (an instance row's blank or
absent ``physical_cores`` keeps the replaced row's, when vCPUs and CPU family are the same); others are added;
two rows of the user file with one key are refused (both line numbers named). Provider and region are
lowercased, so ``AWS,US-EAST-1`` replaces the shipped ``aws,us-east-1`` row.
In a user file ``source`` and ``price_date``/``date`` may be left empty (they become the file name
and its modification date); a date written there may not lie after today. Every bad cell raises
SpecError naming file, line and column (``catalog.table`` reads and checks the cells).
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import os
from collections.abc import Callable, Sequence
from dataclasses import replace
from importlib import resources
from pathlib import Path
from typing import TypeVar

from rightsize.catalog.model import Accelerator, Catalog, CpuFamily, Instance, Links, PowerTable
from rightsize.catalog.table import Row, csv_rows, read_table, user_text
from rightsize.errors import NotFoundError, SpecError
from rightsize.inputfile import short

__all__ = ["ENV_VAR", "env_catalog_paths", "load_catalog", "load_spot_buckets", "read_table"]

ENV_VAR = "RIGHTSIZE_CATALOG"
T = TypeVar("T")
# USD/h: a lower price is a typo or a unit slip, not a price ($1e-300/h had planned "$7e-300/h", "526000000.0x the
# cost"); the lowest real ones are cents per hour
MIN_PRICE_USD_PER_HOUR = 1e-6

ACCELERATOR_COLUMNS = (
    "name",
    "memory_gib",
    "bandwidth_gbps",
    "fp32_tflops",
    "tf32_tflops",
    "fp16_tflops",
    "bf16_tflops",
    "int8_tops",
    "tdp_w",
    "source",
    "date",
)
CPU_COLUMNS = (
    "name",
    "vendor",
    "isa",
    "fp32_flop_per_cycle_per_core",
    "bf16_flop_per_cycle_per_core",
    "int8_flop_per_cycle_per_core",
    "sustained_ghz",
    "memory_bandwidth_gbps",
    "source",
    "date",
)
INSTANCE_COLUMNS = (
    "provider",
    "region",
    "instance_type",
    "vcpus",
    "ram_gib",
    "cpu_family",
    "accelerator",
    "accelerator_count",
    "on_demand_usd_per_hour",
    "spot_usd_per_hour",
    "spot_interruption",
    "price_date",
    "source",
)
ACCELERATOR_OPTIONAL = ("fp32_dual_issue", "exposed_gib")  # read when given; any other column is refused
CPU_OPTIONAL = ("cores_per_socket",)
INSTANCE_OPTIONAL = ("physical_cores",)
POWER_COLUMNS = ("kind", "key", "min_w", "max_w")
POWER_KINDS = ("cpu", "gpu", "memory")
GRID_COLUMNS = ("provider", "region", "pue", "kg_co2e_per_kwh")
LINK_COLUMNS = ("provider", "instance_type", "network_gbps", "gpu_link_gbytes_per_s")
SOURCE_OPTIONAL = ("source", "date")  # the energy and network tables' provenance: read when given
SPOT_BUCKETS = ("<5%", "5-10%", "10-15%", "15-20%", ">20%")


def _accelerator(r: Row) -> Accelerator:
    tflops = {
        "fp32": r.num("fp32_tflops"),
        "tf32": r.num("tf32_tflops"),
        "fp16": r.num("fp16_tflops"),
        "bf16": r.num("bf16_tflops"),
        "int8": r.num("int8_tops"),
    }
    memory = r.num("memory_gib", minimum=1e-9)
    return Accelerator(
        name=r.text("name"),
        memory_gib=memory,
        bandwidth_gbps=r.num("bandwidth_gbps", minimum=1e-9),
        tflops=tflops,
        tdp_w=r.num("tdp_w"),
        source=r.text("source"),
        date=r.date("date"),
        fp32_dual_issue=r.choice("fp32_dual_issue", ("0", "1")) == "1",
        exposed_gib=r.number("exposed_gib", required=False, minimum=1e-9, maximum=memory),  # a share of memory_gib
    )


def _cpu(r: Row) -> CpuFamily:
    return CpuFamily(
        name=r.text("name"),
        vendor=r.text("vendor").lower(),
        isa=tuple(s.strip().lower() for s in r.text("isa").split(";") if s.strip()),
        flop_per_cycle_per_core={
            "fp32": r.num("fp32_flop_per_cycle_per_core", minimum=1e-9),
            "bf16": r.num("bf16_flop_per_cycle_per_core", minimum=1e-9),
            "int8": r.num("int8_flop_per_cycle_per_core", minimum=1e-9),
        },
        sustained_ghz=r.num("sustained_ghz", minimum=1e-9),
        memory_bandwidth_gbps=r.num("memory_bandwidth_gbps", minimum=1e-9),
        source=r.text("source"),
        date=r.date("date"),
        cores_per_socket=r.integer("cores_per_socket", required=False) or 0,  # 0 or empty: not known
    )


def _price(r: Row, column: str, fix: str, required: bool = True) -> float | None:
    """``Row.price`` (more than 0), and at least ``MIN_PRICE_USD_PER_HOUR``."""
    value = r.price(column, fix, required=required)
    if value is not None and value < MIN_PRICE_USD_PER_HOUR:
        raise r._fail(column, f"is ${value:g} per hour, below ${MIN_PRICE_USD_PER_HOUR:g}: not a price (a typo or "
                      f"a unit slip?); write the price in USD per hour ({fix})")  # fmt: skip
    return value


def _instance(r: Row, accelerators: dict[str, Accelerator], cpus: dict[str, CpuFamily]) -> Instance:
    accelerator = r.ref("accelerator", dict(accelerators), required=False)
    count = r.integer("accelerator_count", required=False) or 0
    if accelerator and count < 1:
        raise r._fail("accelerator_count", f"must be >= 1 when accelerator is {accelerator!r}")
    if not accelerator and count:
        raise r._fail("accelerator", f"is empty but accelerator_count is {count}; name the accelerator")
    cpu_family = r.ref("cpu_family", dict(cpus))
    assert cpu_family is not None
    on_demand = _price(r, "on_demand_usd_per_hour", "for hardware you own, give its amortised cost per hour")
    assert on_demand is not None
    spot = _price(r, "spot_usd_per_hour", "leave it empty when there is no spot offer", required=False)
    if spot is not None and spot > on_demand:
        raise r._fail("spot_usd_per_hour", f"spot price {spot:g} is above on-demand {on_demand:g}; write the spot "
                      "price, or leave it empty when there is no spot offer")  # fmt: skip
    vcpus = r.integer("vcpus", minimum=1) or 1
    cores = r.integer("physical_cores", required=False, minimum=1)
    if cores is not None and cores > vcpus:  # 512 cores on a 2-vCPU c7i.large had projected it 90x faster
        raise r._fail("physical_cores", f"is {cores}, more than the {vcpus} vCPUs; write the physical cores behind "
                      "the vCPUs (vcpus / 2 with SMT), or leave it empty")  # fmt: skip
    return Instance(
        provider=r.text("provider").lower(),
        region=r.text("region").lower(),
        instance_type=r.text("instance_type"),
        vcpus=vcpus,
        ram_gib=r.num("ram_gib", minimum=1e-9),
        cpu_family=cpu_family,
        accelerator=accelerator,
        accelerator_count=count,
        on_demand_usd_per_hour=on_demand,
        spot_usd_per_hour=spot,
        spot_interruption=r.choice("spot_interruption", SPOT_BUCKETS),
        price_date=r.date("price_date"),
        source=r.text("source"),
        physical_cores=cores,
    )


def read_accelerators(path: Path) -> dict[str, Accelerator]:
    """Accelerators of a CSV with accelerators.csv's columns (e.g. reference/check_accelerators.csv: cards that
    only the projection benchmark's checks need, kept out of the planner's catalog)."""
    text = path.read_text(encoding="utf-8")
    accs = [_accelerator(r) for r in read_table(path, text, ACCELERATOR_COLUMNS, optional=ACCELERATOR_OPTIONAL)]
    _unique(accs, lambda a: a.name, str(path))
    return {a.name: a for a in accs}


def _data_text(name: str) -> tuple[Path, str]:
    ref = resources.files("rightsize.catalog") / "data" / name
    return Path(str(ref)), ref.read_text(encoding="utf-8")


def _unique(items: list[T], key: Callable[[T], object], where: str) -> None:
    seen: set[object] = set()
    for item in items:
        k = key(item)
        if k in seen:
            raise SpecError(where, f"duplicate row for {k}; keep one")
        seen.add(k)


def _one_per_key(rows: list[tuple[Row, T]], key: Callable[[T], object], what: str) -> dict[object, T]:
    """``key`` -> item of a user file's rows, refusing a key that two rows share (the last would win unsaid)."""
    out: dict[object, T] = {}
    lines: dict[object, int] = {}
    for r, item in rows:
        k = key(item)
        if k in lines:
            shown = ", ".join(map(str, k)) if isinstance(k, tuple) else str(k)
            raise SpecError(f"{r.where} line {r.line}", f"repeats line {lines[k]}'s {what} ({shown}); keep one of "
                            "the two rows")  # fmt: skip
        lines[k], out[k] = r.line, item
    return out


def _shipped() -> Catalog:
    path, text = _data_text("accelerators.csv")
    accs = [_accelerator(r) for r in read_table(path, text, ACCELERATOR_COLUMNS, optional=ACCELERATOR_OPTIONAL)]
    _unique(accs, lambda a: a.name, str(path))
    path, text = _data_text("cpus.csv")
    cpus = [_cpu(r) for r in read_table(path, text, CPU_COLUMNS, optional=CPU_OPTIONAL)]
    _unique(cpus, lambda c: c.name, str(path))
    accelerators = {a.name: a for a in accs}
    cpu_map = {c.name: c for c in cpus}
    path, text = _data_text("instances.csv")
    insts = [
        _instance(r, accelerators, cpu_map)
        for r in read_table(path, text, INSTANCE_COLUMNS, optional=INSTANCE_OPTIONAL)
    ]
    _unique(insts, lambda i: i.key, str(path))
    power = _power(_data_text("power.csv"), _data_text("grid.csv"))
    links = _links(*_data_text("interconnect.csv"))
    return Catalog(accelerators=accelerators, cpus=cpu_map, instances=tuple(insts), power=power, links=links)


def _power(power: tuple[Path, str] | None, grid: tuple[Path, str] | None, base: PowerTable | None = None,
           user: bool = False) -> PowerTable:  # fmt: skip
    """Power rows (kind, key, min_w, max_w) and grid rows (provider, region, pue, kg_co2e_per_kwh) over ``base``,
    each file's header checked as every table's is (``read_table``: a misspelt column had been dropped unsaid)."""
    cpu = dict(base.cpu) if base else {}
    gpu = dict(base.gpu) if base else {}
    memory = base.memory_w_per_gib if base else 0.392
    for r in read_table(*power, POWER_COLUMNS, user=user, optional=SOURCE_OPTIONAL) if power else ():
        kind = r.choice("kind", POWER_KINDS) or r.text("kind")  # "GPU" or "mem" had been skipped unsaid
        pair = (r.num("min_w"), r.num("max_w"))
        if pair[0] > pair[1]:  # an idle draw above the full-load one had been planned from, unsaid
            raise r._fail("max_w", f"is {pair[1]:g}, below min_w {pair[0]:g}; max_w is the draw at full load and "
                          "min_w at idle: swap them, or fix the one that is wrong")  # fmt: skip
        if kind == "cpu":
            cpu[r.text("key")] = pair
        elif kind == "gpu":
            gpu[r.text("key")] = pair
        elif kind == "memory":  # one row; its key cell is not read
            memory = pair[0]
    sites = dict(base.grid) if base else {}
    for r in read_table(*grid, GRID_COLUMNS, user=user, optional=SOURCE_OPTIONAL) if grid else ():
        sites[(r.text("provider"), r.text("region"))] = (r.num("pue"), r.num("kg_co2e_per_kwh"))
    return PowerTable(cpu, gpu, memory, sites)


def _links(path: Path, text: str, user: bool = False) -> dict[tuple[str, str], Links]:
    return {
        (r.text("provider"), r.text("instance_type")): Links(r.num("network_gbps"), r.num("gpu_link_gbytes_per_s"),
                                                             r.text("source", required=False))
        for r in read_table(path, text, LINK_COLUMNS, user=user, optional=SOURCE_OPTIONAL)
    }  # fmt: skip


def _no_repeats(path: Path, text: str, columns: tuple[str, ...]) -> None:
    """Refuse two rows of a power, grid or link file with one key (``columns``; the last would win unsaid)."""
    reader = csv.DictReader(io.StringIO(text, newline=""))
    lines: dict[tuple[str, ...], int] = {}
    for row in reader:
        k = tuple(row.get(c) or "" for c in columns)
        if row.get("kind") == "memory":  # one memory row: its key cell is not read
            k = ("memory",)
        if k in lines:
            raise SpecError(f"{path} line {reader.line_num}", f"repeats line {lines[k]}'s {' and '.join(columns)} "
                            f"({', '.join(k)}); keep one of the two rows")  # fmt: skip
        lines[k] = reader.line_num


def _same_but_case(known: list[tuple[str, str, str]], rows: list[tuple[Row, Instance]]) -> None:
    """Refuse a user's instance type that differs from one already listed only in case: ``G5.XLARGE`` had been added
    beside ``g5.xlarge``, which the user meant to replace, and both were planned."""
    seen = {(p, r, t.lower()): t for p, r, t in known}
    for row, inst in rows:
        other = seen.setdefault((inst.provider, inst.region, inst.instance_type.lower()), inst.instance_type)
        if other != inst.instance_type:
            raise row._fail("instance_type", f"{inst.instance_type!r} differs from {other!r} only in case; write "
                            f"{other!r} to replace that row, or a new name to add one")  # fmt: skip


def _same_hardware(old: Instance, new: Instance) -> Instance:
    """``new``, replacing ``old``, with ``old``'s physical cores when its cell is blank or absent and it names the same
    vCPUs and CPU family: the hardware does not change with the price (a price-only row, in the columns of the docs'
    example, had made c7a.large's 2 cores 1, and a cheaper c7a.large three replicas dearer). A given value wins."""
    if new.physical_cores is None and (new.vcpus, new.cpu_family) == (old.vcpus, old.cpu_family):
        return replace(new, physical_cores=old.physical_cores)
    return new


def _merge_user(base: Catalog, path: Path) -> Catalog:
    """Apply a user CSV to ``base``: same key replaces, new key adds."""
    if not path.exists():
        raise NotFoundError(f"catalog file {short(str(path))} does not exist; pass an existing CSV to --catalog or "
                            f"{ENV_VAR}")  # fmt: skip
    text = user_text(path)  # a folder or FIFO: "is not a regular file"; a byte not UTF-8: its line and column
    lines = csv_rows(path, text)  # a cell past csv's field limit: one line naming file and line, not a traceback
    if not any(cell.strip() for row in lines for cell in row):
        raise SpecError(f"{path}", "is empty; a catalog CSV is a header row, then one row per entry (docs/catalog.md)")
    if not any(cell.strip() for cell in lines[0]):
        raise SpecError(f"{path} line 1", "is blank; the header must be the file's first line")
    if not any(cell.strip() for row in lines[1:] for cell in row):  # a header alone changed nothing, silently
        raise SpecError(f"{path}", "has a header but no rows; add a row per entry")
    header = lines[0]
    columns = {h.strip() for h in header}
    mtime = dt.date.fromtimestamp(path.stat().st_mtime).isoformat()
    defaults = {"source": f"user catalog {path.name}", "price_date": mtime, "date": mtime}
    if set(LINK_COLUMNS[2:]) <= columns:  # interconnect rows name instance types too
        _no_repeats(path, text, LINK_COLUMNS[:2])
        return replace(base, links={**base.links, **_links(path, text, user=True)})
    if "instance_type" in columns:
        table = read_table(path, text, INSTANCE_COLUMNS, defaults, user=True, optional=INSTANCE_OPTIONAL)
        rows = [(r, _instance(r, base.accelerators, base.cpus)) for r in table]
        new = _one_per_key(rows, lambda i: i.key, "provider, region and instance_type")
        _same_but_case([i.key for i in base.instances], rows)
        kept = [_same_hardware(i, new.pop(i.key)) if i.key in new else i for i in base.instances]
        return replace(base, instances=(*kept, *new.values()))
    if "bandwidth_gbps" in columns:
        table = read_table(path, text, ACCELERATOR_COLUMNS, defaults, user=True, optional=ACCELERATOR_OPTIONAL)
        accs = _one_per_key([(r, _accelerator(r)) for r in table], lambda a: a.name, "name")
        return replace(base, accelerators={**base.accelerators, **{a.name: a for a in accs.values()}})
    if "sustained_ghz" in columns:
        table = read_table(path, text, CPU_COLUMNS, defaults, user=True, optional=CPU_OPTIONAL)
        cpus = _one_per_key([(r, _cpu(r)) for r in table], lambda c: c.name, "name")
        return replace(base, cpus={**base.cpus, **{c.name: c for c in cpus.values()}})
    if set(POWER_COLUMNS) <= columns:  # the energy tables: power.csv, grid.csv rows
        _no_repeats(path, text, POWER_COLUMNS[:2])
        return replace(base, power=_power((path, text), None, base.power, user=True))
    if set(GRID_COLUMNS) <= columns:
        _no_repeats(path, text, GRID_COLUMNS[:2])
        return replace(base, power=_power(None, (path, text), base.power, user=True))
    raise SpecError(
        f"{path} line 1",
        "header matches no catalog table; include instance_type (instances), bandwidth_gbps (accelerators), "
        "sustained_ghz (CPU families), min_w (power), kg_co2e_per_kwh (grid) or network_gbps (links)",
    )


def load_catalog(user_file: str | Path | Sequence[str | Path] | None = None) -> Catalog:
    """Shipped tables plus ``user_file`` — one CSV or several — (or $RIGHTSIZE_CATALOG when None: one path, or
    several joined by os.pathsep as in PATH; empty string = none). Several files merge accelerators and CPU families
    first, so an instances file may name a GPU or CPU another file adds, whatever order they are given in."""
    files = (
        env_catalog_paths() if user_file is None else [user_file] if isinstance(user_file, (str, Path)) else user_file
    )
    paths = [Path(f) for f in files if str(f)]
    catalog = _shipped()
    for path in sorted(paths, key=_merge_order):  # stable: files of one table apply in the order given
        catalog = _merge_user(catalog, path)
    return catalog


def env_catalog_paths() -> list[Path]:
    """The user catalog files $RIGHTSIZE_CATALOG names: one path, or several joined by os.pathsep (as PATH)."""
    return [Path(part) for part in (os.environ.get(ENV_VAR) or "").split(os.pathsep) if part]


def _merge_order(path: Path) -> int:
    """0 for a file of the tables others refer to (accelerators, CPU families), else 1; a file that cannot be read
    sorts as 1 and fails in ``_merge_user``, with its own message."""
    if not path.is_file():  # a FIFO would block the read here
        return 1
    try:
        with path.open(encoding="utf-8", errors="replace") as f:
            header = {h.strip() for h in next(csv.reader([f.readline()]), [])}
    except (OSError, UnicodeError, csv.Error):  # csv.Error: a header cell past csv's field limit
        return 1
    return 0 if {"bandwidth_gbps", "sustained_ghz"} & header and "instance_type" not in header else 1


def load_spot_buckets() -> dict[str, float]:
    """Spot Advisor bucket -> assumed monthly interruption fraction (catalog/data/spot_buckets.csv)."""
    path, text = _data_text("spot_buckets.csv")
    out: dict[str, float] = {}
    for r in read_table(path, text, ("bucket", "monthly_interruption_fraction", "source", "date")):
        out[r.text("bucket")] = r.num("monthly_interruption_fraction")
    return out
