"""Pure queries over catalog tables (they take the table, so tests build a few rows inline)."""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Protocol

from rightsize.catalog.load import load_spot_buckets
from rightsize.catalog.model import Accelerator, Catalog, CpuFamily, Instance
from rightsize.errors import NotFoundError, SpecError, did_you_mean

__all__ = [
    "CPU_SIGNATURES",
    "HOURS_PER_MONTH",
    "as_run_here",
    "check_filters",
    "cpu_family_match",
    "filter_instances",
    "get_instance",
    "gpu_memory_tiers",
    "interruptions_per_hour",
    "match_accelerator",
    "match_cpu_family",
    "signature_family",
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
    parts = _name_parts(name)  # the names targets.instances takes (filter_instances), read one way
    itype = parts[-1]
    found = [i for i in instances if _named(i, parts)]
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
    """The CPU family that best describes a fingerprinted machine (``env``: cpu_model, isa, and ``cpu_signature``
    where the fingerprint has one): ``cpu_family_match``'s family."""
    return cpu_family_match(cpus, env)[0]


def cpu_family_match(cpus: dict[str, CpuFamily], env: Machine) -> tuple[CpuFamily | None, str]:
    """(family, how it matched: "name", "sku", "signature", "isa"; None and "" when nothing does).

    Same vendor (from the model string); a family whose name or listed SKUs ("8375C", "7R13") appear in the model
    string; else the family of the CPU's family/model numbers (``CPU_SIGNATURES``: a VM's model name may say only
    "AMD EPYC"); else the family whose whole ISA list the machine has, with the most entries (ties keep file order).
    A family matched by name, SKU or signature whose ISA the machine does not fully show (a hypervisor hiding
    AVX-512 or AMX) comes back as this machine runs it: ``as_run_here``.
    """
    model = (env.cpu_model or "").lower()
    flags = _flags(env.isa)
    vendor = "amd" if "amd" in model else "intel" if "intel" in model else None
    skus = {t for t in _tokens(model) if len(t) >= 4 and any(ch.isdigit() for ch in t) and not t.endswith("ghz")}
    same_vendor = [fam for fam in cpus.values() if vendor is None or fam.vendor == vendor]
    for fam in same_vendor:
        if fam.name.lower() in model:
            return as_run_here(fam, cpus, env.isa), "name"
        if skus & set(_tokens(fam.source)):  # the family's source lists its SKUs
            return as_run_here(fam, cpus, env.isa), "sku"
    by_signature = signature_family(getattr(env, "cpu_signature", "") or "", flags)  # other Machines lack it
    if by_signature is not None and by_signature in {fam.name for fam in same_vendor}:
        return as_run_here(cpus[by_signature], cpus, env.isa), "signature"
    best: CpuFamily | None = None
    for fam in same_vendor:
        if set(fam.isa) <= flags and (best is None or len(fam.isa) > len(best.isa)):
            best = fam
    return best, "isa" if best is not None else ""


# CPUID family/model numbers (decimal, as /proc/cpuinfo prints "cpu family" and "model") of the server generations
# the catalog has: (family, models, catalog family). Sources (read 2026-11): https://en.wikichip.org/wiki/amd/cpuid,
# https://en.wikichip.org/wiki/intel/cpuid and the Linux kernel's arch/x86/include/asm/intel-family.h
# (INTEL_BROADWELL_X 0x4F, INTEL_SKYLAKE_X 0x55, INTEL_ICELAKE_X 0x6A, INTEL_SAPPHIRERAPIDS_X 0x8F,
# INTEL_EMERALDRAPIDS_X 0xCF).
CPU_SIGNATURES: tuple[tuple[int, range, str], ...] = (
    (0x17, range(0x31, 0x32), "amd-rome"),  # Zen 2
    (0x19, range(0x01, 0x02), "amd-milan"),  # Zen 3
    (0x19, range(0x10, 0x20), "amd-genoa"),  # Zen 4
    (0x19, range(0xA0, 0xB0), "amd-genoa"),  # Zen 4c Bergamo: Genoa's core, denser
    (0x1A, range(0x00, 0x20), "amd-turin"),  # Zen 5
    (6, range(0x4F, 0x50), "intel-broadwell"),  # Broadwell-EP
    (6, range(0x55, 0x56), "intel-skylake"),  # Skylake-SP; Cascade Lake (the same model) shows avx512_vnni
    (6, range(0x6A, 0x6B), "intel-icelake"),  # Ice Lake-SP
    (6, range(0x8F, 0x90), "intel-sapphire-rapids"),
    (6, range(0xCF, 0xD0), "intel-sapphire-rapids"),  # Emerald Rapids: Sapphire Rapids' cores
)


def signature_family(signature: str, flags: Iterable[str] = ()) -> str | None:
    """The catalog family name of a "family/model" CPU signature ("25/17" -> "amd-genoa"); None when unknown."""
    try:
        family, model = (int(x) for x in signature.split("/"))
    except ValueError:
        return None
    for fam, models, name in CPU_SIGNATURES:
        if fam == family and model in models:
            return "intel-cascade-lake" if name == "intel-skylake" and "avx512_vnni" in set(flags) else name
    return None


# Flags that name a generation but run no kernel of their own (avx512_vp2intersect: Zen 5), so a VM hiding one
# hides no speed.
_MARKER_FLAGS = frozenset({"avx512_vp2intersect"})


def as_run_here(fam: CpuFamily, cpus: Mapping[str, CpuFamily], isa: Iterable[str]) -> CpuFamily:
    """``fam`` as a machine with flags ``isa`` runs it: where a hypervisor hides part of the family's ISA (a Zen 4
    VM showing avx2 and fma only), a copy with the ISA the machine shows and each FLOP/cycle figure no higher than the
    best same-vendor family whose whole ISA it has (the most entries, file order: AVX2 Genoa -> amd-rome's int8 and
    bf16 rates). Name, clock, bandwidth and cores stay ``fam``'s, so its instances still count as measured here while
    its kernels take the paths this machine has (int8 on AVX2 is not VNNI). ``fam`` itself with no flags recorded."""
    flags = _flags(isa)
    if not flags or all(f in flags or f in _MARKER_FLAGS for f in fam.isa):
        return fam
    shown = tuple(f for f in fam.isa if f in flags)
    donors = [c for c in cpus.values() if c.vendor == fam.vendor and set(c.isa) <= flags]
    if not donors:
        return replace(fam, isa=shown)
    donor = max(donors, key=lambda c: len(c.isa))  # max keeps the first of the longest
    rates = {k: min(v, donor.flop_per_cycle_per_core.get(k, v)) for k, v in fam.flop_per_cycle_per_core.items()}
    return replace(fam, isa=shown, flop_per_cycle_per_core=rates)


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
