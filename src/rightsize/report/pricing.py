"""Price measured points for the dashboard's latency-vs-cost view: which catalog instance a machine is.

A GPU machine is priced as the single-GPU catalog instances with the same accelerator; a CPU
machine as the smallest catalog instance of its CPU family with at least as many vCPUs (an upper
bound: that instance has at least the measured compute). USD per 1M samples = price_usd_per_hour /
(throughput_per_s × 3600) × 1e6.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rightsize.profile import Environment, Gpu

__all__ = ["PricedInstance", "price_env", "usd_per_1m_samples"]


@dataclass(frozen=True)
class PricedInstance:
    instance_type: str
    provider: str
    region: str
    device_class: str  # cpu | gpu
    usd_per_hour: float
    price_date: str
    how: str  # how the machine was matched to this instance


def match_accelerator(gpu: Gpu, accelerators: Mapping[str, Any]) -> str | None:
    """The catalog accelerator name for a fingerprint's GPU (``catalog.match_accelerator``'s rule)."""
    from rightsize.catalog.query import match_accelerator as match

    acc = match(gpu.name, accelerators, gpu.memory_bytes or None)
    return acc.name if acc is not None else None


def price_env(env: Environment, device: str, catalog: Any) -> list[PricedInstance]:
    """Catalog instances that stand for the machine ``env`` running on ``device`` (cpu | cuda)."""
    if catalog is None:
        return []
    instances: Sequence[Any] = catalog.instances
    if device == "cuda":
        acc = match_accelerator(env.gpus[0], catalog.accelerators) if env.gpus else None
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

    fam = match_cpu_family(catalog.cpus, env)
    if fam is None:
        return []
    vcpus = env.logical_cores
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
