"""Memory trackers: RSS peak, saved-for-backward bytes, CUDA allocator peaks."""

from __future__ import annotations

import gc
import subprocess
import sys

import numpy as np
import pytest
import torch
from torch import nn

from rightsize.measure.memory import (
    CudaMemoryTracker,
    LiveTensorTracker,
    RssPeakTracker,
    SavedTensorTracker,
    cuda_context_bytes,
)

MIB = 2**20


def test_importing_the_trackers_does_not_import_torch() -> None:
    code = "import sys, rightsize.measure.memory; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_rss_tracker_sees_a_touched_allocation_and_stops_its_thread() -> None:
    with RssPeakTracker(interval_s=0.0005) as rss:
        block = np.ones(96 * MIB, dtype=np.uint8)  # touched pages: resident
        del block
    assert rss.baseline_bytes > 0
    assert 80 * MIB <= rss.peak_above_baseline_bytes <= 400 * MIB
    assert rss._thread is None


def test_rss_tracker_default_uses_the_kernel_high_water_mark_without_a_thread() -> None:
    with RssPeakTracker() as rss:
        assert rss._thread is None  # nothing competes with the timed code
        block = np.ones(96 * MIB, dtype=np.uint8)
        del block  # freed before exit: only a peak tracker can still see it
    assert 80 * MIB <= rss.peak_above_baseline_bytes <= 400 * MIB


def test_rss_tracker_stops_on_error() -> None:
    tracker = RssPeakTracker()
    with pytest.raises(ValueError), tracker:
        raise ValueError("boom")
    assert tracker._thread is None and tracker.peak_bytes >= tracker.baseline_bytes


def test_saved_tensors_dedup_storages_and_sum_bytes() -> None:
    a = torch.randn(100, requires_grad=True)
    ones = torch.ones(10, 10)
    with SavedTensorTracker() as saved:
        b = a.exp()  # saves its result b: 400 B
        c = b.view(10, 10) @ ones  # mm saves the view of b (same storage) and `ones`: +400 B
    assert (saved.saved_bytes, saved.count) == (800, 2)
    c.sum().backward()  # hooks left the graph usable
    assert a.grad is not None and a.grad.shape == (100,)


def test_saved_tensors_exclude_the_models_parameters() -> None:
    model = nn.Sequential(nn.Linear(1000, 1000), nn.ReLU())
    x = torch.randn(2, 1000, requires_grad=True)  # so the weight is needed for x's gradient
    with SavedTensorTracker(model) as saved:
        model(x).sum()
    # linear saves x (8000 B) and its weight (excluded: 4 MB); relu saves its output (8000 B)
    assert saved.saved_bytes == 2 * 2 * 1000 * 4
    with SavedTensorTracker() as unfiltered:
        model(x).sum()
    assert unfiltered.saved_bytes == saved.saved_bytes + 1000 * 1000 * 4


def test_saved_tensors_are_zero_without_grad() -> None:
    model = nn.Linear(8, 8)
    with torch.no_grad(), SavedTensorTracker(model) as saved:
        model(torch.randn(4, 8))
    assert saved.saved_bytes == 0 and saved.count == 0


def test_saved_tensor_tracking_does_not_keep_the_graph_alive() -> None:
    # Packing the saved output itself would close a cycle output -> grad_fn -> saved output that
    # Python's gc cannot see, leaking every activation of every tracked forward.
    x = torch.randn(1000, requires_grad=True)
    with LiveTensorTracker() as live, SavedTensorTracker() as saved:
        loss = x.exp().sum()  # exp saves its 4000-byte output
        del loss
    gc.collect()
    assert saved.saved_bytes == 4000
    assert live.peak_bytes == 4000 + 4 and live.live_bytes == 0


def test_live_tensor_tracker_counts_allocations_not_views_or_in_place() -> None:
    a = torch.zeros(1000)  # existed before: not counted
    with LiveTensorTracker() as live:
        b = a + 1  # 4000 B
        b.add_(1)  # in place: nothing new
        v = b.view(10, 100)  # view: nothing new
        c = b * 2  # 4000 B: peak 8000
        del c
        d = torch.empty(500)  # 2000 B
        live.retag(d, "other")
    assert live.peak_bytes == 8000 and live.peak_by_tag == {"activations": 8000}
    assert live.live_bytes == 6000 and live.by_tag == {"activations": 4000, "other": 2000}
    assert v.shape == (10, 100)


def test_live_tensor_tracker_counts_a_kernels_scratch_at_its_op() -> None:
    def scratch(func: object, args: object, out: object) -> int:
        return 10_000 if getattr(func, "__name__", "") == "mul.Tensor" else 0

    a = torch.zeros(1000)
    with LiveTensorTracker(scratch=scratch) as live:
        b = a + 1  # 4000 B
        c = b * 2  # 4000 B, and the kernel held 10,000 B more while it ran: peak 18,000
        del b, c
        d = a + 3  # 4000 B: below the peak
    assert live.peak_bytes == 18_000 and live.peak_by_tag == {"activations": 8000, "scratch": 10_000}
    assert live.live_bytes == 4000 and d.numel() == 1000


@pytest.mark.gpu
def test_cuda_tracker_sees_an_allocation_and_context_is_counted() -> None:
    torch.zeros(1, device="cuda")
    with CudaMemoryTracker("cuda") as cuda:
        x = torch.empty(256 * MIB, dtype=torch.uint8, device="cuda")
        del x
    assert cuda.max_allocated_bytes - cuda.baseline_allocated_bytes >= 256 * MIB
    assert cuda.max_reserved_bytes >= cuda.max_allocated_bytes
    assert 50 * MIB < cuda_context_bytes("cuda") < 4 * 2**30
