"""What to change when nothing fits: each option with the total it leads to.

Options are single changes from the request (smaller batch, AMP, activation checkpointing, 8-bit
optimizer states, int8/int4 weights) plus sharding over N GPUs of the largest tier. Batch changes
scale the traced batch-dependent bytes linearly; AMP is traced again; checkpointing uses the
per-block saved bytes recorded in the trace.
"""

from __future__ import annotations

from dataclasses import replace

from rightsize.estimate.memory import (
    GIB,
    MemoryInputs,
    assemble,
    compute_dtype,
    scaled_trace,
)
from rightsize.estimate.memory_tiers import Advice, GpuTier, pick_tier, tier_fits
from rightsize.estimate.memory_trace import ModelStats
from rightsize.hf_config import splits_heads

__all__ = ["advise_memory", "smaller_tier_batches"]

MAX_SHARDS = 1024  # ZeRO-3 / FSDP: any GPU count, over as many instances as it takes
TP_DEGREES = (2, 4, 8)  # tensor parallelism stays inside one instance: the GPU counts instances come in


def _total(breakdown: dict[str, int]) -> int:
    return sum(breakdown.values())


def _advice(action: str, detail: str, total: int, tiers: list[GpuTier], gpus: int = 1) -> Advice:
    tier = pick_tier(total, tiers)
    return Advice(action, detail, total, round(total / GIB, 3), tier.label if tier else None, tier is not None, gpus)


def _smaller_batch(inp: MemoryInputs, tiers: list[GpuTier], cap_gib: float) -> Advice | None:
    """The largest batch below the request that fits the largest tier (batch bytes scale linearly)."""

    def total_at(b: int) -> int:
        scaled = replace(inp, batch_size=b, trace=scaled_trace(inp.trace, b / inp.batch_size))
        return _total(assemble(scaled)[0])

    if inp.batch_size <= 1 or not tier_fits(total_at(1), cap_gib):
        return None
    lo, hi = 1, inp.batch_size - 1  # invariant: lo fits
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if tier_fits(total_at(mid), cap_gib) else (lo, mid - 1)
    keeps = "gradient accumulation keeps the global batch" if inp.mode == "train" else "more, smaller batches"
    return _advice("batch", f"batch {lo} instead of {inp.batch_size} ({keeps})", total_at(lo), tiers)


def _amp(inp: MemoryInputs, tiers: list[GpuTier], tiny: bool) -> Advice:
    from rightsize.estimate.memory_trace import trace_memory
    from rightsize.models import resolve_model

    _, trace = trace_memory(
        resolve_model(inp.model, inp.shape, inp.vocab), mode="train", batch_size=inp.batch_size, seq_len=inp.seq_len,
        image_size=inp.image_size, compute="bf16", amp=True, target=inp.device, tiny=tiny,
    )  # fmt: skip
    total = _total(assemble(replace(inp, precision="bf16", trace=trace))[0])
    return _advice("amp", "mixed precision: --precision bf16 (fp16 with GradScaler on T4/V100)", total, tiers)


def _checkpointed(inp: MemoryInputs) -> MemoryInputs | None:
    """``inp`` with per-block activation checkpointing: each block keeps its input and one block is
    recomputed at a time, so saved bytes drop by sum(block saved) - sum(block inputs) - max(block saved)."""
    saved, inputs = inp.trace.block_saved_bytes, inp.trace.block_input_bytes
    if inp.mode != "train" or len(saved) < 2:
        return None
    gain = max(0, sum(saved) - sum(inputs) - max(saved))
    tags = dict(inp.trace.peak_by_tag)
    tags["activations"] = max(0, tags["activations"] - gain)
    return replace(inp, trace=replace(inp.trace, peak_by_tag=tags, peak_live_bytes=sum(tags.values())))


def _checkpointing(inp: MemoryInputs, tiers: list[GpuTier]) -> Advice | None:
    ckpt = _checkpointed(inp)
    if ckpt is None:
        return None
    blocks = len(inp.trace.block_saved_bytes)
    detail = f"activation checkpointing of each of the {blocks} repeated blocks (~30% more compute)"
    return _advice("checkpointing", detail, _total(assemble(ckpt)[0]), tiers)


def _quantized(inp: MemoryInputs, precision: str, tiers: list[GpuTier]) -> Advice:
    """int8 / int4 weights; activations rescaled when their dtype changes (fp32 -> fp16 on CUDA)."""
    old = compute_dtype(inp.mode, inp.precision, inp.device)[0]
    new = compute_dtype(inp.mode, precision, inp.device)[0]
    ratio = {"fp32": 4, "fp16": 2, "bf16": 2}[new] / {"fp32": 4, "fp16": 2, "bf16": 2}[old]
    trace = scaled_trace(inp.trace, ratio) if ratio != 1 else inp.trace
    total = _total(assemble(replace(inp, precision=precision, trace=trace))[0])
    if precision in ("fp16", "bf16"):  # weights and activations both halve
        return _advice(precision, f"half precision: --precision {precision} (weights and activations)", total, tiers)
    lib = "bitsandbytes LLM.int8()" if precision == "int8" else "GPTQ/AWQ, groups of 128"
    return _advice(precision, f"{precision} weights (--precision {precision}; {lib})", total, tiers)


def _fused(inp: MemoryInputs, tiers: list[GpuTier]) -> Advice | None:
    if inp.fused or inp.optimizer != "adamw":
        return None
    total = _total(assemble(replace(inp, fused=True))[0])
    return _advice("fused", "fused optimizer step: AdamW(fused=True) needs no params-size temporary", total, tiers)


def _optimizer_8bit(inp: MemoryInputs, tiers: list[GpuTier]) -> Advice:
    total = _total(assemble(replace(inp, optimizer_state_bytes_per_param=2))[0])
    return _advice("optimizer_8bit", "8-bit AdamW states, 2 B/param (bitsandbytes AdamW8bit)", total, tiers)


def _splits(stats: ModelStats, n: int) -> bool:
    """Whether tensor parallelism over ``n`` GPUs splits a model with these heads as vLLM does
    (``hf_config.splits_heads``); unknown heads pass."""
    return not stats.heads or splits_heads(stats.heads, stats.kv_heads or stats.heads, n)


def _shard(inp: MemoryInputs, largest: GpuTier) -> Advice | None:
    """Training: ZeRO-3 / FSDP full sharding divides weights, gradients, optimizer states and the step
    transient by N; the micro-batch's activations stay per GPU, so when they alone do not fit,
    activation checkpointing is added. Inference: tensor parallelism divides weights and the KV cache
    by N (activations are kept whole: conservative). Collective buffers are not counted."""
    ckpt = _checkpointed(inp)
    counts = range(2, MAX_SHARDS + 1) if inp.mode == "train" else [n for n in TP_DEGREES if _splits(inp.stats, n)]
    for base, extra in ((inp, ""), *(((ckpt, " + activation checkpointing"),) if ckpt else ())):
        for n in counts:
            total = _total(assemble(replace(base, shards=n))[0])
            if tier_fits(total, largest.memory_gib):
                if inp.mode == "train":
                    how = f"ZeRO-3 / FSDP full sharding over {n} x {largest.label}{extra}: weights, gradients and "
                    how += f"optimizer states / {n} per GPU"
                else:
                    how = f"tensor parallelism over {n} x {largest.label}: weights and KV cache / {n} per GPU"
                return _advice("shard", how, total, [largest], gpus=n)
    return None


def smaller_tier_batches(inp: MemoryInputs, tiers: list[GpuTier]) -> list[Advice]:
    """When the request fits, but not the smallest tier: the largest batch that fits each of the (up to) two next
    smaller tiers, e.g. ResNet-50 training at batch 512 needs an 80 GiB GPU where batch 212 fits the 22.49 GiB an
    A10G or L4 exposes. A CPU estimate has no tiers to step down."""
    chosen = pick_tier(_total(assemble(inp)[0]), tiers)
    if inp.device != "cuda" or chosen is None:
        return []
    below = sorted((t for t in tiers if t.memory_gib < chosen.memory_gib), key=lambda t: -t.memory_gib)[:2]
    out: list[Advice] = []
    for tier in below:
        a = _smaller_batch(inp, tiers, tier.memory_gib)
        if a is not None and all(a.detail != b.detail for b in out):
            out.append(a)
    return out


def advise_memory(inp: MemoryInputs, tiers: list[GpuTier], tiny: bool = False) -> list[Advice]:
    """Options that lower the total of ``inp``, each with its result; empty when ``tiers`` is empty."""
    if not tiers:
        return []
    largest = max(tiers, key=lambda t: t.memory_gib)
    options: list[Advice | None] = [_smaller_batch(inp, tiers, largest.memory_gib)]
    if inp.mode == "train":
        if inp.precision == "fp32":
            options.append(_amp(inp, tiers, tiny))
        options.append(_checkpointing(inp, tiers))
        if inp.optimizer == "adamw":
            options += [_fused(inp, tiers), _optimizer_8bit(inp, tiers)]
    else:
        half = ["bf16" if inp.device == "cpu" else "fp16"] if inp.precision == "fp32" else []  # a CPU runs bf16
        options += [
            _quantized(inp, p, tiers) for p in (*half, "int8", "int4") if p != inp.precision and inp.precision != "int4"
        ]
    if inp.device == "cuda":  # shard over the two largest tiers (e.g. 8 x 80 GB nodes are common)
        options += [_shard(inp, t) for t in sorted(tiers, key=lambda t: -t.memory_gib)[:2]]
    current = _total(assemble(inp)[0])
    return [a for a in options if a is not None and a.total_bytes < current]  # only what helps
