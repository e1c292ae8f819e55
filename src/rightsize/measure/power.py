"""Measured power while a config is timed: RAPL energy counters on a CPU, NVML on an NVIDIA GPU.

    meter, why = open_power_meter("cpu")      # None and the reason where this machine has no counter
    meter.start(); ...timed work...; reading = meter.stop()
    reading.watts, reading.joules, reading.source  # e.g. 61.2 W, 183.6 J, "rapl:package-0"

CPU: Linux powercap exposes Intel RAPL (and AMD's RAPL-compatible counters since Linux 5.8) as
``/sys/class/powercap/intel-rapl:N/energy_uj``, a cumulative package energy counter in µJ that wraps at
``max_energy_range_uj`` (kernel docs: Documentation/power/powercap/powercap.rst). Only the top-level
``package-N`` domains are summed (their ``dram``/``core`` subdomains are parts of them). Since 2020 the
counter is readable by root only on most distributions (CVE-2020-8694): then the meter is unavailable and
the reason says so. RAPL is the whole package: other processes' load is in the reading.

GPU: NVML's ``nvmlDeviceGetTotalEnergyConsumption`` (mJ since the driver loaded; Volta and later) through
``pynvml`` when it is installed.

The meter measures; the planner's watts stay modelled (``plan/energy.py``). ``benchmarks/energy.py``
compares the two where a measurement exists.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

__all__ = ["MIN_POWER_WINDOW_S", "POWERCAP_ROOT", "PowerMeter", "PowerReading", "open_power_meter", "power_extra"]

POWERCAP_ROOT = Path("/sys/class/powercap")


# The shortest window a reading is taken over: RAPL and NVML counters advance in steps, so a short window misreads
# by a step or more (NVML's total-energy counter read 0 J over 30 ms windows of BERT on an H100, and 70-290 W for
# the same work over neighbouring 20-300 ms windows: benchmarks/gpu/results/h100-2026-11-26).
MIN_POWER_WINDOW_S = 1.0


@dataclass(frozen=True)
class PowerReading:
    joules: float
    seconds: float
    source: str

    @property
    def watts(self) -> float:
        return self.joules / self.seconds if self.seconds > 0 else 0.0


class PowerMeter(Protocol):
    source: str

    def start(self) -> None: ...

    def stop(self) -> PowerReading: ...


@dataclass
class _Domain:
    energy: Path
    max_uj: int
    name: str


class RaplMeter:
    """Sum of the package domains' energy counters between ``start`` and ``stop`` (wrap-around handled)."""

    def __init__(self, domains: list[_Domain]) -> None:
        self.domains = domains
        self.source = "rapl:" + "+".join(d.name for d in domains)
        self._t0 = 0.0
        self._e0: list[int] = []

    def _read(self) -> list[int]:
        return [int(d.energy.read_text().strip()) for d in self.domains]

    def start(self) -> None:
        self._e0, self._t0 = self._read(), time.perf_counter()

    def stop(self) -> PowerReading:
        e1, t1 = self._read(), time.perf_counter()
        uj = 0
        for d, a, b in zip(self.domains, self._e0, e1, strict=True):
            uj += b - a if b >= a else (d.max_uj - a) + b  # the counter wrapped once
        return PowerReading(uj / 1e6, t1 - self._t0, self.source)


class NvmlMeter:
    """NVML's total-energy counter of one GPU between ``start`` and ``stop``."""

    def __init__(self, nvml: Any, handle: Any, index: int) -> None:
        self.nvml, self.handle = nvml, handle
        self.source = f"nvml:{index}"
        self._t0 = 0.0
        self._mj0 = 0

    def start(self) -> None:
        self._mj0, self._t0 = int(self.nvml.nvmlDeviceGetTotalEnergyConsumption(self.handle)), time.perf_counter()

    def stop(self) -> PowerReading:
        mj, t1 = int(self.nvml.nvmlDeviceGetTotalEnergyConsumption(self.handle)), time.perf_counter()
        return PowerReading((mj - self._mj0) / 1e3, t1 - self._t0, self.source)


def _rapl(root: Path) -> tuple[RaplMeter | None, str]:
    if not root.is_dir():
        return None, f"no RAPL counters ({root} is absent: a VM or a kernel without powercap)"
    domains: list[_Domain] = []
    for d in sorted(root.glob("*rapl:*")):
        if d.name.count(":") != 1:  # intel-rapl:0:1 is a subdomain (core, dram) of package 0
            continue
        energy = d / "energy_uj"
        try:
            name = (d / "name").read_text().strip() if (d / "name").is_file() else d.name
            if not name.startswith("package"):
                continue
            int(energy.read_text().strip())
            max_uj = int((d / "max_energy_range_uj").read_text().strip())
        except PermissionError:
            return None, f"RAPL counters are readable by root only here ({energy}); run bench as root to measure power"
        except (OSError, ValueError):
            continue
        domains.append(_Domain(energy, max_uj, name))
    if not domains:
        return None, f"no RAPL package domain under {root}"
    return RaplMeter(domains), ""


def _nvml(device: str) -> tuple[NvmlMeter | None, str]:
    try:
        import pynvml  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return None, "pynvml is not installed: no measured GPU power"
    index = int(device.split(":", 1)[1]) if ":" in device else 0
    try:
        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        pynvml.nvmlDeviceGetTotalEnergyConsumption(handle)
    except Exception as exc:  # NVMLError_NotSupported (pre-Volta), no driver, ...
        return None, f"NVML has no energy counter for GPU {index}: {exc}"
    return NvmlMeter(pynvml, handle, index), ""


def open_power_meter(device: str, powercap_root: Path | None = None) -> tuple[PowerMeter | None, str]:
    """A meter for ``device`` ("cpu", "cuda", "cuda:N") and "" or None and why there is none."""
    if device.startswith("cuda"):
        return _nvml(device)
    return _rapl(powercap_root or POWERCAP_ROOT)


def power_extra(reading: PowerReading | None, why: str, seconds_per_sample: float) -> dict[str, Any]:
    """What a Measurement's ``extra`` records: measured watts and joules per sample, or why not."""
    if reading is None or reading.seconds <= 0:
        return {"power_unavailable": why} if why else {}
    if reading.joules <= 0:  # a counter that did not move measured nothing (not 0 W: the device was powered)
        return {"power_unavailable": f"the {reading.source} energy counter did not advance in {reading.seconds:.2f} s"}
    return {
        "power_w": round(reading.watts, 2),
        "energy_j_per_sample": round(reading.watts * seconds_per_sample, 6),
        "power_source": reading.source,
        "power_window_s": round(reading.seconds, 3),
    }
