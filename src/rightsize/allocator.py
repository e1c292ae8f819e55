"""Keep freed memory in the process: the allocator setting every timing and the server run under.

    from rightsize.allocator import keep_freed_memory
    keep_freed_memory()   # once, before the model runs; True when glibc accepted it

glibc's malloc gives large freed blocks straight back to the kernel (blocks above the mmap threshold
are unmapped on free; the top of the main heap is trimmed above the trim threshold), so an eager CPU
forward pass that allocates and frees its activations maps fresh pages on every call and pays a page
fault per 4 KiB touched. Measured on the 2-vCPU dev VM (1 thread, same process, default then kept):
MobileNetV2 batch 1 17.9 -> 13.9 ms, batch 8 217 -> 106 ms; ResNet-50 and DistilBERT within noise.

A thread other than the main one allocates from its own arena, and glibc caps such an arena's heaps at
64 MiB (HEAP_MAX_SIZE on 64-bit): a block larger than that (MobileNetV2's expanded activations at batch
16 are ~77 MB) is mapped fresh and unmapped on every call whatever the thresholds say. The server runs
the model in worker threads, so its full batches of 16 images took 2x what the bench (main thread)
measured: 2-vCPU VM, 1 thread, kept thresholds, ms per sample main vs worker thread, batch 8 15.2 vs 21.0,
batch 16 14.3 vs 36.8. With one arena for the whole process (``mallopt(M_ARENA_MAX, 1)``, before
the threads first allocate: glibc fixes its arena limit when it makes the first thread arena) every
thread uses the main heap: batch 16 12.4 vs 12.6. The cost is one malloc
lock for all threads, which a model's few large blocks per call do not feel.

The usual production fix is jemalloc or TCMalloc preloaded (PyTorch's performance tuning guide, CPU
section "Switch Memory allocator", https://pytorch.org/tutorials/recipes/recipes/tuning_guide.html, read
2026-11-25: they "can get better performance by reusing memory as much as possible than default malloc
function"). We cannot preload a library into the user's Python, so we set the two glibc thresholds
(``mallopt(M_TRIM_THRESHOLD)``, ``mallopt(M_MMAP_THRESHOLD)``, mallopt(3)) so freed blocks stay in the
heap and are reused, and one arena: the same effect for a steady loop. Call it before starting
threads (``rightsize.serve`` and the CLI do); a thread that already has its own arena keeps it. The
cost is that RSS stays at its peak, which
is what a serving process sizes for anyway. ``RIGHTSIZE_ALLOCATOR=system`` leaves glibc's defaults.
Elsewhere than glibc this does nothing (returns False).
"""

from __future__ import annotations

import ctypes
import os

__all__ = ["ALLOCATOR_ENV", "keep_freed_memory"]

ALLOCATOR_ENV = "RIGHTSIZE_ALLOCATOR"
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD, _M_ARENA_MAX = -1, -3, -8  # <malloc.h>
_KEEP_BYTES = 1 << 30  # freed blocks up to 1 GiB stay in the heap; larger ones still go back

_done: bool | None = None


def keep_freed_memory() -> bool:
    """Raise glibc's trim and mmap thresholds and keep one arena for this process (once); False where not
    glibc or opted out."""
    global _done
    if _done is not None:
        return _done
    _done = False
    if os.environ.get(ALLOCATOR_ENV, "").lower() == "system":
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    _done = all(
        bool(mallopt(option, value))
        for option, value in ((_M_TRIM_THRESHOLD, _KEEP_BYTES), (_M_MMAP_THRESHOLD, _KEEP_BYTES), (_M_ARENA_MAX, 1))
    )
    return _done
