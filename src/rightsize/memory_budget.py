"""One memory budget for ``rightsize memory`` and ``rightsize plan``: how much of a GPU a model may fill.

    need    = tensors + CUDA context + library workspace + allocator fragmentation   (rightsize.estimate.memory)
    usable  = device memory x (1 - GPU_HEADROOM_FRACTION)
    fits    = need <= usable

The estimate accounts every byte it can name (the context, cuBLAS/cuDNN workspace and a fragmentation
margin included) and the budget keeps 10% of the card free for what nobody counts: allocator growth
between iterations, other processes, and the gap between a card's nominal size and what the driver
exposes (a "24 GB" A10G shows 23028 MiB in nvidia-smi; docs/sources.md `memory-accounting`). The memory
command's tier choice and the planner's fit test both call ``gpu_fits``, so they cannot disagree.
"""

from __future__ import annotations

__all__ = [
    "CPU_RAM_FRACTION",
    "CPU_RUNTIME_BYTES",
    "GIB",
    "GPU_HEADROOM_FRACTION",
    "gpu_fits",
    "usable_cpu_bytes",
    "usable_gpu_bytes",
]

GIB = 2**30
GPU_HEADROOM_FRACTION = 0.10
# A CPU instance: the share of its RAM the planners fill (the OS, page cache and sidecars keep the rest), and
# what each worker process holds beside the tensors an estimate counts: the interpreter, torch and the server.
# A DistilBERT worker's measured peak RSS here was 0.6-0.7 GiB against 0.13-0.26 GiB of estimated tensors.
CPU_RAM_FRACTION = 0.85
CPU_RUNTIME_BYTES = 1 * GIB


def usable_gpu_bytes(capacity_bytes: float, headroom: float = GPU_HEADROOM_FRACTION) -> float:
    """Bytes of a ``capacity_bytes`` device a model's estimated total may fill."""
    return max(0.0, capacity_bytes * (1.0 - headroom))


def usable_cpu_bytes(ram_bytes: float, workers: int = 1) -> float:
    """Bytes one of ``workers`` processes on a CPU instance of ``ram_bytes`` may fill with the estimated tensors:
    its share of CPU_RAM_FRACTION of the RAM, less its runtime."""
    return max(0.0, ram_bytes * CPU_RAM_FRACTION / max(1, workers) - CPU_RUNTIME_BYTES)


def gpu_fits(need_bytes: float, capacity_bytes: float, headroom: float = GPU_HEADROOM_FRACTION) -> bool:
    return need_bytes <= usable_gpu_bytes(capacity_bytes, headroom)
