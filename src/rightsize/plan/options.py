"""Pair catalog instances with service curves and memory needs: the planner's unit of choice.

A GPU curve (``device`` = accelerator name, per single GPU) applies to every instance with that
accelerator; one serving replica or training worker runs per GPU. A CPU curve (``device`` =
"cpu:<instance_type>", ``instance`` = that type) applies to that instance only, with its layout:
``curve.workers`` replicas per instance (worker processes of ``curve.threads`` threads each), each
with an equal share of the instance's RAM. The planner never reads files: callers pass the instances,
curves and memory models.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from rightsize.catalog.model import Accelerator, Instance
from rightsize.memory_budget import CPU_RAM_FRACTION, usable_cpu_bytes, usable_gpu_bytes
from rightsize.plan.result import Candidate
from rightsize.profile import ServiceCurve

__all__ = [
    "GIB",
    "MemoryModel",
    "Option",
    "pair_options",
]

GIB = 1024**3
# Share of instance RAM a CPU replica may use; the OS, the server and page cache keep the rest.
USABLE_RAM_FRACTION = CPU_RAM_FRACTION  # the planners' name for it


@dataclass(frozen=True)
class MemoryModel:
    """Peak memory of one replica (inference) or worker (training) at batch b: fixed + per_sample x b, bytes.

    ``fixed_bytes``: weights (+ gradients + optimizer states when training); ``per_sample_bytes``:
    activations per sample. Context/workspaces are added by the fit check, not here.
    """

    fixed_bytes: float
    per_sample_bytes: float
    source: str = "estimate"
    gradient_bytes: float | None = None  # training: what data-parallel workers all-reduce each step
    on_cpu: MemoryModel | None = None  # the same replica on a CPU (no CUDA context); None: use this one
    load_bytes: float = 0.0  # a floor while the replica loads (a CPU int8 worker quantizing a float copy)

    def for_device(self, device_class: str) -> MemoryModel:
        """The model for a replica on ``device_class`` ("cpu" or "gpu")."""
        return self.on_cpu if device_class == "cpu" and self.on_cpu is not None else self

    def bytes_at(self, batch: float) -> float:
        return max(self.fixed_bytes + self.per_sample_bytes * batch, self.load_bytes)

    def at_load(self, batch: float) -> bool:
        """Whether loading, not serving ``batch``, sets ``bytes_at(batch)``."""
        return self.load_bytes > self.fixed_bytes + self.per_sample_bytes * batch

    def max_batch(self, capacity_bytes: float) -> int:
        """Largest batch that fits ``capacity_bytes`` (0 when even the fixed part or the load does not)."""
        if self.load_bytes > capacity_bytes:
            return 0
        room = capacity_bytes - self.fixed_bytes
        if room < self.per_sample_bytes:
            return 0
        return int(room // self.per_sample_bytes) if self.per_sample_bytes > 0 else 1 << 30


@dataclass(frozen=True)
class Option:
    """One instance type with one curve (device x precision)."""

    instance: Instance
    curve: ServiceCurve
    per_instance: int  # replicas per instance: GPUs, or CPU worker processes
    usable_bytes: float  # memory one replica may fill: GPU memory, or instance RAM
    capacity_bytes: float  # raw memory per replica (GPU memory or instance RAM)
    memory: MemoryModel | None  # None: not estimated (assume it fits, say so)

    @property
    def device_class(self) -> str:
        return self.instance.device_class

    @property
    def precision(self) -> str:
        return self.curve.precision

    @property
    def device(self) -> str:
        return self.instance.accelerator or "cpu"

    def fits(self, batch: float) -> bool:
        """Room for a batch of ``batch`` samples, and one the model runs (``ServiceCurve.batch_limit``)."""
        if self.curve.batch_limit is not None and batch > self.curve.batch_limit:
            return False
        return self.memory is None or self.memory.bytes_at(batch) <= self.usable_bytes

    def candidate(self, **fields: Any) -> Candidate:
        """A not-yet-feasible Candidate carrying this option's instance, device, price and provenance."""
        inst = self.instance
        base: dict[str, Any] = {
            "instance": inst.instance_type, "provider": inst.provider, "region": inst.region,
            "device_class": "gpu" if inst.accelerator else "cpu", "device": self.device, "count": 1,
            "precision": self.precision, "purchase": "on-demand", "cost_usd_per_hour": inst.on_demand_usd_per_hour,
            "feasible": False, "provenance": self.curve.provenance, "price_date": inst.price_date,
            "price_source": inst.source, "band": (self.curve.band_lo, self.curve.band_hi),
            "memory_capacity_bytes": int(self.capacity_bytes), "vcpus": inst.vcpus,
            "workers_per_instance": self.per_instance if not inst.accelerator else 1,
            "threads_per_worker": self.curve.threads if not inst.accelerator else None, "curve": self.curve,
            "notes": list(self.curve.caveats),  # what the row stands on (extrapolated, busy anchors, band edge)
        }  # fmt: skip
        return Candidate(**(base | fields))

    def need_bytes(self, batch: float) -> float | None:
        return None if self.memory is None else self.memory.bytes_at(batch)

    def memory_fields(self, batch: float) -> dict[str, Any]:
        """A candidate's ``memory_bytes`` at ``batch`` and ``memory_at_load``: whether loading sets that peak."""
        if self.memory is None:
            return {"memory_bytes": None, "memory_at_load": False}
        return {"memory_bytes": int(self.memory.bytes_at(batch)), "memory_at_load": self.memory.at_load(batch)}

    def size_memory(self, c: Candidate, batch: float) -> None:
        """Set ``c``'s memory fields (``memory_fields``) for ``batch``."""
        for name, value in self.memory_fields(batch).items():
            setattr(c, name, value)


# A curve's precision -> the memory model to use when there is none for it (same bytes per element).
_MEMORY_FALLBACK = {"tf32": "fp32", "bf16": "fp16", "fp16": "bf16"}


def _memory_for(memory: Mapping[str, MemoryModel] | None, precision: str, device_class: str) -> MemoryModel | None:
    """The memory model of ``precision`` on ``device_class``. A CPU int8 worker quantizes at load: torch's
    ``quantize_dynamic`` (and FX ``prepare_fx``) build the int8 model from a deep copy of the float one, so the
    float weights are held twice while it loads (bert-large: 3.2 GiB peak RSS for 0.4 GiB of int8 weights)."""
    if not memory:
        return None
    mem = memory.get(precision) or memory.get(_MEMORY_FALLBACK.get(precision, ""))
    if mem is None:
        return None
    mem = mem.for_device(device_class)
    float_model = memory.get("fp32")
    if device_class == "cpu" and precision == "int8" and float_model is not None:
        load = 2.0 * float_model.for_device("cpu").fixed_bytes
        mem = replace(mem, load_bytes=max(mem.load_bytes, load), source=f"{mem.source}; load: 2 x the fp32 weights")
    return mem


def curve_instance(curve: ServiceCurve) -> str:
    """The instance type a CPU curve was built for, lower case (the key ``pair_options`` pairs it by)."""
    return (curve.instance or curve.device.removeprefix("cpu:")).lower()


def curve_of(k: ServiceCurve, c: Candidate) -> bool:
    """Whether ``k`` is the curve candidate ``c`` was planned from: its precision and GPU, or its CPU instance and
    worker layout."""
    if k.precision != c.precision:
        return False
    if c.device_class == "gpu":
        return k.device == c.device
    return (
        curve_instance(k) == c.instance.lower()
        and max(1, k.workers) == max(1, c.workers_per_instance or 1)
        and (c.threads_per_worker is None or k.threads in (None, c.threads_per_worker))
    )


def pair_options(
    instances: Iterable[Instance],
    curves: Iterable[ServiceCurve],
    accelerators: Mapping[str, Accelerator],
    memory: Mapping[str, MemoryModel] | None = None,
) -> list[Option]:
    """Every (instance, curve) pair that applies; ``memory`` maps precision -> per-replica need."""
    by_acc: dict[str, list[ServiceCurve]] = {}
    by_cpu: dict[str, list[ServiceCurve]] = {}
    for c in curves:
        if c.device.startswith("cpu"):
            by_cpu.setdefault(curve_instance(c), []).append(c)
        else:
            by_acc.setdefault(c.device.lower(), []).append(c)
    out: list[Option] = []
    for inst in instances:
        if inst.accelerator:
            acc = accelerators.get(inst.accelerator)
            cap = (acc.usable_memory_gib if acc else 0.0) * GIB  # what a process can allocate (exposed_gib)
            usable = usable_gpu_bytes(cap)  # the memory command's budget: need includes the CUDA context
            for c in by_acc.get(inst.accelerator.lower(), []):
                mem = _memory_for(memory, c.precision, "gpu")
                out.append(Option(inst, c, max(1, inst.accelerator_count), usable, cap, mem))
        else:
            for c in by_cpu.get(inst.instance_type.lower(), []):
                mem = _memory_for(memory, c.precision, "cpu")
                k = max(1, c.workers)
                ram = inst.ram_gib * GIB
                out.append(Option(inst, c, k, usable_cpu_bytes(ram, k), ram / k, mem))
    return out
