"""Memory trackers: context managers that fill a small result while the block runs.

    with RssPeakTracker() as rss:                 # CPU: peak process RSS (kernel high-water mark)
        step()
    rss.peak_above_baseline_bytes

    with SavedTensorTracker(model) as saved:      # bytes autograd keeps for backward (activations)
        loss = model.loss(x, y)
    saved.saved_bytes, saved.count

    with CudaMemoryTracker("cuda") as cuda:       # caching-allocator peaks, reset on enter
        step()
    cuda.max_allocated_bytes, cuda.max_reserved_bytes

    with LiveTensorTracker() as live:             # any device, also fake tensors: storages created
        step()                                    # by ops, counted until they die
    live.peak_bytes, live.peak_by_tag

torch is imported inside the trackers, so importing this module stays cheap.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import re
import threading
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

import psutil

if TYPE_CHECKING:
    import torch
    from torch import nn

__all__ = [
    "CudaMemoryTracker",
    "LiveTensorTracker",
    "RssPeakTracker",
    "SavedTensorTracker",
    "cuda_context_bytes",
    "release_freed_heap",
]


def release_freed_heap() -> None:
    """Collect garbage and hand freed heap pages back to the OS (glibc ``malloc_trim``), so an RSS
    baseline taken next is not inflated by memory the allocator would reuse silently."""
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def _vm_hwm_bytes() -> int | None:
    """This process's peak RSS since the last reset (``VmHWM`` in /proc/self/status), bytes."""
    try:
        m = re.search(r"^VmHWM:\s+(\d+) kB", Path("/proc/self/status").read_text(), re.M)
    except OSError:
        return None
    return int(m.group(1)) * 1024 if m else None


class RssPeakTracker:
    """Peak resident set size of this process while the block runs.

    By default the kernel tracks the peak: on Linux, writing ``5`` to ``/proc/self/clear_refs``
    resets the high-water mark ``VmHWM`` (proc(5)), read back on exit. No thread runs, so timing
    measured inside the block is not disturbed (a sampling thread competes for the GIL and, on a
    2-core machine, for a core: it made run-to-run throughput differ by up to 70%). Where that
    file is not writable, a daemon thread samples RSS every ``interval_s`` instead (short spikes
    between samples are missed). The baseline is the RSS on enter (after ``release_freed_heap``
    when ``trim``). RSS counts every allocation (tensors, allocator caches, libraries), so it
    bounds tensor memory from above.
    """

    def __init__(self, interval_s: float | None = None, trim: bool = True) -> None:
        self.interval_s = interval_s
        self.trim = trim
        self.baseline_bytes = 0
        self.peak_bytes = 0
        self.samples = 0
        self._process = psutil.Process()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._kernel = False

    @property
    def peak_above_baseline_bytes(self) -> int:
        return max(0, self.peak_bytes - self.baseline_bytes)

    def _sample(self) -> None:
        rss = int(self._process.memory_info().rss)
        self.peak_bytes = max(self.peak_bytes, rss)
        self.samples += 1

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s or 0.0005):
            self._sample()

    @staticmethod
    def _reset_high_water_mark() -> bool:
        try:
            Path("/proc/self/clear_refs").write_text("5")
        except OSError:
            return False
        return _vm_hwm_bytes() is not None

    def __enter__(self) -> RssPeakTracker:
        if self.trim:
            release_freed_heap()
        self.baseline_bytes = int(self._process.memory_info().rss)
        self.peak_bytes = self.baseline_bytes
        self._kernel = self.interval_s is None and self._reset_high_water_mark()
        if not self._kernel:
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="rss-peak", daemon=True)
            self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            self._sample()  # the block's last state counts even when shorter than one interval
            hwm = _vm_hwm_bytes() if self._kernel else None
            if hwm is not None:
                self.peak_bytes = max(self.peak_bytes, hwm)
        finally:
            self._stop.set()
            if self._thread is not None:
                self._thread.join()
                self._thread = None


def _storage_key(t: torch.Tensor) -> int:
    # The C++ StorageImpl address: views of one tensor share it. Stable while the tensor lives,
    # and saved tensors stay alive for the whole forward, so keys cannot be reused meanwhile.
    return int(t.untyped_storage()._cdata)


def _storage_bytes(t: torch.Tensor) -> int:
    return int(t.untyped_storage().nbytes())


class SavedTensorTracker:
    """Bytes of the distinct storages autograd saves for backward while the block runs.

    Parameters and buffers of ``model`` are excluded (they are resident anyway); casts of them made
    by autocast are counted, since they are new memory. A view saved alone keeps its whole storage
    alive, so whole storages are counted. Works on real, meta and fake tensors.
    """

    def __init__(self, model: nn.Module | None = None) -> None:
        self.model = model
        self.saved_bytes = 0
        self.count = 0
        self._seen: set[int] = set()
        self._excluded: set[int] = set()
        self._hooks: contextlib.AbstractContextManager[Any] | None = None

    def _pack(self, t: torch.Tensor) -> torch.Tensor:
        key = _storage_key(t)
        if key not in self._seen and key not in self._excluded:
            self._seen.add(key)
            self.saved_bytes += _storage_bytes(t)
            self.count += 1
        return t.detach()  # a detached alias: no copy, and no output -> grad_fn -> saved-output cycle

    @staticmethod
    def _unpack(t: torch.Tensor) -> torch.Tensor:
        return t

    def __enter__(self) -> SavedTensorTracker:
        import torch

        self.saved_bytes, self.count = 0, 0
        self._seen = set()
        if self.model is not None:
            tensors = [*self.model.parameters(), *self.model.buffers()]
            self._excluded = {_storage_key(t) for t in tensors}
        self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, self._unpack)
        self._hooks.__enter__()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            if self._hooks is not None:
                self._hooks.__exit__(exc_type, exc, tb)
        finally:
            self._hooks = None
            self._seen = set()


def _live_mode_cls() -> type:
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_leaves

    def tensors(tree: Any) -> list[torch.Tensor]:
        import torch

        return [t for t in tree_leaves(tree) if isinstance(t, torch.Tensor)]

    class _LiveMode(TorchDispatchMode):
        def __init__(self, tracker: LiveTensorTracker) -> None:
            super().__init__()
            self.tracker = tracker

        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            if not func.is_view:  # views (and in-place / out= results below) allocate nothing
                existing = {_storage_key(t) for t in tensors((args, kwargs))}
                for t in tensors(out):
                    if _storage_key(t) not in existing:
                        self.tracker.track(t)
            if self.tracker.scratch is not None:
                self.tracker.transient(self.tracker.scratch(func, args, out))
            return out

    return _LiveMode


class LiveTensorTracker:
    """Peak bytes of the tensor storages that ops create while the block runs, split by tag.

    A TorchDispatchMode sees every op's outputs; a new storage counts as live until its weakref
    dies. Tensors that existed before (parameters, inputs) are not counted unless ``track``-ed.
    Allocations are tagged with ``phase`` (set it between stages); ``retag`` moves a storage to
    another tag (e.g. a gradient once accumulated). ``scratch(func, args, out)``, when given, returns
    the bytes a kernel holds internally while it runs (buffers no op returns); they count towards
    the peak, under the tag ``scratch``, at the moment the op's outputs exist. Works on real, meta
    and fake tensors; costs tens of microseconds per op, so keep it out of timed runs.
    """

    def __init__(
        self, tags: tuple[str, ...] = ("activations",), scratch: Callable[[Any, Any, Any], int] | None = None
    ) -> None:
        self.scratch = scratch
        self.phase = tags[0]
        self._tags = tags
        self.owner: dict[int, tuple[str, int]] = {}  # storage key -> (tag, bytes)
        self.by_tag: dict[str, int] = dict.fromkeys(tags, 0)
        self.live_bytes = 0
        self.peak_bytes = 0
        self.peak_by_tag: dict[str, int] = dict(self.by_tag)
        self._mode: Any = None

    def track(self, t: torch.Tensor, tag: str | None = None) -> None:
        """Count ``t``'s storage as live (once) under ``tag`` (default: the current phase)."""
        import weakref

        key = _storage_key(t)
        if key in self.owner:
            return
        storage = t.untyped_storage()
        nbytes = int(storage.nbytes())
        tag = tag or self.phase
        self.owner[key] = (tag, nbytes)
        self.by_tag[tag] = self.by_tag.get(tag, 0) + nbytes
        self.live_bytes += nbytes
        if self.live_bytes > self.peak_bytes:
            self.peak_bytes = self.live_bytes
            self.peak_by_tag = dict(self.by_tag)
        weakref.finalize(storage, self._free, key)

    def transient(self, nbytes: int) -> None:
        """A kernel's internal buffer of ``nbytes``, live on top of everything now live, then freed."""
        if nbytes > 0 and self.live_bytes + nbytes > self.peak_bytes:
            self.peak_bytes = self.live_bytes + nbytes
            self.peak_by_tag = dict(self.by_tag) | {"scratch": nbytes}

    def _free(self, key: int) -> None:
        tag, nbytes = self.owner.pop(key, ("", 0))
        if tag:
            self.by_tag[tag] -= nbytes
            self.live_bytes -= nbytes

    def retag(self, t: torch.Tensor, tag: str) -> None:
        key = _storage_key(t)
        if key in self.owner:
            old, nbytes = self.owner[key]
            self.by_tag[old] -= nbytes
            self.by_tag[tag] = self.by_tag.get(tag, 0) + nbytes
            self.owner[key] = (tag, nbytes)

    def __enter__(self) -> LiveTensorTracker:
        self._mode = _live_mode_cls()(self)
        self._mode.__enter__()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            if self._mode is not None:
                self._mode.__exit__(exc_type, exc, tb)
        finally:
            self._mode = None


class CudaMemoryTracker:
    """Caching-allocator peaks on ``device`` while the block runs (peak stats reset on enter).

    ``max_allocated_bytes`` counts live tensors (and cuBLAS/cuDNN workspaces, which come from the
    same allocator); ``max_reserved_bytes`` adds the allocator's cached segments. Neither counts
    the CUDA context: see ``cuda_context_bytes`` (docs/sources.md `memory-accounting`).
    """

    def __init__(self, device: str = "cuda") -> None:
        self.device = device
        self.baseline_allocated_bytes = 0
        self.max_allocated_bytes = 0
        self.max_reserved_bytes = 0

    @property
    def peak_above_baseline_bytes(self) -> int:
        return max(0, self.max_allocated_bytes - self.baseline_allocated_bytes)

    def __enter__(self) -> CudaMemoryTracker:
        import torch

        torch.cuda.synchronize(self.device)
        torch.cuda.reset_peak_memory_stats(self.device)
        self.baseline_allocated_bytes = int(torch.cuda.memory_allocated(self.device))
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        import torch

        try:
            torch.cuda.synchronize(self.device)
        finally:
            self.max_allocated_bytes = int(torch.cuda.max_memory_allocated(self.device))
            self.max_reserved_bytes = int(torch.cuda.max_memory_reserved(self.device))


def cuda_context_bytes(device: str = "cuda") -> int:
    """Device memory this process holds outside PyTorch's caching allocator (CUDA context, kernels
    and library handles): the process's driver-reported usage minus ``memory_reserved``.

    Per-process usage comes from NVML (``torch.cuda.list_gpu_processes`` data via pynvml) when it can
    be read; otherwise the device-wide used memory (``mem_get_info``), which also counts other
    processes on a shared GPU. Initialises CUDA if needed. Typical: 0.3-0.7 GB (docs/sources.md `memory-accounting`).
    """
    import os

    import torch

    torch.cuda.init()
    dev = torch.device(device)
    index = dev.index if dev.index is not None else torch.cuda.current_device()
    reserved = int(torch.cuda.memory_reserved(index))
    used = _process_used_bytes(index, os.getpid())
    if used is None:
        free, total = torch.cuda.mem_get_info(index)
        used = int(total - free)
    return max(0, used - reserved)


def _process_used_bytes(index: int, pid: int) -> int | None:
    """This process's memory on GPU ``index`` from NVML, or None when NVML is not available."""
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
        try:
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            for proc in pynvml.nvmlDeviceGetComputeRunningProcesses(handle):
                if proc.pid == pid and proc.usedGpuMemory is not None:
                    return int(proc.usedGpuMemory)
        finally:
            pynvml.nvmlShutdown()
    except pynvml.NVMLError:
        return None
    return None  # not listed (e.g. inside a container's PID namespace)
