"""Pure queries over catalog tables (they take the table, so tests build a few rows inline)."""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from rightsize.catalog.load import load_spot_buckets
from rightsize.catalog.model import Accelerator, Catalog, CpuFamily, Instance
from rightsize.errors import NotFoundError, SpecError, did_you_mean

__all__ = [
    "HOURS_PER_MONTH",
    "check_filters",
    "filter_instances",
    "get_instance",
    "gpu_memory_tiers",
    "interruptions_per_hour",
    "match_accelerator",
    "match_cpu_family",
    "where_instances_are",
]

HOURS_PER_MONTH = 730.0  # 365 × 24 / 12


def _norm(values: Iterable[str] | str | None) -> set[str] | None:
    if values is None:
        return None
    if isinstance(values, str):
        values = [values]
    return {v.lower() for v in values}


def filter_instances(
    instances: Iterable[Instance],
    *,
    providers: Iterable[str] | str | None = None,
    regions: Iterable[str] | str | None = None,
    device_class: str | None = None,
    names: Iterable[str] | str | None = None,
) -> list[Instance]:
    """Instances matching every given filter (case-insensitive); None means no filter. A name is an instance type
    ("g5.xlarge": every provider's and region's row of it), or, as the plan tables print it, "aws:g5.xlarge" (that
    provider's rows only) or "aws:us-east-1:g5.xlarge" (one row)."""
    prov, reg = _norm(providers), _norm(regions)
    wanted = None if names is None else [_name_parts(n) for n in ([names] if isinstance(names, str) else names)]
    if device_class is not None and device_class not in ("cpu", "gpu"):
        raise SpecError("device_class", f"must be 'cpu' or 'gpu', got {device_class!r}")
    return [
        i
        for i in instances
        if (prov is None or i.provider.lower() in prov)
        and (reg is None or i.region.lower() in reg)
        and (device_class is None or i.device_class == device_class)
        and (wanted is None or any(_named(i, parts) for parts in wanted))
    ]


def _name_parts(name: str) -> tuple[str, ...]:
    """The parts of a name, lower case: "aws:us-east-1:g5.xlarge" -> ("aws", "us-east-1", "g5.xlarge")."""
    return tuple(part.strip().lower() for part in name.split(":"))


def _named(inst: Instance, parts: tuple[str, ...]) -> bool:
    """Whether ``inst`` is the instance named by ``parts`` (``_name_parts``: [provider:[region:]]type)."""
    if not 1 <= len(parts) <= 3 or inst.instance_type.lower() != parts[-1]:
        return False
    return (len(parts) < 2 or inst.provider.lower() == parts[0]) and (len(parts) < 3 or inst.region.lower() == parts[1])


def where_instances_are(
    instances: Iterable[Instance],
    providers: Iterable[str] | None = None,
    names: Iterable[str] | None = None,
) -> str:
    """What each provider kept by ``providers`` and ``names`` has, and where: "gcp: cpu and gpu in us-central1,
    us-east4; aws: ...", for an error about filters that are each known but together match nothing. When those two
    keep nothing (names of another provider's instances), where the named instances are; "" for an empty catalog.
    `rightsize catalog` and `plan` say it alike."""
    rows = list(instances)
    kept = (
        filter_instances(rows, providers=providers or None, names=names or None)
        or filter_instances(rows, names=names or None)
        or filter_instances(rows, providers=providers or None)
    )
    have = []
    for p in sorted({i.provider for i in kept}):
        mine = [i for i in kept if i.provider == p]
        classes = " and ".join(sorted({i.device_class for i in mine}))
        have.append(f"{p}: {classes} in {', '.join(sorted({i.region for i in mine}))}")
    return "; ".join(have)


def check_filters(
    instances: Sequence[Instance],
    *,
    providers: Iterable[str] | None = None,
    regions: Iterable[str] | None = None,
    names: Iterable[str] | None = None,
    where: str = "targets",
) -> None:
    """Refuse an entry of a provider / region / instance filter that names nothing in the catalog: a typo among
    good entries (``instances: [c7a.xlarge, g5.xlarg]``) had quietly planned without it."""
    known = {"providers": {i.provider for i in instances}, "regions": {i.region for i in instances},
             "instances": {i.instance_type for i in instances}}  # fmt: skip
    for field, given in (("providers", providers), ("regions", regions)):
        have = {k.lower() for k in known[field]}
        for k, value in enumerate(given or ()):
            if value.lower() not in have:
                hint = did_you_mean(value, sorted(known[field]))
                raise SpecError(f"{where}.{field}[{k}]", f"{value!r} is not in the catalog.{hint} `rightsize catalog` "
                                "lists them")  # fmt: skip
    for k, value in enumerate(names or ()):
        _check_name(instances, value, known["instances"], f"{where}.instances[{k}]")


def _check_name(instances: Sequence[Instance], value: str, types: set[str], field: str) -> None:
    """Refuse an instance name that names no catalog row; a `provider:name` (as the plan tables print it) that
    has its provider wrong says which providers list the name."""
    parts = _name_parts(value)
    if any(_named(i, parts) for i in instances):
        return
    if not 1 <= len(parts) <= 3 or not all(parts):
        raise SpecError(field, f"{value!r} is not an instance name; write TYPE (g5.xlarge), PROVIDER:TYPE "
                        "(aws:g5.xlarge) or PROVIDER:REGION:TYPE")  # fmt: skip
    rows = [i for i in instances if i.instance_type.lower() == parts[-1]]
    if not rows:
        prefix = value[: len(value) - len(value.split(":")[-1])]  # "aws:" of "aws:g5.xlarg", kept in the suggestion
        hint = did_you_mean(value.split(":")[-1], sorted(types)).replace(" '", f" '{prefix}", 1)
        raise SpecError(field, f"{value!r} is not in the catalog.{hint} `rightsize catalog` lists them")
    listed = sorted({f"{i.provider}:{i.region}:{i.instance_type}" if len(parts) == 3 else
                     f"{i.provider}:{i.instance_type}" for i in rows})  # fmt: skip
    raise SpecError(field, f"{value!r} is not in the catalog; the catalog lists it as {', '.join(listed[:6])}"
                    f"{', ...' if len(listed) > 6 else ''}")  # fmt: skip


def get_instance(instances: Sequence[Instance], name: str) -> Instance:
    """The instance called ``name`` ("g5.xlarge", or "aws:g5.xlarge" / "aws:us-east-1:g5.xlarge")."""
    parts = name.split(":")
    itype = parts[-1]
    found = [
        i
        for i in instances
        if i.instance_type.lower() == itype.lower()
        and (len(parts) < 2 or i.provider.lower() == parts[0].lower())
        and (len(parts) < 3 or i.region.lower() == parts[1].lower())
    ]
    if not found:
        raise NotFoundError(
            f"instance {name!r} is not in the catalog.{did_you_mean(itype, [i.instance_type for i in instances])} "
            "See `rightsize catalog`, or add it with --catalog FILE."
        )
    return found[0]


@functools.lru_cache(maxsize=1)
def _buckets() -> dict[str, float]:
    return load_spot_buckets()


def interruptions_per_hour(bucket: str | None) -> float | None:
    """Mean spot interruption rate per hour for an AWS Spot Advisor monthly bucket; None if unknown.

    The bucket is the share of instances interrupted over a month; with its midpoint p
    (catalog/data/spot_buckets.csv) and interruptions as a Poisson process,
    p = 1 − exp(−λ · 730 h), so λ = −ln(1 − p) / 730 per hour. Mean time between interruptions = 1/λ.
    """
    if bucket is None or bucket == "":
        return None
    table = _buckets()
    if bucket not in table:
        raise SpecError("spot_interruption", f"unknown bucket {bucket!r}; use one of {', '.join(table)}")
    p = table[bucket]
    return -math.log1p(-p) / HOURS_PER_MONTH


def gpu_memory_tiers(catalog: Catalog, precision: str | None = None) -> list[tuple[float, list[str]]]:
    """[(memory GiB, [accelerator names])] sorted by memory, ascending: the memory a process can allocate
    (``usable_memory_gib``: exposed, where the catalog records it), as the planners count it (`memory` had said a
    7B fp16 model fits a T4's nominal 16 GiB, which `plan` refused on its exposed 14.56). ``precision`` "bf16"
    leaves out the GPUs without it (T4, V100: a bf16 model "fit" a T4 that cannot run it)."""
    tiers: dict[float, list[str]] = {}
    for acc in catalog.accelerators.values():
        if precision == "bf16" and acc.tflops.get("bf16", 0.0) <= 0:
            continue
        tiers.setdefault(acc.usable_memory_gib, []).append(acc.name)
    return [(mem, sorted(names)) for mem, names in sorted(tiers.items())]


# Short names a fingerprint may use for /proc/cpuinfo flags.
_ALIASES = {
    "avx512": ("avx512f",),
    "amx": ("amx_bf16", "amx_int8"),
    "vnni": ("avx512_vnni",),
    "avx512vnni": ("avx512_vnni",),
    "avx512bf16": ("avx512_bf16",),
    "avx512fp16": ("avx512_fp16",),
    "avx2": ("avx2", "fma"),  # every AVX2 server CPU has FMA3
}


def _flags(isa: Iterable[Any]) -> set[str]:
    out: set[str] = set()
    for f in isa:
        name = str(f).lower()
        out.add(name)
        out.update(_ALIASES.get(name, ()))
    return out


class Machine(Protocol):
    """What the CPU match reads of a fingerprint (``rightsize.profile.Environment``)."""

    @property
    def cpu_model(self) -> str: ...

    @property
    def isa(self) -> tuple[str, ...]: ...


def match_cpu_family(cpus: dict[str, CpuFamily], env: Machine) -> CpuFamily | None:
    """The CPU family that best describes a fingerprinted machine (``env``: cpu_model, isa).

    Same vendor (from the model string); a family whose name or listed SKUs ("8375C", "7R13") appear
    in the model string; else the family whose whole ISA list the machine has, with the most entries;
    ties keep file order. None when nothing matches.
    """
    model = (env.cpu_model or "").lower()
    flags = _flags(env.isa)
    vendor = "amd" if "amd" in model else "intel" if "intel" in model else None
    skus = {t for t in _tokens(model) if len(t) >= 4 and any(ch.isdigit() for ch in t) and not t.endswith("ghz")}
    best: CpuFamily | None = None
    for fam in cpus.values():
        if vendor is not None and fam.vendor != vendor:
            continue
        if fam.name.lower() in model or skus & set(_tokens(fam.source)):  # the family's source lists its SKUs
            return fam
        if set(fam.isa) <= flags and (best is None or len(fam.isa) > len(best.isa)):
            best = fam
    return best


def _tokens(text: str) -> list[str]:
    """'NVIDIA A100-SXM4-80GB' -> ['nvidia', 'a100', 'sxm4', '80gb'] (whole tokens: 'A10' never matches 'A100')."""
    return re.findall(r"[a-z0-9]+", text.lower())


def match_accelerator(
    gpu_name: str | None, accelerators: Mapping[str, Accelerator], memory_bytes: float | None = None
) -> Accelerator | None:
    """The catalog accelerator a CUDA device name stands for ("NVIDIA A100-SXM4-80GB" -> A100-80GB).

    Every token of the catalog name present as a whole word wins, the most tokens first ("NVIDIA H100
    PCIe" -> H100-PCIe, not H100); else the catalog names sharing the first token ("A100" of
    "A100-80GB") with the memory closest to ``memory_bytes``. None when nothing matches. The plan,
    the report's pricing and the pipeline's projection all use this one rule.
    """
    have = set(_tokens(gpu_name or ""))
    if not have:
        return None
    full = [a for a in accelerators.values() if set(_tokens(a.name)) <= have]
    if full:
        return max(full, key=lambda a: len(_tokens(a.name)))
    base = [a for a in accelerators.values() if _tokens(a.name)[:1] and _tokens(a.name)[0] in have]
    if not base:
        return None
    gib = float(memory_bytes or 0) / 1024**3
    return min(base, key=lambda a: abs(a.memory_gib - gib))
