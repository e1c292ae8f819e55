"""Rules for workloads where a GPU rarely helps: classic ML (gradient boosting, linear models) and
ETL / feature engineering go to CPU instances, compute- or memory-optimised, sized by data size.

The seed article (Exercise 1; Example 1; "Wrong CPU family") is the source of the rules:
- tabular training (gradient boosting / logistic regression on ~10M rows): compute-optimised CPU,
  more RAM for the dataset and strong per-core speed; "GPU unlikely to help";
- feature engineering with heavy joins and UDFs: CPU; memory-bound ETL belongs on memory-optimised
  instances, not compute-optimised ones.
Sizing factors are assumptions, stated in the result and overridable by measuring the workload as
``kind: deep_learning`` (then the planners use measured curves instead of rules).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from rightsize.catalog.model import Instance
from rightsize.memory_budget import CPU_RAM_FRACTION
from rightsize.plan.result import Candidate
from rightsize.plan.verify import serving_buy

__all__ = ["RuleSizing", "cpu_family_class", "plan_rules", "rule_sizing", "rules_choice"]

BYTES_PER_VALUE = 8  # float64 columns (pandas / numpy default)
DEFAULT_FEATURES = 50  # columns per row when the spec gives rows but not data_gb (assumption)
# RAM per byte of raw data. Gradient boosting (XGBoost hist / LightGBM) holds the data, a quantised copy,
# gradients and histogram buffers: ~3x (assumption). pandas ETL: "5 to 10 times as much RAM as the
# size of your dataset" (Wes McKinney, "Apache Arrow and the 10 things I hate about pandas", 2017): 6x.
RAM_FACTOR = {"classic_ml": 3.0, "etl": 6.0}
VCPUS_PER_10M_ROWS = 8  # histogram building parallelises over rows/features; assumption, min 4, max 64
USABLE_RAM_FRACTION = CPU_RAM_FRACTION  # as the other planners (rightsize.memory_budget)
# how a rules plan ranks (rank_key below): not by price alone, so a cheaper row of another family ranks lower
RULES_ORDER = ("ranked by rule: holds the data in RAM, has the wanted vCPUs, is of the wanted family (see the "
               "recommendation), then by price")  # fmt: skip
ETL_MEMORY_BOUND_GIB = 32.0  # above this an ETL job is memory-bound for our purposes (assumption)
FAMILY_WORDS = {"compute": "compute-optimised", "general": "general-purpose", "memory": "memory-optimised"}
FALLBACK = "fallback: "  # the note a recommendation short of the wanted vCPUs or family carries (rules_choice)


@dataclass(frozen=True)
class RuleSizing:
    data_bytes: float
    ram_bytes: float  # needed
    vcpus: int  # wanted
    family: str  # compute | general | memory (wanted)
    assumptions: tuple[str, ...]


def cpu_family_class(inst: Instance) -> str:
    """compute (<= 2.5 GiB/vCPU, e.g. c6i/c7i/F-series), memory (>= 6, e.g. r7i/E-series) or general."""
    ratio = inst.ram_gib / max(1, inst.vcpus)
    return "compute" if ratio <= 2.5 else "memory" if ratio >= 6 else "general"


def rule_sizing(kind: str, data_gb: float | None, rows: int | None) -> RuleSizing:
    notes: list[str] = []
    if data_gb is not None:
        data = data_gb * 1e9
    elif rows is not None:
        data = float(rows) * DEFAULT_FEATURES * BYTES_PER_VALUE
        notes.append(f"data size from rows: {rows:,} rows x {DEFAULT_FEATURES} float64 columns = {data / 1e9:.1f} GB")
    else:
        data = 1e9
        notes.append("no data_gb or rows given: assumed 1 GB")
    factor = RAM_FACTOR.get(kind, 3.0)
    ram = data * factor
    notes.append(f"RAM needed ~{factor:g}x the data ({ram / 1e9:.1f} GB)")
    n_rows = rows if rows is not None else data / (DEFAULT_FEATURES * BYTES_PER_VALUE)
    per_10m = VCPUS_PER_10M_ROWS if kind == "classic_ml" else VCPUS_PER_10M_ROWS // 2  # joins/UDFs scale less
    vcpus = int(min(64, max(4, math.ceil(n_rows / 1e7 * per_10m))))
    notes.append(f"~{per_10m} vCPUs per 10M rows: {vcpus} vCPUs")
    per_vcpu_gib = ram / 2**30 / vcpus
    if kind == "etl":  # seed: memory-bound ETL belongs on memory-optimised instances
        family = "memory" if ram / 2**30 > ETL_MEMORY_BOUND_GIB or per_vcpu_gib > 4.0 else "general"
    else:  # compute-optimised (2 GiB/vCPU) unless the RAM per wanted vCPU says otherwise
        family = (
            "compute" if per_vcpu_gib <= 2.0 * USABLE_RAM_FRACTION else "general" if per_vcpu_gib <= 4.0 else "memory"
        )
    notes.append(f"{FAMILY_WORDS[family]} family wanted ({per_vcpu_gib:.1f} GiB per wanted vCPU)")
    return RuleSizing(data, ram, vcpus, family, tuple(notes))


def plan_rules(
    instances: Sequence[Instance], kind: str, data_gb: float | None, rows: int | None, purchase: Sequence[str]
) -> tuple[list[Candidate], RuleSizing]:
    """Candidates ranked: CPUs that hold the data in RAM with the wanted vCPUs and family, cheapest first."""
    size = rule_sizing(kind, data_gb, rows)
    buy = serving_buy(purchase)
    out: list[tuple[tuple[int, int, int, float], Candidate]] = []
    for inst in instances:
        price = inst.price_usd_per_hour(buy) or inst.on_demand_usd_per_hour
        fam = cpu_family_class(inst)
        c = Candidate(
            instance=inst.instance_type,
            provider=inst.provider,
            region=inst.region,
            device_class="gpu" if inst.accelerator else "cpu",
            device=inst.accelerator or "cpu",
            count=1,
            precision="fp64" if kind == "classic_ml" else "-",
            purchase=buy,
            cost_usd_per_hour=price,
            feasible=True,
            provenance="rule",
            price_date=inst.price_date,
            price_source=inst.source,
            memory_bytes=int(size.ram_bytes),
            memory_capacity_bytes=int(inst.ram_gib * 2**30),
            vcpus=inst.vcpus,
            gpus=inst.accelerator_count if inst.accelerator else 0,
            kind_hint="rules",
        )
        if inst.accelerator:
            c.feasible = False
            c.reasons.append(
                f"GPU rarely helps: {kind} is branchy tree building or joins and UDFs, bound by data movement; "
                "measure it as kind: deep_learning to override"
            )
        if inst.ram_gib * 2**30 * USABLE_RAM_FRACTION < size.ram_bytes:
            c.feasible = False
            c.reasons.append(
                f"does not fit memory: {inst.ram_gib:g} GiB RAM ({USABLE_RAM_FRACTION:.0%} usable) < "
                f"{size.ram_bytes / 2**30:.1f} GiB needed"
            )
        if inst.vcpus < size.vcpus:
            c.notes.append(f"{inst.vcpus} vCPUs < {size.vcpus} wanted: slower")
        c.notes.append(f"{FAMILY_WORDS[fam]} ({inst.ram_gib / max(1, inst.vcpus):.1f} GiB/vCPU)")
        out.append((_score(c, inst, size), c))
    out.sort(key=lambda sc: sc[0])
    best = next(((sc, c) for sc, c in out if c.feasible), None)
    if best is not None and (best[0][1] or best[0][2]):  # short of the wanted vCPUs or family: it says so
        c = best[1]
        inst = next(i for i in instances if i.instance_type == c.instance and i.provider == c.provider)
        c.notes.append(
            f"{FALLBACK}no CPU instance holds the data with {size.vcpus} vCPUs of the {FAMILY_WORDS[size.family]} "
            f"family; fell back to {FAMILY_WORDS[cpu_family_class(inst)]} "
            f"({inst.ram_gib / max(1, inst.vcpus):.1f} GiB/vCPU) with {inst.vcpus} vCPUs"
        )
    return [c for _, c in out], size


def rules_choice(rec: Candidate, n_feasible: int) -> str:
    """Why the rules plan chose ``rec``: the wanted vCPUs and family, or what it fell back to (a general-purpose
    c3-standard-88 had read "with the wanted vCPUs and family" under "memory-optimised family wanted")."""
    fallback = next((n.removeprefix(FALLBACK) for n in rec.notes if n.startswith(FALLBACK)), None)
    if fallback is None:
        return f"first of {n_feasible} CPU instances that hold the data, with the wanted vCPUs and family, by price"
    return f"first of {n_feasible} CPU instances that hold the data, by price: {fallback}"


def _score(c: Candidate, inst: Instance, size: RuleSizing) -> tuple[int, int, int, float]:
    """Ranking: feasible, enough vCPUs, the wanted family, then price."""
    return (
        0 if c.feasible else 1,
        0 if inst.vcpus >= size.vcpus else 1,
        0 if cpu_family_class(inst) == size.family else 1,
        c.cost_usd_per_hour,
    )
