"""GPU memory tiers and the fit rule: the smallest tier whose memory, less headroom, holds the total.

Tiers come from the catalog the caller loaded (``rightsize.catalog.gpu_memory_tiers``) or, with none passed,
from ``FALLBACK_GPU_TIERS``, the one place this package names GPU memory sizes. Nothing here reads a file.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rightsize.catalog.model import Catalog

__all__ = [
    "FALLBACK_GPU_TIERS",
    "TIER_HEADROOM_FRACTION",
    "Advice",
    "GpuTier",
    "default_tiers",
    "parse_tiers",
    "pick_tier",
    "tier_fits",
]

from rightsize.memory_budget import GIB, GPU_HEADROOM_FRACTION, gpu_fits

# The one budget the planner uses too (rightsize.memory_budget): 10% of a card stays free.
TIER_HEADROOM_FRACTION = GPU_HEADROOM_FRACTION


@dataclass(frozen=True)
class GpuTier:
    memory_gib: float
    names: tuple[str, ...]

    @property
    def label(self) -> str:
        """ "A10/A10G/L4 (22.49 GiB)"; a tier given by size alone (``--tiers 8,16``) is "16 GiB GPU" (it had read
        "16 GiB GPU (16 GiB)")."""
        return f"{'/'.join(self.names)} ({self.memory_gib:g} GiB)" if self.names else f"{self.memory_gib:g} GiB GPU"


# Used only when the catalog cannot be loaded. Sizes: NVIDIA datasheets (docs/sources.md `gpu-datasheets`); P4 8 GB
# (GCP nvidia-tesla-p4), L40S 48 GB.
FALLBACK_GPU_TIERS: tuple[GpuTier, ...] = (
    GpuTier(8, ("P4",)),
    GpuTier(16, ("T4", "V100-16GB")),
    GpuTier(24, ("A10G", "L4")),
    GpuTier(40, ("A100-40GB",)),
    GpuTier(48, ("L40S",)),
    GpuTier(80, ("A100-80GB", "H100")),
    GpuTier(141, ("H200",)),
)


@dataclass(frozen=True)
class Advice:
    """One change that would make the workload fit, with the total it leads to."""

    action: str  # batch | amp | checkpointing | int8 | int4 | optimizer_8bit | shard
    detail: str
    total_bytes: int
    total_gib: float
    tier: str | None  # the tier it fits (per GPU when sharded), None when it still does not fit
    fits: bool
    gpus: int = 1


def tier_fits(total_bytes: int, memory_gib: float, headroom: float = TIER_HEADROOM_FRACTION) -> bool:
    return gpu_fits(total_bytes, memory_gib * GIB, headroom)


def pick_tier(total_bytes: int, tiers: list[GpuTier], headroom: float = TIER_HEADROOM_FRACTION) -> GpuTier | None:
    """The smallest tier that fits ``total_bytes`` with headroom; None when none does."""
    for tier in sorted(tiers, key=lambda t: t.memory_gib):
        if tier_fits(total_bytes, tier.memory_gib, headroom):
            return tier
    return None


def catalog_tiers(catalog: Catalog, precision: str | None = None) -> list[GpuTier] | None:
    """GPU tiers of ``catalog`` (those that run ``precision``: ``gpu_memory_tiers``); None when it names none."""
    from rightsize.catalog import gpu_memory_tiers

    return [GpuTier(float(mem), tuple(names)) for mem, names in gpu_memory_tiers(catalog, precision)] or None


def parse_tiers(text: str) -> list[GpuTier]:
    """``builtin`` (FALLBACK_GPU_TIERS) or GiB sizes such as ``8,16,24`` (a generic tier each)."""
    from rightsize.errors import SpecError
    from rightsize.inputfile import short

    if text.strip() == "builtin":
        return list(FALLBACK_GPU_TIERS)
    parts = text.split(",")
    try:
        sizes = [float(part) for part in parts]  # an empty part ("8,,16") is a typo, not a tier to skip
    except ValueError:
        sizes = []
    # 16 TiB: beyond any accelerator's memory (a 1e30 GiB "tier" fits everything and plans nothing)
    if not sizes or any(not math.isfinite(size) or not 0 < size <= 16384 for size in sizes):
        raise SpecError("--tiers", f"expected 'builtin' or GiB sizes above 0 and at most 16384, such as '8,16,24', "
                        f"got {short(text)}")  # fmt: skip
    return [GpuTier(size, ()) for size in sorted(set(sizes))]


def default_tiers(
    device: str, catalog: Catalog | None = None, precision: str | None = None
) -> tuple[list[GpuTier], str]:
    """(tiers, where they came from): ``catalog``'s GPU tiers that run ``precision`` for CUDA (the built-in list
    without a catalog), this machine's RAM for CPU."""
    if device == "cpu":
        import psutil

        ram_gib = psutil.virtual_memory().total / GIB
        return [GpuTier(round(ram_gib, 1), ("this machine's RAM",))], "this machine's RAM (psutil)"
    tiers = catalog_tiers(catalog, precision) if catalog is not None else None
    if tiers is None:
        return list(FALLBACK_GPU_TIERS), "the built-in tier list (no catalog passed)"
    return tiers, "the catalog's accelerators" + (" that run bf16" if precision == "bf16" else "")
