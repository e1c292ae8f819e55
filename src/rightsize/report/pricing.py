"""Price measured points for the dashboard's latency-vs-cost view: which catalog instance a machine is.

A GPU machine is priced as the single-GPU catalog instances with the same accelerator; a CPU
machine as the smallest catalog instance of its CPU family with at least as many vCPUs (an upper
bound: that instance has at least the measured compute). USD per 1M samples = price_usd_per_hour /
(throughput_per_s × 3600) × 1e6.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["PricedInstance", "load_catalog_or_none", "price_env", "usd_per_1m_samples"]


@dataclass(frozen=True)
class PricedInstance:
    instance_type: str
    provider: str
    region: str
    device_class: str  # cpu | gpu
    usd_per_hour: float
    price_date: str
    how: str  # how the machine was matched to this instance


def load_catalog_or_none() -> Any:
    """The catalog (shipped + $RIGHTSIZE_CATALOG), or None when it cannot be loaded."""
    try:
        from rightsize.catalog import load_catalog

        return load_catalog()
    except Exception:  # the dashboard degrades to planned points only
        return None


def _tokens(text: str) -> list[str]:
    """'NVIDIA A100-SXM4-80GB' -> ['nvidia', 'a100', 'sxm4', '80gb'] (whole tokens: 'A10' never matches 'A100')."""
    return re.findall(r"[a-z0-9]+", text.lower())


def match_accelerator(gpu: Mapping[str, Any], accelerators: Mapping[str, Any]) -> str | None:
    """The catalog accelerator named in a fingerprint's GPU name ("NVIDIA A10G" -> "A10G").

    Every token of the catalog name present wins, the most tokens first ("H100-PCIe" over "H100");
    else the base name ("A100" of "A100-80GB") with the memory closest to the GPU's."""
    have = set(_tokens(str(gpu.get("name", ""))))
    if not have:
        return None
    full = [a for a in accelerators if set(_tokens(a)) <= have]
    if full:
        return max(full, key=lambda a: len(_tokens(a)))
    base = [a for a in accelerators if _tokens(a)[:1] and _tokens(a)[0] in have]
    if not base:
        return None
    gib = float(gpu.get("memory_bytes") or 0) / 1024**3
    return min(base, key=lambda a: abs(float(getattr(accelerators[a], "memory_gib", 0.0)) - gib))


def price_env(env: Mapping[str, Any], device: str, catalog: Any) -> list[PricedInstance]:
    """Catalog instances that stand for the machine ``env`` running on ``device`` (cpu | cuda)."""
    if catalog is None:
        return []
    instances: Sequence[Any] = catalog.instances
    if device == "cuda":
        gpus = env.get("gpus") or []
        acc = match_accelerator(gpus[0], catalog.accelerators) if gpus else None
        if acc is None:
            return []
        rows = [i for i in instances if i.accelerator == acc and i.accelerator_count == 1]
        return [
            PricedInstance(
                i.instance_type,
                i.provider,
                i.region,
                "gpu",
                i.on_demand_usd_per_hour,
                i.price_date,
                f"same GPU ({acc})",
            )
            for i in sorted(rows, key=lambda i: i.on_demand_usd_per_hour)
        ]
    from rightsize.catalog import match_cpu_family

    fam = match_cpu_family(catalog.cpus, dict(env))
    if fam is None:
        return []
    vcpus = int(env.get("logical_cores") or 1)
    rows = [i for i in instances if i.cpu_family == fam.name and not i.accelerator and i.vcpus >= vcpus]
    out: list[PricedInstance] = []
    for provider in sorted({i.provider for i in rows}):
        best = min((i for i in rows if i.provider == provider), key=lambda i: (i.vcpus, i.on_demand_usd_per_hour))
        out.append(
            PricedInstance(
                best.instance_type,
                best.provider,
                best.region,
                "cpu",
                best.on_demand_usd_per_hour,
                best.price_date,
                f"{fam.name}, smallest with ≥ {vcpus} vCPUs",
            )
        )
    return out


def usd_per_1m_samples(usd_per_hour: float, throughput_per_s: float | None) -> float | None:
    if not throughput_per_s or throughput_per_s <= 0:
        return None
    return usd_per_hour / (throughput_per_s * 3600.0) * 1e6
