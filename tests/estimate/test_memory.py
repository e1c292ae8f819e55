"""Memory estimator: exact state accounting, traced activations vs real saved bytes, tiers, advice."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from dataclasses import replace

import pytest
import torch

from rightsize.errors import NotFoundError, SpecError
from rightsize.estimate.memory import (
    BREAKDOWN_KEYS,
    GIB,
    MemoryInputs,
    Overheads,
    assemble,
    kv_cache_bytes,
)
from rightsize.estimate.memory_advice import advise_memory, smaller_tier_batches
from rightsize.estimate.memory_estimate import estimate_memory
from rightsize.estimate.memory_tiers import FALLBACK_GPU_TIERS, GpuTier, pick_tier, tier_fits
from rightsize.estimate.memory_trace import ModelStats, TraceResult, trace_memory
from rightsize.measure.memory import RssPeakTracker, SavedTensorTracker
from rightsize.models.zoo import get_entry

TINY_CPU = {"device": "cpu", "tiny": True, "tiers": [GpuTier(64, ("test",))]}


def _resident(model: torch.nn.Module) -> int:
    return sum(t.numel() * t.element_size() for t in (*model.parameters(), *model.buffers()))


# --- exact accounting of weights, gradients, optimizer states ------------------------------------


@pytest.mark.slow  # > 1.2 s: make test runs it, make test-fast skips it
@pytest.mark.parametrize("name", ["distilbert", "resnet50", "llama-1b"])
def test_training_state_is_exact_against_the_real_model(name: str) -> None:
    model = get_entry(name).build(tiny=True)
    params = sum(p.numel() for p in model.parameters())
    adamw = estimate_memory(name, mode="train", batch_size=2, **TINY_CPU)  # type: ignore[arg-type]
    sgd = estimate_memory(name, mode="train", batch_size=2, optimizer="sgd", **TINY_CPU)  # type: ignore[arg-type]
    assert adamw.param_count == params
    assert adamw.components["weights"] == _resident(model)  # fp32 params + buffers
    assert adamw.components["gradients"] == 4 * params
    assert adamw.components["optimizer_states"] == 8 * params  # exp_avg + exp_avg_sq, fp32
    assert sgd.components["optimizer_states"] == 4 * params  # momentum buffer
    amp = estimate_memory(name, mode="train", precision="bf16", batch_size=2, **TINY_CPU)  # type: ignore[arg-type]
    assert amp.components["weights"] == adamw.components["weights"]  # AMP keeps fp32 master weights


@pytest.mark.parametrize("precision, dtype", [("fp16", torch.float16), ("bf16", torch.bfloat16)])
def test_inference_weights_match_the_cast_model(precision: str, dtype: torch.dtype) -> None:
    model = get_entry("distilbert").build(tiny=True).to(dtype)
    est = estimate_memory("distilbert", mode="infer", precision=precision, **TINY_CPU)  # type: ignore[arg-type]
    assert est.breakdown["weights"] == _resident(model)


def test_int8_and_int4_weights_quantize_linear_layers_except_the_head() -> None:
    fp16 = estimate_memory("llama-1b", mode="infer", precision="fp16", device="cuda", tiny=True)
    int8 = estimate_memory("llama-1b", mode="infer", precision="int8", device="cuda", tiny=True)
    int4 = estimate_memory("llama-1b", mode="infer", precision="int4", device="cuda", tiny=True)
    model = get_entry("llama-1b").build(tiny=True)
    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)][:-1]  # not the lm_head
    q = sum(m.weight.numel() for m in linears)
    rows = sum(m.out_features for m in linears)
    assert fp16.breakdown["weights"] - int8.breakdown["weights"] == 2 * q - (q + 2 * rows)
    assert fp16.breakdown["weights"] - int4.breakdown["weights"] == 2 * q - (q // 2 + -(-q // 128) * 4)


# --- traced activations vs a real forward ---------------------------------------------------------


@pytest.mark.parametrize(
    "name, precision",
    [("resnet50", "fp32"), ("resnet50", "bf16"), ("distilbert", "fp32"), ("distilbert", "bf16"),
     ("gpt2", "fp32"), ("llama-1b", "bf16")],
)  # fmt: skip
def test_traced_activations_within_10pct_of_saved_tensor_tracker(name: str, precision: str) -> None:
    entry = get_entry(name)
    est = estimate_memory(name, mode="train", precision=precision, batch_size=4, advise=False, **TINY_CPU)  # type: ignore[arg-type]
    torch.manual_seed(0)
    model = entry.build(tiny=True).train()
    x = entry.example_input(4, tiny=True)
    y = entry.example_labels(x, tiny=True)
    amp = torch.autocast("cpu", dtype=torch.bfloat16) if precision == "bf16" else contextlib.nullcontext()
    with SavedTensorTracker(model) as saved, amp:
        model.loss(x, y)
    assert saved.saved_bytes > 0
    assert est.components["activations_saved"] == pytest.approx(saved.saved_bytes, rel=0.10)


def test_cuda_target_uses_fused_attention_without_the_score_matrix() -> None:
    entry = get_entry("distilbert")
    _, cpu = trace_memory(entry, mode="train", batch_size=4, target="cpu", tiny=True)  # math SDPA: saves B*H*S*S
    _, cuda = trace_memory(entry, mode="train", batch_size=4, target="cuda", tiny=True)
    assert cuda.saved_bytes < cpu.saved_bytes
    assert cuda.notes and not cpu.notes


_CONV_CHILD = """
import json, torch
from torch import nn
from rightsize.measure.memory import RssPeakTracker, release_freed_heap
x = torch.randn(16, 64, 56, 56)  # 12.25 MiB
out = {}
for name, conv in (("same", nn.Conv2d(64, 64, 3, padding=1)), ("expand", nn.Conv2d(64, 128, 1)),
                   ("reduce", nn.Conv2d(64, 16, 1))):
    with torch.no_grad():
        conv(x)
        release_freed_heap()
        with RssPeakTracker() as rss:
            y = conv(x)
            n = y.numel() * 4
            del y
    out[name] = [rss.peak_above_baseline_bytes - n, max(x.numel() * 4, n), x.numel() * 4 + n]
print(json.dumps(out))
"""


@pytest.mark.slow  # > 1.9 s: make test runs it, make test-fast skips it
def test_a_cpu_convolution_holds_its_layout_copy_as_the_trace_says() -> None:
    """Outside truth for the conv scratch rule: a real conv's peak RSS above its output, in a fresh
    process, is at least max(input, output) (oneDNN's reorder buffers, one at a time) and at most their
    sum (when the heap puts the second buffer elsewhere); the trace puts max(input, output) at the op."""
    import json

    child = subprocess.run([sys.executable, "-c", _CONV_CHILD], capture_output=True, text=True, check=True)
    for name, (extra, rule, both) in json.loads(child.stdout.strip().splitlines()[-1]).items():
        assert 0.9 * rule <= extra <= 1.15 * both, (name, extra, rule, both)

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = torch.nn.Conv2d(8, 32, 1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.conv(x)

    from rightsize.estimate.memory_trace import cpu_kernel_scratch_bytes
    from rightsize.measure.memory import LiveTensorTracker

    net, x = Net().eval(), torch.randn(2, 8, 16, 16)
    with torch.no_grad(), LiveTensorTracker(scratch=cpu_kernel_scratch_bytes) as live:
        net(x)
    out_bytes = 2 * 32 * 16 * 16 * 4
    assert live.peak_by_tag == {"activations": out_bytes, "scratch": out_bytes}  # max(input 8 ch, output 32 ch)


def test_the_cpu_conv_scratch_enters_the_estimate_and_cuda_has_none() -> None:
    cpu = estimate_memory("resnet50", mode="infer", batch_size=2, advise=False, **TINY_CPU)  # type: ignore[arg-type]
    cuda = estimate_memory("resnet50", mode="infer", batch_size=2, device="cuda", tiny=True, advise=False,
                           tiers=TINY_CPU["tiers"])  # type: ignore[arg-type]  # fmt: skip
    assert cpu.breakdown["workspace"] > 0 and sum(cpu.breakdown.values()) == cpu.total_bytes
    assert cuda.breakdown["workspace"] == Overheads().cublas_workspace_bytes + Overheads().cudnn_workspace_bytes


def test_training_trace_tags_gradients_and_records_blocks() -> None:
    stats, trace = trace_memory(get_entry("llama-1b"), mode="train", batch_size=2, tiny=True)
    assert trace.gradient_bytes == 4 * stats.param_count
    assert sum(trace.peak_by_tag.values()) == trace.peak_live_bytes
    assert len(trace.block_saved_bytes) == 2  # the two decoder layers of the tiny Llama
    assert stats.kv_layers == 2 and stats.kv_heads == 2 and stats.head_dim == 8


# --- pure accounting -------------------------------------------------------------------------------


def _inputs(mode: str = "train", device: str = "cpu", peak: int = 1000, **kw: object) -> MemoryInputs:
    stats = ModelStats(param_count=100, param_tensors=2, largest_param_numel=60, float_buffer_numel=0,
                       other_buffer_bytes=0, linear_weight_numel=0, linear_out_features=0,
                       kv_layers=2, kv_heads=4, head_dim=8)  # fmt: skip
    tags = {"input": 0, "activations": peak - 100, "logits": 50, "backward": 30, "gradients": 20}
    trace = TraceResult(mode, saved_bytes=peak - 150, saved_count=3, peak_live_bytes=peak, peak_by_tag=tags,
                        logits_bytes=50, gradient_bytes=400)  # fmt: skip
    kw.setdefault("overheads", Overheads(cpu_allocator_fraction=0.0))
    return MemoryInputs("m", mode, "fp32", device, 4, 16, None, "adamw", False, stats, trace, **kw)  # type: ignore[arg-type]


_NO_CUDA_OVERHEAD = Overheads(context_bytes=0, cublas_workspace_bytes=0, cudnn_workspace_bytes=0,
                              fragmentation_fraction=0.0)  # fmt: skip


def test_training_peak_is_the_larger_phase_and_the_breakdown_sums() -> None:
    # CUDA (the caching allocator reuses freed blocks): W 400, O 800, G 400, T (foreach: one copy of the params) 400
    fb, _, phase = assemble(_inputs(peak=1000, device="cuda", overheads=_NO_CUDA_OVERHEAD))
    assert phase == "forward_backward" and sum(fb.values()) == 400 + 800 + 1000
    step, comp, phase = assemble(_inputs(peak=500, device="cuda", overheads=_NO_CUDA_OVERHEAD))
    assert phase == "optimizer_step" and sum(step.values()) == 400 + 800 + 400 + 400
    assert comp["optimizer_step_transient"] == 400 and set(step) == set(BREAKDOWN_KEYS)
    fused, _, _ = assemble(replace(_inputs(peak=500, device="cuda", overheads=_NO_CUDA_OVERHEAD), fused=True))
    assert sum(fused.values()) == 400 + 800 + max(500, 400)


def test_cpu_training_peak_keeps_the_forward_heap_under_the_step() -> None:
    # CPU: glibc keeps the forward-backward peak's heap resident while the gradients and the step's
    # temporaries are allocated: activations 900 + logits 50 + backward 30 + all gradients 400 + T 480 (the CPU's
    # per-tensor loop: 2 x largest param x 4 B);
    # the allocator margin applies to the forward-backward bytes only (1000 x 0.5)
    out, _, phase = assemble(_inputs(peak=1000, overheads=Overheads(cpu_allocator_fraction=0.5)))
    assert phase == "optimizer_step_cpu_heap"
    assert out["gradients"] == 400 and out["optimizer_step_transient"] == 480 and out["fragmentation"] == 500
    assert sum(out.values()) == 400 + 800 + (900 + 50 + 30) + 400 + 480 + 500


def test_cpu_allocator_margin_covers_what_a_step_allocates() -> None:
    rows, _, _ = assemble(_inputs(peak=1000, overheads=Overheads(cpu_allocator_fraction=0.5)))
    assert rows["fragmentation"] == 500 and rows["cuda_context"] == rows["workspace"] == 0  # 0.5 x P_fb


def test_cuda_overheads_and_sharding() -> None:
    ov = Overheads(context_bytes=1000, cublas_workspace_bytes=100, cudnn_workspace_bytes=0, fragmentation_fraction=0.1)
    rows, _, _ = assemble(_inputs(device="cuda", peak=1000, overheads=ov))
    # foreach AdamW on CUDA: T = 4 B x params = 400 < P_fb, so the peak is forward + backward
    assert rows["cuda_context"] == 1000 and rows["workspace"] == 100
    assert rows["fragmentation"] == int(0.1 * (400 + 800 + 1000 + 100))
    sharded, _, _ = assemble(replace(_inputs(device="cuda", peak=1000, overheads=ov), shards=4))
    assert sharded["weights"] == 100 and sharded["optimizer_states"] == 200


def test_kv_cache_formula() -> None:
    stats = _inputs().stats
    assert kv_cache_bytes(stats, 2, batch_size=3, seq_len=16) == 2 * 2 * 4 * 8 * 2 * 3 * 16
    infer, _, phase = assemble(_inputs(mode="infer"))
    assert phase == "forward" and infer["kv_cache"] == 2 * 2 * 4 * 8 * 4 * 4 * 16  # fp32, batch 4


def test_tier_choice_keeps_headroom() -> None:
    assert tier_fits(int(21.6 * GIB), 24) and not tier_fits(int(21.7 * GIB), 24)
    tiers = list(FALLBACK_GPU_TIERS)
    assert pick_tier(int(7 * GIB), tiers).memory_gib == 8  # type: ignore[union-attr]
    assert pick_tier(int(15 * GIB), tiers).memory_gib == 24  # type: ignore[union-attr]
    assert pick_tier(int(200 * GIB), tiers) is None


# --- acceptance: big models without real memory ----------------------------------------------------


@pytest.mark.slow  # > 1.3 s: make test runs it, make test-fast skips it
def test_llama_7b_fp16_inference_fits_a_24gb_tier_without_allocating_weights() -> None:
    with RssPeakTracker(interval_s=0.005) as rss:
        est = estimate_memory("llama-7b", mode="infer", precision="fp16", batch_size=1, seq_len=2048)
    assert 13.5 <= est.total_gib <= 20
    assert est.tier_memory_gib == 24 and est.fits
    assert est.breakdown["kv_cache"] == 2 * 32 * 32 * 128 * 2 * 2048  # 1 GiB
    assert est.breakdown["weights"] == pytest.approx(6.74e9 * 2, rel=0.01)
    assert rss.peak_above_baseline_bytes < 2 * GIB  # the 12.5 GiB of weights were never allocated


def test_llama_1b_fp16_fits_an_8gb_tier() -> None:
    est = estimate_memory("llama-1b", mode="infer", precision="fp16", batch_size=1, tiers=list(FALLBACK_GPU_TIERS))
    assert est.tier_memory_gib == 8 and est.total_gib < 0.9 * 8


# --- advice when nothing fits ---------------------------------------------------------------------


@pytest.mark.slow  # ~1 s on 2 cores: kept out of make test-fast
def test_advice_for_training_that_does_not_fit() -> None:
    big = [GpuTier(64, ("big",))]
    one = estimate_memory("distilbert", mode="train", batch_size=1, device="cpu", tiny=True, tiers=big)
    full = estimate_memory("distilbert", mode="train", batch_size=8, device="cpu", tiny=True, tiers=big)
    small = GpuTier((one.total_bytes + full.total_bytes) / 2 / 0.9 / GIB, ("small",))  # fits batch 1, not 8
    est = estimate_memory("distilbert", mode="train", batch_size=8, device="cpu", tiny=True, tiers=[small])
    assert not est.fits and est.tier is None
    actions = {a.action: a for a in est.advice}
    assert {"batch", "amp", "checkpointing", "optimizer_8bit"} <= set(actions)
    batch = actions["batch"]
    assert batch.fits and batch.total_bytes <= 0.9 * small.memory_gib * GIB and "instead of 8" in batch.detail
    assert actions["checkpointing"].total_bytes < est.total_bytes
    assert actions["optimizer_8bit"].total_bytes < est.total_bytes


@pytest.mark.slow
def test_sharding_advice_splits_model_state_over_gpus() -> None:
    stats, trace = trace_memory(get_entry("llama-1b"), mode="train", batch_size=2, target="cuda", tiny=True)
    no_overhead = Overheads(context_bytes=0, cublas_workspace_bytes=0, cudnn_workspace_bytes=0)
    inp = MemoryInputs("llama-1b", "train", "fp32", "cuda", 2, 16, None, "adamw", False, stats, trace, no_overhead)
    total = sum(assemble(inp)[0].values())
    tier = GpuTier(total * 0.95 / GIB, ("one",))  # 0.95 x total needs 0.9 x capacity: does not fit
    shard = next(a for a in advise_memory(inp, [tier]) if a.action == "shard")
    assert shard.gpus >= 2 and shard.fits and shard.total_bytes < total


# --- bad input ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, field",
    [({"batch_size": 0}, "batch"), ({"precision": "fp8"}, "precision"), ({"mode": "serve"}, "mode"),
     ({"mode": "train", "precision": "int8"}, "precision"), ({"seq_len": 64, "model": "resnet50"}, "seq"),
     ({"image_size": 64}, "image"), ({"optimizer": "adam"}, "optimizer"), ({"device": "tpu"}, "device")],
)  # fmt: skip
def test_bad_input_names_the_field(kwargs: dict[str, object], field: str) -> None:
    model = str(kwargs.pop("model", "distilbert"))
    with pytest.raises(SpecError) as err:
        estimate_memory(model, tiny=True, **kwargs)  # type: ignore[arg-type]
    assert err.value.field == field and str(err.value).startswith(f"{field}:")


@pytest.mark.slow
def test_a_sequence_past_the_position_table_is_one_line_naming_seq(capfd: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SpecError) as err:  # BERT's token-type buffer holds 512 positions (fake tensors: ~3 s)
        estimate_memory("bert-base", seq_len=513, tiers=[GpuTier(64, ("test",))])
    assert str(err.value) == "seq: 513 is past bert-base's 512 positions; use at most 512"  # before tracing
    assert "Traceback" not in capfd.readouterr().err


def test_gpt2_past_its_position_table_is_refused_before_the_trace_accounts_it() -> None:
    """GPT-2's wpe has 1024 rows; a fake-tensor trace does not index it, so 2048 tokens read as 1.4 GiB that fit
    a P4, and --validate then died in a real forward with an IndexError traceback."""
    with pytest.raises(SpecError) as err:
        estimate_memory("gpt2", seq_len=2048, tiers=[GpuTier(64, ("test",))])
    assert str(err.value) == "seq: 2048 is past gpt2's 1024 positions; use at most 1024"


def test_inference_tensor_parallelism_is_advised_over_gpu_counts_that_split_the_heads() -> None:
    """Llama-70B's 64 heads were advised "tensor parallelism over 3 x A100-80GB": no instance has 3 GPUs and vLLM
    cannot split 64 heads over 3. Inference splits over 2, 4 or 8 GPUs that divide the heads."""
    stats = ModelStats(param_count=10**9, param_tensors=2, largest_param_numel=10**8, float_buffer_numel=0,
                       other_buffer_bytes=0, linear_weight_numel=0, linear_out_features=0,
                       kv_layers=2, kv_heads=2, head_dim=8, heads=12)  # fmt: skip
    tags = {"input": 0, "activations": 1000, "logits": 0, "backward": 0, "gradients": 0}
    trace = TraceResult("infer", saved_bytes=0, saved_count=0, peak_live_bytes=1000, peak_by_tag=tags,
                        logits_bytes=0, gradient_bytes=0)  # fmt: skip
    inp = MemoryInputs("m", "infer", "fp32", "cuda", 1, 16, None, "adamw", False, stats, trace, _NO_CUDA_OVERHEAD)
    total = sum(assemble(inp)[0].values())  # the weights, all but 1000 bytes
    shard = next(a for a in advise_memory(inp, [GpuTier(total / 2.5 / GIB, ("t",))]) if a.action == "shard")
    assert shard.gpus == 4  # a third fits in 0.9 of the tier, half does not: 3 was advised
    twelve = replace(inp, stats=replace(stats, kv_heads=12))  # an eighth would fit, a quarter not; 8 splits no 12
    assert not [a for a in advise_memory(twelve, [GpuTier(total / 6.5 / GIB, ("t",))]) if a.action == "shard"]


def test_tier_sizes_must_be_finite_and_positive() -> None:
    from rightsize.estimate.memory_tiers import parse_tiers

    assert [t.memory_gib for t in parse_tiers("24, 8")] == [8.0, 24.0]
    for bad in ("nan", "inf", "8,-1", "x", "", "1e30", "8,,16", "8,"):
        with pytest.raises(SpecError, match=r"^--tiers:"):
            parse_tiers(bad)


def test_unknown_model_suggests_a_name() -> None:
    with pytest.raises(NotFoundError, match=r"model 'llama-7' .*Did you mean"):
        estimate_memory("llama-7", tiny=True)


def test_importing_the_estimator_does_not_import_torch() -> None:
    code = "import sys, rightsize.estimate.memory, rightsize.cli.memory; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_inference_advice_offers_half_precision_and_never_gradient_accumulation() -> None:
    """`memory llama-70b --batch 128` (inference) advised "gradient accumulation keeps the global batch", and an
    fp32 inference never heard of fp16/bf16: half the weights and activations, before int8 or int4."""
    stats = ModelStats(param_count=10**9, param_tensors=2, largest_param_numel=10**8, float_buffer_numel=0,
                       other_buffer_bytes=0, linear_weight_numel=9 * 10**8, linear_out_features=10**5,
                       kv_layers=2, kv_heads=2, head_dim=8, heads=4)  # fmt: skip
    tags = {"input": 0, "activations": 2 * 10**9, "logits": 0, "backward": 0, "gradients": 0}
    trace = TraceResult("infer", saved_bytes=0, saved_count=0, peak_live_bytes=2 * 10**9, peak_by_tag=tags,
                        logits_bytes=0, gradient_bytes=0)  # fmt: skip
    inp = MemoryInputs("m", "infer", "fp32", "cuda", 8, 16, None, "adamw", False, stats, trace, _NO_CUDA_OVERHEAD)
    total = sum(assemble(inp)[0].values())
    advice = {a.action: a for a in advise_memory(inp, [GpuTier(total / 1.2 / GIB, ("t",))])}
    assert "fp16" in advice and advice["fp16"].detail.startswith("half precision: --precision fp16")
    assert advice["fp16"].total_bytes < 0.6 * total  # weights and activations halve
    assert "gradient" not in advice["batch"].detail and "more, smaller batches" in advice["batch"].detail


def test_a_request_that_fits_only_a_large_tier_names_the_batch_a_smaller_one_holds() -> None:
    """`memory resnet50 --mode train --batch 512` said "fits: H100" and nothing else: the seeds' next question is
    what batch a 24 GiB GPU would hold (gradient accumulation keeps the global batch)."""
    stats = ModelStats(param_count=10**8, param_tensors=2, largest_param_numel=10**7, float_buffer_numel=0,
                       other_buffer_bytes=0, linear_weight_numel=9 * 10**7, linear_out_features=10**4)  # fmt: skip
    tags = {"input": 0, "activations": 8 * 10**9, "logits": 0, "backward": 0, "gradients": 0}
    trace = TraceResult("infer", saved_bytes=0, saved_count=0, peak_live_bytes=8 * 10**9, peak_by_tag=tags,
                        logits_bytes=0, gradient_bytes=0)  # fmt: skip
    inp = MemoryInputs("m", "infer", "fp32", "cuda", 64, 16, None, "adamw", False, stats, trace, _NO_CUDA_OVERHEAD)
    total = sum(assemble(inp)[0].values())
    small, mid, big = GpuTier(total / 4 / GIB, ("small",)), GpuTier(total / 2 / GIB, ("mid",)), GpuTier(64, ("big",))
    [at_mid, at_small] = smaller_tier_batches(inp, [small, mid, big])
    assert (at_mid.tier, at_small.tier) == (mid.label, small.label) and at_mid.fits and at_small.fits
    # activations are 8 GB of the ~8.4 GB total: about 0.9 x 1/2 and 0.9 x 1/4 of the 64 samples fit
    assert 25 <= int(at_mid.detail.split()[1]) <= 29 and 11 <= int(at_small.detail.split()[1]) <= 14
    assert at_small.total_bytes <= 0.9 * small.memory_gib * GIB
    assert smaller_tier_batches(inp, [big]) == []  # the smallest tier already: nothing to step down to
    assert smaller_tier_batches(replace(inp, device="cpu"), [small, big]) == []


def test_a_tier_given_by_size_alone_is_labelled_once() -> None:
    from rightsize.estimate.memory_tiers import parse_tiers

    assert [t.label for t in parse_tiers("8,16")] == ["8 GiB GPU", "16 GiB GPU"]  # had been "16 GiB GPU (16 GiB)"


def test_the_fused_attention_note_comes_only_with_attention() -> None:
    """`memory` of a pure MLP printed "fused attention assumed (FlashAttention ...)": it has no attention."""
    from rightsize.estimate.memory_trace import trace_memory
    from rightsize.models.zoo import get_entry

    notes = {name: trace_memory(get_entry(name), mode="infer", batch_size=2, target="cuda", tiny=True)[1].notes
             for name in ("distilbert", "resnet50")}  # fmt: skip
    assert any("fused attention assumed" in n for n in notes["distilbert"])
    assert not any("fused attention" in n for n in notes["resnet50"])


def test_an_estimate_serialises_as_memory_json_prints_it() -> None:
    """``MemoryEstimate.to_dict`` / ``to_json``, for notebooks (only ``rightsize memory --json`` had serialised it)."""
    import json

    est = estimate_memory("distilbert", mode="train", batch_size=2, **TINY_CPU)  # type: ignore[arg-type]
    data = json.loads(est.to_json())
    assert data == est.to_dict() and data["total_bytes"] == est.total_bytes > 0
    assert sum(data["breakdown"].values()) == est.total_bytes and data["tier"] == est.tier
