"""Trace a zoo model's memory under FakeTensorMode: real shapes, no real memory.

    stats, trace = trace_memory(get_entry("llama-7b"), mode="infer", batch_size=1, seq_len=2048,
                                compute="fp16", amp=False, target="cuda")

The model is built as fake tensors (a 13B model costs nothing), and its forward (and, for
training, ``loss(x, y).backward()``) runs under two observers:

1. ``SavedTensorTracker`` (saved_tensors_hooks): distinct storages autograd saves for backward,
   parameters excluded: the training activations that ``rightsize bench`` measures for real.
2. ``LiveTensorTracker`` (a TorchDispatchMode): every storage an op creates is counted live until its
   weakref dies; the maximum over the trace is the peak of non-parameter memory, split by tag
   (activations, logits + loss, backward transients, gradients).

On the fake CPU device the op dispatch is CPU's (same attention kernel choice as a real CPU run).
For a CUDA target, scaled_dot_product_attention is replaced by a fused-kernel stand-in that saves
what FlashAttention / memory-efficient attention save (q, k, v, out, fp32 logsumexp) and never
materialises the S×S score matrix (docs/sources.md `memory-accounting`: "SDPA/FlashAttention removes the 5as/h term").
"""

from __future__ import annotations

import contextlib
import functools
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from rightsize.errors import input_refused
from rightsize.measure.memory import LiveTensorTracker, SavedTensorTracker

if TYPE_CHECKING:
    import torch
    from torch import nn

    from rightsize.models.zoo import ZooEntry

__all__ = ["ModelStats", "TraceResult", "cpu_kernel_scratch_bytes", "trace_memory"]

Compute = Literal["fp32", "fp16", "bf16"]
Target = Literal["cpu", "cuda"]
TAGS = ("activations", "input", "logits", "backward", "gradients")  # the first is the starting phase


def _nbytes(t: Any) -> int:
    return int(t.numel() * t.element_size()) if hasattr(t, "element_size") else 0


def cpu_kernel_scratch_bytes(func: Any, args: Any, out: Any) -> int:
    """Bytes a CPU convolution holds inside the kernel besides its output: oneDNN reorders between
    PyTorch's NCHW layout and its own blocked one. Measured on the dev machine (torch 2.13, one conv per
    fresh process, peak RSS above the output, fp32 and bf16 alike; docs/planning.md "Memory"): a forward
    holds max(input, output) more (3x3 and 1x1, depthwise and dense, expanding and reducing), a backward
    holds grad_output + input more. Other ops measured at their outputs alone (linear, GELU, layer
    norm, CPU flash attention, batch norm, ReLU)."""
    name = getattr(func, "__name__", "")
    if name == "convolution.default":
        return max(_nbytes(args[0]), _nbytes(out))
    if name == "convolution_backward.default":
        return _nbytes(args[0]) + _nbytes(args[1])
    return 0


@dataclass(frozen=True)
class ModelStats:
    """Parameter facts that do not depend on dtype (element counts, not bytes)."""

    param_count: int
    param_tensors: int
    largest_param_numel: int
    float_buffer_numel: int  # cast with the model (BN running stats, RoPE inv_freq)
    other_buffer_bytes: int  # integer buffers (position ids) keep their dtype
    linear_weight_numel: int  # nn.Linear weights except the output head: what int8/int4 quantize
    linear_out_features: int  # their output rows (one int8 scale per row)
    kv_layers: int = 0  # decoder LMs: KV-cache geometry from the config; 0 otherwise
    kv_heads: int = 0
    head_dim: int = 0
    heads: int = 0  # decoder LMs: query heads (what tensor parallelism splits); 0 otherwise


@dataclass(frozen=True)
class TraceResult:
    """What one fake forward (+ backward) kept alive, in bytes."""

    mode: str  # "train" | "infer"
    saved_bytes: int  # distinct storages saved for backward (0 for inference)
    saved_count: int
    peak_live_bytes: int  # max over the trace of live non-parameter bytes
    peak_by_tag: dict[str, int]  # live bytes per tag at that moment (sums to peak_live_bytes)
    logits_bytes: int  # the model output's storage
    gradient_bytes: int  # parameter .grad storages after backward (0 for inference)
    block_saved_bytes: tuple[int, ...] = ()  # per repeated block (the best checkpointing unit)
    block_input_bytes: tuple[int, ...] = ()
    elapsed_s: float = 0.0
    notes: tuple[str, ...] = field(default_factory=tuple)


def _key(t: torch.Tensor) -> int:
    return int(t.untyped_storage()._cdata)


def _tensors(tree: Any) -> list[torch.Tensor]:
    import torch
    from torch.utils._pytree import tree_leaves

    return [t for t in tree_leaves(tree) if isinstance(t, torch.Tensor)]


@functools.cache
def _fused_attention_fn() -> Any:
    """A stand-in for F.scaled_dot_product_attention with a fused CUDA kernel's memory behaviour."""
    import torch

    class _FusedAttention(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
            # The kernels write [B, L, H, Dv] and return the [B, H, L, Dv] view, so the caller's
            # transpose(1, 2).contiguous() back to [B, L, H*Dv] is free (no copy).
            b, h, seq, _ = q.shape
            out = q.new_empty((b, seq, h, v.shape[-1])).transpose(1, 2)
            lse = q.new_empty(q.shape[:-1], dtype=torch.float32)  # [B, H, L] logsumexp, fp32
            ctx.save_for_backward(q, k, v, out, lse)
            return out

        @staticmethod
        def backward(ctx: Any, grad_out: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
            q, k, v, _, _ = ctx.saved_tensors
            return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)

    def sdpa(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        sdpa.calls += 1  # type: ignore[attr-defined]
        return _FusedAttention.apply(query, key, value)

    sdpa.calls = 0  # type: ignore[attr-defined]  # the estimate names its fused-attention assumption only if used
    return sdpa


# Calls the last trace made to scaled_dot_product_attention (read after it: one trace at a time per process).
_ATTENTION_CALLS = [0]


@contextlib.contextmanager
def _attention_for(target: Target) -> Iterator[None]:
    import torch.nn.functional as F

    original = F.scaled_dot_product_attention
    if target == "cuda":
        F.scaled_dot_product_attention = fused = _fused_attention_fn()
        fused.calls = 0  # the stand-in is built once per process: count this trace's calls only
    try:
        yield
    finally:
        _ATTENTION_CALLS[0] = getattr(F.scaled_dot_product_attention, "calls", 0)
        F.scaled_dot_product_attention = original


@contextlib.contextmanager
def _default_dtype(dtype: torch.dtype) -> Iterator[None]:
    import torch

    before = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(before)


def _model_stats(model: nn.Module) -> ModelStats:
    from torch import nn

    params = list(model.parameters())
    weights = int(getattr(getattr(model, "inner", model), "initializer_count", 0))
    if not params and weights:  # an ONNX Runtime session: its graph's weights (fp32 initializers)
        return ModelStats(weights, 1, weights, 0, 0, 0, 0)
    linears = [m for m in model.modules() if isinstance(m, nn.Linear)]
    head = _output_head(model)
    head_weight = id(head.weight) if head is not None else None  # the output head stays unquantized
    quantized = {id(m.weight): m for m in linears if id(m.weight) != head_weight}  # tied weights appear once
    kv = _kv_geometry(model)
    return ModelStats(
        param_count=sum(p.numel() for p in params),
        param_tensors=len(params),
        largest_param_numel=max((p.numel() for p in params), default=0),
        float_buffer_numel=sum(b.numel() for b in model.buffers() if b.is_floating_point()),
        other_buffer_bytes=sum(b.numel() * b.element_size() for b in model.buffers() if not b.is_floating_point()),
        linear_weight_numel=sum(m.weight.numel() for m in quantized.values()),
        linear_out_features=sum(m.out_features for m in quantized.values()),
        kv_layers=kv[0],
        kv_heads=kv[1],
        head_dim=kv[2],
        heads=kv[3],
    )


def _output_head(model: nn.Module) -> nn.Module | None:
    """The last nn.Linear: the classifier or LM head."""
    from torch import nn

    linears = [m for m in model.modules() if isinstance(m, nn.Linear)]
    return linears[-1] if linears else None


def _kv_geometry(model: nn.Module) -> tuple[int, int, int, int]:
    """(layers, kv_heads, head_dim, heads) for decoder LMs (Llama, GPT-2 configs); zeros otherwise."""
    inner = getattr(model, "inner", model)
    cfg = getattr(inner, "config", None)
    if cfg is None or not getattr(model, "lm", False):
        return 0, 0, 0, 0

    def field(*names: str) -> int:
        return next((int(v) for n in names if (v := getattr(cfg, n, None))), 0)

    layers = field("num_hidden_layers", "n_layer")
    heads = field("num_attention_heads", "n_head")
    kv_heads = field("num_key_value_heads") or heads
    head_dim = field("head_dim") or (field("hidden_size", "n_embd") // heads if heads else 0)
    return layers, kv_heads, head_dim, heads


def _repeated_block_classes(model: nn.Module) -> dict[type, list[nn.Module]]:
    """Classes with >= 2 instances directly inside a ModuleList / Sequential: checkpointing candidates."""
    from torch import nn

    containers = (nn.ModuleList, nn.Sequential)
    found: dict[type, list[nn.Module]] = {}
    for mod in model.modules():
        if isinstance(mod, containers):
            for child in mod.children():
                if not isinstance(child, containers) and any(True for _ in child.parameters()):
                    found.setdefault(type(child), []).append(child)
    return {cls: mods for cls, mods in found.items() if len(mods) >= 2}


@contextlib.contextmanager
def _block_probes(model: nn.Module, saved: SavedTensorTracker) -> Iterator[dict[type, list[tuple[int, int]]]]:
    """Per candidate block class: [(saved bytes inside the block, bytes of its first tensor input)]."""
    stats: dict[type, list[tuple[int, int]]] = {}
    handles = []
    for cls, mods in _repeated_block_classes(model).items():
        rows = stats.setdefault(cls, [])
        for mod in mods:
            start: list[tuple[int, int]] = []

            def pre(_m: Any, args: Any, kwargs: Any, start: list[tuple[int, int]] = start) -> None:
                inputs = _tensors((args, kwargs))
                start.append((saved.saved_bytes, int(inputs[0].untyped_storage().nbytes()) if inputs else 0))

            def post(
                _m: Any, _a: Any, _k: Any, _out: Any, rows: list[tuple[int, int]] = rows, start: Any = start
            ) -> None:
                if start:
                    before, in_bytes = start.pop()
                    rows.append((saved.saved_bytes - before, in_bytes))

            handles.append(mod.register_forward_pre_hook(pre, with_kwargs=True))
            handles.append(mod.register_forward_hook(post, with_kwargs=True))
    try:
        yield stats
    finally:
        for h in handles:
            h.remove()


def _best_checkpoint_blocks(stats: dict[type, list[tuple[int, int]]]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The block class whose per-block checkpointing saves most: sum(saved) - sum(inputs) - max(saved)."""
    best: tuple[int, list[tuple[int, int]]] = (0, [])
    for rows in stats.values():
        if len(rows) < 2:
            continue
        gain = sum(s for s, _ in rows) - sum(i for _, i in rows) - max(s for s, _ in rows)
        if gain > best[0]:
            best = (gain, rows)
    return tuple(s for s, _ in best[1]), tuple(i for _, i in best[1])


def _fake_inputs(
    entry: ZooEntry, batch_size: int, seq_len: int | None, image_size: int | None, tiny: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """Zero-filled x [B, ...] and labels y; call inside FakeTensorMode."""
    import torch

    shape = (batch_size, *entry.sample_shape(seq_len, image_size, tiny))
    x = torch.zeros(shape, dtype=torch.long) if entry.kind == "tokens" else torch.zeros(shape)
    return x, x if entry.lm else torch.zeros(batch_size, dtype=torch.long)


def trace_memory(
    entry: ZooEntry,
    *,
    mode: Literal["train", "infer"],
    batch_size: int,
    seq_len: int | None = None,
    image_size: int | None = None,
    compute: Compute = "fp32",
    amp: bool = False,
    target: Target = "cpu",
    tiny: bool = False,
) -> tuple[ModelStats, TraceResult]:
    """Build ``entry`` from fake tensors and trace one forward (+ backward when training).

    ``compute``: dtype of activations. Inference casts the model to it; training keeps fp32
    parameters and, with ``amp``, runs the forward under autocast(``compute``).
    """
    t0 = time.perf_counter()
    # FakeTensorMode logs the traceback of an op it cannot run before raising; the error below says it in one line.
    fake_log = logging.getLogger("torch._subclasses.fake_tensor")
    quiet = _DropErrors()
    fake_log.addFilter(quiet)  # a filter: torch re-applies its own log levels when it sets its logging up
    try:
        stats, result = _trace(entry, mode, batch_size, seq_len, image_size, compute, amp, target, tiny, fake=True)
        notes: tuple[str, ...] = ()
    except Exception as exc:
        from rightsize.models.zoo import ZOO

        if entry.name in ZOO:
            raise input_refused(entry.name, seq_len, image_size, exc) from None
        # A user's model FakeTensorMode cannot run (TorchScript storages, data-dependent branches, another
        # engine): run it for real on this CPU instead; it is the user's own model, so it fits here.
        try:
            stats, result = _trace(entry, mode, batch_size, seq_len, image_size, compute, amp, "cpu", tiny, fake=False)
        except (RuntimeError, ValueError, IndexError) as real:
            # a model whose input is the shape given (not --seq/--image) is told about its shape
            shape = entry.sample_shape(seq_len, image_size, tiny) if getattr(entry, "fmt", None) in (
                "factory", "torchscript", "export", "onnx") else None  # fmt: skip
            cause = _plain_failure(entry, batch_size, seq_len, image_size, tiny) if isinstance(real, RuntimeError) and (
                getattr(entry, "fmt", None) == "torchscript") else None  # fmt: skip
            raise input_refused(entry.name, seq_len, image_size, cause or real, shape) from None
        notes = (f"traced with real tensors on this CPU (FakeTensorMode could not run it: {type(exc).__name__})",)
    finally:
        fake_log.removeFilter(quiet)
    if target == "cuda" and _ATTENTION_CALLS[0]:  # an MLP or a CNN has no attention to assume anything of
        notes += ("fused attention assumed (FlashAttention / memory-efficient SDPA)",)
    return stats, TraceResult(**result, elapsed_s=time.perf_counter() - t0, notes=notes)


def _plain_failure(
    entry: ZooEntry, batch_size: int, seq_len: int | None, image_size: int | None, tiny: bool
) -> BaseException | None:
    """The error one forward raises with no dispatch mode on: under one, the TorchScript interpreter's message ends in
    an empty "RuntimeError: " where its cause (the size mismatch) was."""
    import torch

    try:
        with torch.no_grad():
            entry.build(tiny).eval()(_fake_inputs(entry, batch_size, seq_len, image_size, tiny)[0])
    except Exception as exc:
        return exc
    return None


class _DropErrors(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno < logging.ERROR


def _trace(
    entry: ZooEntry, mode: str, batch_size: int, seq_len: int | None, image_size: int | None, compute: Compute,
    amp: bool, target: Target, tiny: bool, *, fake: bool,
) -> tuple[ModelStats, dict[str, Any]]:  # fmt: skip
    import contextlib

    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    dtype = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[compute]
    model_dtype = dtype if mode == "infer" else torch.float32
    tensors = FakeTensorMode() if fake else contextlib.nullcontext()
    with tensors, _default_dtype(model_dtype), _attention_for(target):
        model = entry.build(tiny)
        if mode == "infer" and not fake:  # a loaded TorchScript or torch.export file (traced for real) keeps its
            model = model.to(model_dtype)  # saved dtype: a bf16 input failed in the TorchScript interpreter
        stats = _model_stats(model)
        x, y = _fake_inputs(entry, batch_size, seq_len, image_size, tiny)
        inner_cfg = getattr(getattr(model, "inner", None), "config", None)
        if mode == "infer" and inner_cfg is not None and hasattr(inner_cfg, "use_cache"):
            inner_cfg.use_cache = False  # the KV cache is accounted by formula, not traced
        live = LiveTensorTracker(TAGS, scratch=cpu_kernel_scratch_bytes if target == "cpu" else None)
        head = _output_head(model)
        if head is not None:  # allocations from the output head on are logits (and the loss on them)
            head.register_forward_pre_hook(lambda *_: setattr(live, "phase", "logits"))
        for t in (x, y) if mode == "train" else (x,):  # the batch itself is device memory too
            live.track(t, "input")
        if mode == "infer":
            result = _trace_infer(model, x, live)
        else:
            result = _trace_train(model, x, y, live, dtype if amp else None)
    return stats, result


def _trace_infer(model: nn.Module, x: torch.Tensor, live: LiveTensorTracker) -> dict[str, Any]:
    import torch

    model.eval()
    with torch.no_grad(), live:
        out = model(x)
        live.retag(out, "logits")
    by_tag = dict(live.peak_by_tag)
    graph = getattr(getattr(model, "inner", model), "graph_activation_bytes", None)
    if callable(graph):  # another engine (ONNX Runtime): the tracker cannot see inside; the graph can
        by_tag["activations"] = by_tag.get("activations", 0) + int(graph(tuple(x.shape)))
    return {
        "mode": "infer", "saved_bytes": 0, "saved_count": 0, "peak_live_bytes": sum(by_tag.values()),
        "peak_by_tag": by_tag, "logits_bytes": int(out.untyped_storage().nbytes()), "gradient_bytes": 0,
    }  # fmt: skip


def _trace_train(
    model: nn.Module, x: torch.Tensor, y: torch.Tensor, live: LiveTensorTracker, autocast_dtype: torch.dtype | None
) -> dict[str, Any]:
    import torch

    model.train()
    logits_bytes: list[int] = []

    forward = model.forward

    def forward_marking_logits(*args: Any, **kwargs: Any) -> Any:
        # ZooModel.loss calls self.forward directly (no module hooks fire), so wrap the method.
        out = forward(*args, **kwargs)
        live.retag(out, "logits")
        logits_bytes.append(int(out.untyped_storage().nbytes()))
        live.phase = "logits"  # the loss computation (fp32 upcast, log-softmax) follows
        return out

    def mark_grad(p: torch.Tensor) -> None:
        if p.grad is not None:
            live.retag(p.grad, "gradients")

    model.forward = forward_marking_logits
    handles = [p.register_post_accumulate_grad_hook(mark_grad) for p in model.parameters() if p.requires_grad]
    autocast = torch.autocast("cpu", dtype=autocast_dtype) if autocast_dtype is not None else contextlib.nullcontext()
    saved = SavedTensorTracker(model)
    try:
        with live, _block_probes(model, saved) as blocks:
            with saved, autocast:
                loss = model.loss(x, y)  # type: ignore[operator]
            live.phase = "backward"
            loss.backward()
            del loss
    finally:
        del model.forward  # back to the class's method
        for h in handles:
            h.remove()
    block_saved, block_inputs = _best_checkpoint_blocks(blocks)
    grads = {_key(p.grad): int(p.grad.untyped_storage().nbytes()) for p in model.parameters() if p.grad is not None}
    return {
        "mode": "train", "saved_bytes": saved.saved_bytes, "saved_count": saved.count,
        "peak_live_bytes": live.peak_bytes, "peak_by_tag": dict(live.peak_by_tag),
        "logits_bytes": logits_bytes[0] if logits_bytes else 0, "gradient_bytes": sum(grads.values()),
        "block_saved_bytes": block_saved, "block_input_bytes": block_inputs,
    }  # fmt: skip
