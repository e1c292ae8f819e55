"""Peak memory of a model for one request: trace it, account the peak, pick a tier, advise when none fits.

    est = estimate_memory("llama-7b", mode="infer", precision="fp16", batch_size=1, seq_len=2048)
    est.total_gib, est.tier, est.fits, est.breakdown

The accounting is ``estimate.memory`` (pure), the trace ``estimate.memory_trace`` (FakeTensorMode), the
advice ``estimate.memory_advice``; this module runs them in that order.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from rightsize.estimate.memory import (
    Device,
    MemoryEstimate,
    MemoryInputs,
    Mode,
    assumptions,
    build_estimate,
    check_request,
    compute_dtype,
)
from rightsize.estimate.memory_advice import advise_memory, smaller_tier_batches
from rightsize.estimate.memory_tiers import GpuTier, default_tiers

if TYPE_CHECKING:
    from rightsize.catalog.model import Catalog

__all__ = ["estimate_memory"]


def estimate_memory(
    model: str,
    *,
    mode: str = "infer",
    precision: str = "fp32",
    batch_size: int = 1,
    seq_len: int | None = None,
    image_size: int | None = None,
    optimizer: str = "adamw",
    fused: bool = False,
    device: str = "cuda",
    tiers: list[GpuTier] | None = None,
    catalog: Catalog | None = None,
    advise: bool = True,
    tiny: bool = False,
    shape: list[int] | None = None,
    vocab: int | None = None,
) -> MemoryEstimate:
    """Trace ``model`` under FakeTensorMode and account its peak memory; pick the smallest tier that
    fits with ``TIER_HEADROOM_FRACTION`` headroom; advise when none does. ``tiers`` default: the
    GPU memory tiers of ``catalog`` (the caller loads it; the built-in list without one) for cuda, this
    machine's RAM for cpu. A ``seq_len`` past a learned position table is a SpecError naming ``seq``, before
    tracing: the trace would account a model that cannot run (GPT-2 at 2048 tokens)."""
    from rightsize.estimate.memory_trace import trace_memory
    from rightsize.models import resolve_model

    entry = resolve_model(model, shape, vocab)
    check_request(entry, mode, precision, device, optimizer, batch_size, seq_len, image_size)
    if entry.kind == "tokens" and getattr(entry, "user_shape", None):  # the shape is the input: no seq_len ran (the
        seq_len = None  # JSON had said seq_len 128, the default, for --shape 16 --vocab 100)
    elif entry.kind == "tokens":
        seq_len = seq_len or entry.default_seq_len
        entry.check_seq_len(seq_len, tiny, "seq")
    elif entry.kind == "image":
        image_size = image_size or entry.default_image_size
    compute, amp = compute_dtype(mode, precision, device)
    mode_l, device_l = cast(Mode, mode), cast(Device, device)
    stats, trace = trace_memory(
        entry, mode=mode_l, batch_size=batch_size, seq_len=seq_len, image_size=image_size,
        compute=compute, amp=amp, target=device_l, tiny=tiny,
    )  # fmt: skip
    inp = MemoryInputs(
        model, mode_l, precision, device_l, batch_size, seq_len, image_size, optimizer, fused, stats, trace,
        shape=shape, vocab=vocab,
    )  # fmt: skip
    tier_source = "the given tier list"
    if tiers is None:
        tiers, tier_source = default_tiers(device, catalog, precision)
    est = build_estimate(inp, tiers)
    est.trace_s = round(trace.elapsed_s, 2)
    est.shape, est.vocab = shape, vocab
    est.assumptions = assumptions(inp, tier_source, tiny)
    if advise and not est.fits:
        est.advice = advise_memory(inp, tiers, tiny=tiny)
    elif advise:  # it fits: what a smaller, cheaper GPU would hold
        est.advice = smaller_tier_batches(inp, tiers)
    return est
