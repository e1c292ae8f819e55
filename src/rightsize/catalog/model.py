"""The catalog's values: accelerators, CPU families, instances with prices (rows of catalog/data/*.csv).

Numbers live in the CSV files, each row with a source and a date; these classes only give them types.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rightsize.errors import SpecError

__all__ = ["PRECISIONS", "Accelerator", "Catalog", "CpuFamily", "Instance"]

# Precisions the catalog gives a dense peak for (accelerators) or FLOP/cycle for (CPUs).
PRECISIONS = ("fp32", "tf32", "fp16", "bf16", "int8")

_ON_DEMAND = ("on-demand", "on_demand", "ondemand", "dedicated")


@dataclass(frozen=True)
class Accelerator:
    """One GPU model. ``tflops`` is the dense peak per precision (fp32, tf32, fp16, bf16, int8 in TOPS);
    0.0 means the precision has no native support (e.g. bf16 on T4/V100)."""

    name: str
    memory_gib: float
    bandwidth_gbps: float  # HBM/GDDR bandwidth, GB/s (10^9 bytes per second)
    tflops: dict[str, float]
    tdp_w: float
    source: str
    date: str
    # Ampere GA10x / Ada: the datasheet FP32 rate counts a second FP32 lane that is shared with INT32,
    # so dense FP32 math (SGEMM, convolutions) issues at about half of it.
    fp32_dual_issue: bool = False
    # GiB the driver exposes to a process (torch.cuda.mem_get_info's total; nvidia-smi's MiB): a "24 GB" A10G exposes
    # 22.49 (ECC on GDDR6 reserves ~6%), an "80 GB" H100 79.18. None where no source records it (docs/sources.md
    # `gpu-exposed-memory`): then the nominal ``memory_gib``.
    exposed_gib: float | None = None

    @property
    def usable_memory_gib(self) -> float:
        """What a process can allocate on it: ``exposed_gib`` where recorded, else the nominal size."""
        return self.exposed_gib or self.memory_gib

    def peak_flops_per_s(self, precision: str) -> float:
        """Dense peak in FLOP/s (int8: op/s) for ``precision``; 0.0 when unsupported."""
        return self.tflops.get(precision, 0.0) * 1e12


@dataclass(frozen=True)
class CpuFamily:
    """A server CPU generation. FLOP/cycle/core is per physical core for the best ISA path per dtype."""

    name: str
    vendor: str  # intel | amd
    isa: tuple[str, ...]  # /proc/cpuinfo flag names, e.g. ("avx2", "avx512f", "avx512_bf16", "amx_bf16")
    flop_per_cycle_per_core: dict[str, float]  # fp32, bf16, int8
    sustained_ghz: float  # all-core clock under vector load
    memory_bandwidth_gbps: float  # per socket, GB/s
    source: str
    date: str
    cores_per_socket: int = 0  # physical cores of a full socket (to share bandwidth); 0 = unknown

    def peak_flops_per_s(self, precision: str, cores: float) -> float:
        """``cores`` × FLOP/cycle × clock; fp16 and tf32 fall back to the bf16 / fp32 rows."""
        key = {"tf32": "fp32", "fp16": "bf16"}.get(precision, precision)
        return cores * self.flop_per_cycle_per_core.get(key, 0.0) * self.sustained_ghz * 1e9


UNVERIFIED_MARKS = ("as remembered", "unverified", "re-check", "estimate")


def is_unverified(price_source: str, purchase: str | None = None) -> bool:
    """Catalog rows whose source says the price was not read off a price list (see docs/catalog.md).

    With ``purchase`` given, a mark on the spot price only ("spot re-check") does not count against an on-demand
    plan: a snapshot row's on-demand price was read off the list."""
    text = price_source.lower()
    if purchase is not None and "spot" not in purchase and purchase != "mixed":
        text = text.replace("spot re-check", "")
    return any(mark in text for mark in UNVERIFIED_MARKS)


def unverified_note(instance: str, source: str, verified: str | None = None, ratio: float = 1.0) -> str:
    """The warning on a recommendation priced off a row ``is_unverified`` marks: ``verified`` describes the cheapest
    plan on a verified row (None: there is none), ``ratio`` its cost over the recommendation's. One wording for
    classic, generative and fine-tune plans."""
    line = f"the recommended {instance}'s price is unverified ({source}): re-check it"
    return line + (f"; the cheapest verified plan is {verified} ({ratio:.2f}x the cost)" if verified else "")


@dataclass(frozen=True)
class Instance:
    """A cloud instance type in one region with its prices (USD per hour, whole instance)."""

    provider: str  # aws | gcp | azure | user-defined
    region: str
    instance_type: str
    vcpus: int
    ram_gib: float
    cpu_family: str  # key into Catalog.cpus
    accelerator: str | None  # key into Catalog.accelerators; None for CPU-only instances
    accelerator_count: int
    on_demand_usd_per_hour: float
    spot_usd_per_hour: float | None  # None: no spot offer known
    spot_interruption: str | None  # AWS Spot Advisor monthly bucket: "<5%", "5-10%", "10-15%", "15-20%", ">20%"
    price_date: str  # YYYY-MM or YYYY-MM-DD
    source: str
    physical_cores: int | None = None  # None: vCPUs are SMT threads, cores = vcpus / 2

    @property
    def device_class(self) -> str:
        return "gpu" if self.accelerator else "cpu"

    @property
    def cores(self) -> int:
        """Physical cores (the unit that scales CPU throughput)."""
        return self.physical_cores if self.physical_cores else max(1, self.vcpus // 2)

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.provider, self.region, self.instance_type)

    def price_usd_per_hour(self, purchase: str) -> float | None:
        """Price for ``purchase`` ("on-demand" or "spot"); None when there is no spot offer.

        A spot price at or above on-demand means no spot capacity (docs/sources.md `skypilot-catalog`)."""
        p = purchase.lower()
        if p in _ON_DEMAND:
            return self.on_demand_usd_per_hour
        if p == "spot":
            s = self.spot_usd_per_hour
            return s if s is not None and s < self.on_demand_usd_per_hour else None
        raise SpecError("purchase", f"unknown purchase option {purchase!r}; use 'on-demand' or 'spot'")


@dataclass(frozen=True)
class PowerTable:
    """Watts for energy estimates (catalog/data/power.csv, grid.csv; see rightsize.plan.energy)."""

    cpu: dict[str, tuple[float, float]]  # family -> (min, max) watts per vCPU
    gpu: dict[str, tuple[float, float]]  # accelerator -> (min, max) watts per device
    memory_w_per_gib: float
    grid: dict[tuple[str, str], tuple[float, float]]  # (provider, region or "*") -> (PUE, kg CO2e per kWh)

    def site(self, provider: str, region: str) -> tuple[float, float, str]:
        """(PUE, grid factor, what was used) for a region, falling back to the provider's average."""
        if (provider, region) in self.grid:
            pue, kg = self.grid[(provider, region)]
            return pue, kg, f"{region} grid"
        if (provider, "*") in self.grid:
            pue, kg = self.grid[(provider, "*")]
            return pue, kg, f"{provider} average grid (no factor for {region})"
        return 1.2, 0.4, "no grid factor: PUE 1.2 and 0.4 kg/kWh assumed"


@dataclass(frozen=True)
class Links:
    """An instance's network (per node) and GPU-to-GPU links (catalog/data/interconnect.csv)."""

    network_gbps: float  # per node, gigabits per second
    gpu_gbytes_per_s: float  # GPU to GPU inside the node, gigabytes per second (0: PCIe)
    source: str


@dataclass(frozen=True)
class Catalog:
    """Everything the planner knows about hardware and prices, loaded once by the caller and passed in
    (``load_catalog``): a user's ``--catalog`` rows reach every consumer."""

    accelerators: dict[str, Accelerator]
    cpus: dict[str, CpuFamily]
    instances: tuple[Instance, ...]
    power: PowerTable | None = None  # None: the shipped table (hand-built catalogs in tests)
    links: dict[tuple[str, str], Links] = field(default_factory=dict)  # (provider, instance type) -> links
