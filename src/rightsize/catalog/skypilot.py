"""Refresh catalog prices from a SkyPilot catalog directory the user has (``rightsize catalog import PATH``).

SkyPilot publishes per-cloud ``vms.csv`` tables (github.com/skypilot-org/skypilot-catalog,
``catalogs/v<N>/<cloud>/vms.csv``) with columns ``InstanceType, AcceleratorName, AcceleratorCount,
vCPUs, MemoryGiB, GpuInfo, Price, SpotPrice, Region, AvailabilityZone`` (some clouds omit the zone).
We read the newest version under PATH for aws, gcp and azure and re-price the catalog rows we already
know (same cloud, region and instance type): on-demand = the lowest price listed for the region,
spot = the mean over its zones. GCP rows we ship as ``host+gpu`` (``n1-highcpu-8+t4``) are the host's
price plus the GPU's own row (SkyPilot lists attachable GPUs as rows without an instance type).
Nothing else changes: the row's hardware facts stay ours. The output is a user catalog CSV
(``--catalog FILE`` / ``RIGHTSIZE_CATALOG``) whose rows say where each price came from and when.
"""

from __future__ import annotations

import csv
import io
import re
import statistics
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from rightsize.catalog.load import INSTANCE_COLUMNS, INSTANCE_OPTIONAL, MIN_PRICE_USD_PER_HOUR
from rightsize.catalog.model import Catalog, Instance
from rightsize.errors import NotFoundError, SpecError
from rightsize.inputfile import short, write_whole

CLOUDS = ("aws", "gcp", "azure")
MIN_PRICE = (
    MIN_PRICE_USD_PER_HOUR  # the catalog loader's floor (a lower one was written, then refused by every command)
)
COLUMNS = (*INSTANCE_COLUMNS, *INSTANCE_OPTIONAL)  # every column a loaded instances file may hold
MAX_BYTES = 256 * 2**20  # the aws table is ~10 MB; refuse anything absurd rather than read it
# Our accelerator names -> SkyPilot's GPU names (GCP attachable GPUs).
GPU_NAMES = {"V100-16GB": "V100", "A100-40GB": "A100", "A100-80GB": "A100-80GB", "H100": "H100", "T4": "T4", "L4": "L4"}


@dataclass
class Prices:
    on_demand: list[float] = field(default_factory=list)
    spot: list[float] = field(default_factory=list)


@dataclass
class ImportResult:
    rows: list[dict[str, str]]  # user-catalog rows (INSTANCE_COLUMNS)
    tables: dict[str, Path]  # cloud -> vms.csv read
    updated: int
    missing: list[str]  # our rows the import did not list
    changes: list[tuple[str, float, float]]  # (instance, old on-demand, new on-demand)
    bad_prices: list[str] = field(default_factory=list)  # "cloud:region:type 'cell'": a listed row, no valid Price

    def summary(self) -> str:
        moved = [new / old - 1 for _, old, new in self.changes if old > 0]
        med = f", median on-demand change {statistics.median(moved):+.1%}" if moved else ""
        return (
            f"re-priced {self.updated} catalog rows from {', '.join(f'{c} ({p})' for c, p in self.tables.items())}"
            f"{med}; {len(self.missing)} rows not listed there keep their shipped price"
            + (f" ({len(self.bad_prices)} of them listed with no valid Price, e.g. {self.bad_prices[0]})"
               if self.bad_prices else "")
        )  # fmt: skip


LAYOUT = "<cloud>/vms.csv, v<N>/<cloud>/vms.csv or catalogs/v<N>/<cloud>/vms.csv (a skypilot-catalog checkout)"


def _version_folders(folder: Path) -> list[tuple[int, Path]]:
    """The ``v<N>`` folders directly in ``folder``, with N; none where it cannot be listed."""
    try:
        entries = list(folder.iterdir()) if folder.is_dir() else []
    except OSError:
        return []
    return [(int(e.name[1:]), e) for e in entries if re.fullmatch(r"v\d{1,6}", e.name) and e.is_dir()]


def find_tables(root: Path) -> dict[str, Path]:
    """cloud -> the newest ``vms.csv`` where a SkyPilot catalog keeps it under ``root`` (``LAYOUT``:
    ``catalogs/v8/aws/vms.csv`` beats ``v7``), the version read from that folder's name alone. Nothing else is
    searched: ``rglob`` over the whole tree had walked ``/`` or a home folder and built prices from whatever
    test fixture it met, its "version" a /v(N)/ anywhere in the path."""
    if not root.is_dir():
        raise NotFoundError(f"catalog import: {root} is not a directory; pass a skypilot-catalog checkout")
    found: dict[str, tuple[int, Path]] = {}
    for version, base in [(-1, root), *_version_folders(root), *_version_folders(root / "catalogs")]:
        for cloud in CLOUDS:
            path = base / cloud / "vms.csv"
            if path.is_file() and (cloud not in found or version > found[cloud][0]):  # a folder is not a table
                found[cloud] = (version, path)
    if not found:
        raise NotFoundError(
            f"catalog import: no <cloud>/vms.csv for {', '.join(CLOUDS)} in {root}; a SkyPilot catalog keeps them "
            f"as {LAYOUT}: pass that checkout or its catalogs/v<N> folder"
        )
    return {c: p for c, (_, p) in sorted(found.items())}


def _rows(path: Path) -> Iterable[dict[str, str]]:
    size = path.stat().st_size
    if size > MAX_BYTES:
        raise SpecError(str(path), f"is {size / 2**20:.0f} MiB; a SkyPilot vms.csv is tens of MiB at most")
    text = path.read_bytes().decode("utf-8-sig", errors="replace")  # a byte-order mark hid the first column
    reader = csv.DictReader(io.StringIO(text, newline=""))
    try:
        need = {"InstanceType", "Price", "Region"}
        if not need <= set(reader.fieldnames or []):
            raise SpecError(f"{path} line 1", f"needs columns {', '.join(sorted(need))} (a SkyPilot vms.csv)")
        yield from reader
    except csv.Error as exc:  # a cell past csv's field limit, a NUL byte, ...
        where = f"{path} line {reader.line_num}"
        raise SpecError(where, f"is not a readable CSV ({exc}); pass SkyPilot's own vms.csv") from None


def _price(text: str | None) -> float | None:
    try:
        value = float(text or "")
    except ValueError:
        return None
    return value if MIN_PRICE <= value < 1e5 else None  # NaN, negatives and absurd values are not prices


def read_prices(
    path: Path, bad: dict[tuple[str, str], str] | None = None
) -> tuple[dict[tuple[str, str], Prices], dict[tuple[str, str], Prices]]:
    """(region, instance type) -> prices, and (region, GPU name) -> prices of attachable GPUs (GCP). ``bad``, when
    given, collects (region, instance type) -> the Price cell of rows listed with no valid price."""
    vms: dict[tuple[str, str], Prices] = defaultdict(Prices)
    gpus: dict[tuple[str, str], Prices] = defaultdict(Prices)
    for r in _rows(path):
        region, itype = (r.get("Region") or "").strip(), (r.get("InstanceType") or "").strip()
        key = (region, itype) if itype else (region, (r.get("AcceleratorName") or "").strip())
        if not key[1]:
            continue
        target = vms if itype else gpus
        if itype == "" and (r.get("AcceleratorCount") or "1").strip() not in ("1", "1.0"):
            continue  # per-GPU price: the one-GPU row
        od, sp = _price(r.get("Price")), _price(r.get("SpotPrice"))
        if od is not None:
            target[key].on_demand.append(od)
        elif bad is not None and itype:
            bad.setdefault(key, (r.get("Price") or "").strip())
        if sp is not None:
            target[key].spot.append(sp)
    return vms, gpus


def _lookup(inst: Instance, vms: dict[tuple[str, str], Prices], gpus: dict[tuple[str, str], Prices]) -> Prices | None:
    found = vms.get((inst.region, inst.instance_type))
    if found is not None and found.on_demand:
        return found
    host, plus, _ = inst.instance_type.partition("+")
    if not plus or inst.accelerator is None:
        return None
    h, g = vms.get((inst.region, host)), gpus.get((inst.region, GPU_NAMES.get(inst.accelerator, inst.accelerator)))
    if h is None or g is None or not h.on_demand or not g.on_demand:
        return None
    n = inst.accelerator_count
    spot = [min(h.spot) + n * min(g.spot)] if h.spot and g.spot else []
    return Prices([min(h.on_demand) + n * min(g.on_demand)], spot)


def import_skypilot(root: Path, catalog: Catalog, price_date: str) -> ImportResult:
    """Re-price ``catalog``'s rows from the SkyPilot tables under ``root``; rows dated ``price_date``."""
    tables = find_tables(root)
    rows, missing, changes, bad_prices = [], [], [], []
    for cloud, path in tables.items():
        bad: dict[tuple[str, str], str] = {}
        vms, gpus = read_prices(path, bad)
        rel = path.relative_to(root) if path.is_relative_to(root) else path
        for inst in (i for i in catalog.instances if i.provider == cloud):
            prices = _lookup(inst, vms, gpus)
            if prices is None:
                missing.append(f"{cloud}:{inst.region}:{inst.instance_type}")
                if (cell := bad.get((inst.region, inst.instance_type))) is not None:
                    bad_prices.append(f"{cloud}:{inst.region}:{inst.instance_type} {short(cell or '(empty)')}")
                continue
            od = min(prices.on_demand)
            spot = round(statistics.fmean(prices.spot), 4) if prices.spot else None
            if spot is not None and spot > od:  # no spot capacity (Instance.price_usd_per_hour); a loaded file
                spot = None  # refuses a spot price above on-demand
            changes.append((inst.instance_type, inst.on_demand_usd_per_hour, od))
            row = {c: "" for c in COLUMNS}
            row |= {
                "provider": inst.provider, "region": inst.region, "instance_type": inst.instance_type,
                "vcpus": str(inst.vcpus), "ram_gib": f"{inst.ram_gib:g}", "cpu_family": inst.cpu_family or "",
                "accelerator": inst.accelerator or "", "accelerator_count": str(inst.accelerator_count),
                "on_demand_usd_per_hour": f"{od:g}", "spot_usd_per_hour": "" if spot is None else f"{spot:g}",
                "spot_interruption": inst.spot_interruption or "", "price_date": price_date,
                "physical_cores": str(inst.physical_cores) if inst.physical_cores else "",
                "source": f"skypilot catalog import of {rel} (prices dated {price_date}); spot = mean over zones",
            }  # fmt: skip
            rows.append(row)
    return ImportResult(rows, tables, len(rows), missing, changes, bad_prices)


def write_rows(rows: list[dict[str, str]], out: Path) -> None:
    """The rows as a user catalog CSV, written atomically (an existing file is replaced only when complete)."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(COLUMNS), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    write_whole(out, buf.getvalue(), "--output")
