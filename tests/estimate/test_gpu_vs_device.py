"""The GPU projections against the real H100 / H200 runs committed in benchmarks/gpu/results/ (outside truth:
machines this project does not own, and a fit that never saw them)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu" / "results"


@pytest.fixture
def bench(load_benchmark: Callable[[str], ModuleType]) -> ModuleType:
    return load_benchmark("gpu_vs_device")


@pytest.mark.slow  # > 1.3 s: make test runs it, make test-fast skips it
def test_compute_bound_conv_net_in_fp32_is_projected_at_the_tf32_rate(bench: ModuleType) -> None:
    # ResNet-50 batch 256 in fp32 ran 41.3 ms on the H100 and 34.7 ms on the H200; at the fp32 rate the
    # projection was 2.0-2.2x slow, with PyTorch's TF32 convolutions within 20%.
    for run in ("h100-2026-11-26", "h200-2026-11-26"):
        rows = bench.encoder_rows(RESULTS / run, {"resnet50"}, "inference")
        big = [r for r in rows if (r["model"], r["mode"], r["precision"], r["batch"]) == ("resnet50", "inference",
                                                                                         "fp32", 256)]  # fmt: skip
        assert len(big) == 1 and 0.8 < big[0]["ratio"] < 1.25, (run, big)


def test_eager_decode_of_a_7b_model_is_host_bound_at_the_projected_floor(bench: ModuleType) -> None:
    # Our own decoder on both GPUs: 11-15 ms a step at batch 1-64, whatever the batch (the host dispatches
    # ~800 ops); the eager floor projects 13.0-13.7 ms.
    for run in ("h100-2026-11-26", "h200-2026-11-26"):
        steps = [
            s for s in bench.llm_rows(RESULTS / run) if s["model"] == "llama-7b" and s["step"].startswith("decode")
        ]
        assert len(steps) == 4
        assert all(0.8 < s["ratio"] < 1.25 for s in steps), steps


@pytest.mark.slow  # traces 20 configs (~6 s)
def test_memory_trace_matches_what_pytorch_allocated_on_the_gpu(load_benchmark: Callable[[str], ModuleType]) -> None:
    # The FakeTensor trace never sees the run; PyTorch's peak allocated on the H100 is the truth.
    mem = load_benchmark("gpu_memory_vs_device")
    rows = [r for r in mem.rows_of([RESULTS / "h100-power-2026-11-26"]) if not r["autocast_inference"]]
    assert len(rows) == 14  # ResNet-50 / BERT-base: fp32 inference at 3 batches, and 8 training configs
    s = mem.summary(rows)
    assert s["tensors vs peak allocated"]["median_abs_error"] < 0.03
    assert abs(s["tensors vs peak allocated"]["worst"]) < 0.06
    assert s["total vs reserved + context"]["median_abs_error"] < 0.06
