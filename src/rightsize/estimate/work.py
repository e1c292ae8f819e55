"""Trace a model's work op by op, without running it: the input of the CPU and GPU time models.

    work = trace_work(get_entry("bert-base"), mode="inference", seq_len=128)   # WorkProfile

Under FakeTensorMode (real shapes, no memory, no compute) every aten op of one forward (training:
forward + loss + backward) is recorded with its FLOPs (``torch.utils.flop_counter``'s formulas;
attention by 4·B·H·L·S·D per pass), the bytes it reads and writes (its tensor inputs and outputs,
fp32), and its class: ``gemm`` (mm/addmm/bmm/linear), ``conv``, ``attention`` (scaled dot-product),
``memory`` (element-wise, normalisation, reductions, copies: bound by bytes) or ``host`` (views and
allocations: dispatcher work, no device kernel). The trace runs at batches 2 and 3 (where every
batch dispatches the same op sequence); FLOPs and bytes of these models are exactly linear in the
batch, so each op keeps its values on that line at batches 1 and 2 and is evaluated at any batch.
Identical ops are merged with a count (a 12-layer encoder has ~20 distinct ops).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Literal

from rightsize.profile import WorkProfile

if TYPE_CHECKING:
    import torch

    from rightsize.models.zoo import ZooEntry

__all__ = ["classify_op", "second_pass_bytes", "trace_work", "trace_works"]

_GEMM = {"mm", "addmm", "bmm", "baddbmm", "_scaled_mm"}
_CONV = {"convolution", "_convolution", "convolution_backward", "cudnn_convolution", "convolution_overrideable",
         "_slow_conv2d_forward", "mkldnn_convolution"}  # fmt: skip
_HOST = {"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "_local_scalar_dense",
         "lift_fresh", "detach", "alias", "set_", "_unsafe_view"}  # fmt: skip
# Metadata queries the dispatcher answers without a kernel or measurable host work: not recorded.
_IGNORE = {"device", "dim", "size", "stride", "numel", "is_contiguous", "sym_size", "sym_stride", "sym_numel",
           "sym_storage_offset", "is_same_size", "_has_compatible_shallow_copy_type"}  # fmt: skip


def classify_op(name: str, is_view: bool) -> str:
    """One of OP_CLASSES for an aten op name (the overload packet's name, e.g. "addmm")."""
    if is_view or name in _HOST:
        return "host"
    if name in _GEMM:
        return "gemm"
    if name in _CONV:
        return "conv"
    if "scaled_dot_product" in name or "flash_attention" in name or "efficient_attention" in name:
        return "attention"
    return "memory"


def _attention_flops(name: str, args: tuple[Any, ...]) -> float:
    """4·B·H·L·S·D for Q·Kᵀ and P·V (forward); backward recomputes and differentiates both: 2.5x."""
    q, k = args[0], args[1]
    if name.endswith("_backward"):  # (grad_out, q, k, v, ...)
        q, k = args[1], args[2]
    *bh, lq, d = q.shape
    s = k.shape[-2]
    n = 1
    for x in bh:
        n *= int(x)
    f = 4.0 * n * int(lq) * int(s) * int(d)
    return f * 2.5 if name.endswith("_backward") else f


# Normalisations that need a statistic of the whole batch (or row) before they can write one output element
# read their input again in a second pass: the trace's "inputs + outputs" counts one. PyTorch's CUDA batch norm
# in training runs batch_norm_stats (reads x) then batch_norm_elemt (reads x, writes y); its backward runs
# batch_norm_backward_reduce (reads dy, x) then batch_norm_backward_elemt (reads dy, x, writes dx); layer norm's
# backward computes dx in one kernel and the weight and bias gradients in another that reads dy and x again
# (github.com/pytorch/pytorch, aten/src/ATen/native/cuda/Normalization.cu and layer_norm_kernel.cu, read
# 2026-11-26). On a GPU a channel of a training batch is megabytes: the second read comes from DRAM. The CPU time
# model reads the same trace: its batch norm makes the same two passes over a channel, but its layer norm backward
# works row by row (a 768-float row stays in L1), so there the LN term over-counts, ~2% of a BERT step's bytes.
_BN_FORWARD = {"native_batch_norm", "_native_batch_norm_legit", "_native_batch_norm_legit_functional",
               "cudnn_batch_norm"}  # fmt: skip
_BN_BACKWARD = {"native_batch_norm_backward", "cudnn_batch_norm_backward"}


def second_pass_bytes(name: str, args: tuple[Any, ...], nbytes: Any) -> float:
    """Bytes a normalisation reads again in its second pass (0 for every other op, and for batch norm in eval
    mode, which uses its running statistics and needs one pass)."""
    if name in _BN_FORWARD:
        training = next((a for a in args[3:] if isinstance(a, bool)), False)
        return float(nbytes(args[0])) if training else 0.0
    if name in _BN_BACKWARD:
        training = next((a for a in args[3:] if isinstance(a, bool)), True)
        return float(nbytes(args[0]) + nbytes(args[1])) if training else 0.0
    if name == "native_layer_norm_backward":
        mask = args[-1]
        return float(nbytes(args[0]) + nbytes(args[1])) if (mask[1] or mask[2]) else 0.0
    return 0.0


def _conv_backward_flops(args: tuple[Any, ...]) -> float:
    """Grad-input and grad-weight each cost a forward convolution: 2·|grad_out|·|w[1:]| (groups-aware,
    as w[1] = in_channels / groups); ``args = (grad_out, input, weight, ..., output_mask)``."""
    grad_out, weight, mask = args[0], args[2], args[-1]
    per = 2.0 * float(grad_out.numel())
    for d in weight.shape[1:]:
        per *= int(d)
    return per * sum(1 for m in (mask[0], mask[1]) if m)


class _OpRecorder:
    """A TorchDispatchMode that records (class, FLOPs, bytes) per dispatched aten op."""

    def __init__(self) -> None:
        self.ops: list[tuple[str, float, float]] = []

    def mode(self) -> Any:
        import torch
        from torch.utils._python_dispatch import TorchDispatchMode
        from torch.utils._pytree import tree_leaves
        from torch.utils.flop_counter import flop_registry

        rec = self

        def nbytes(tree: Any) -> float:
            """Bytes of the distinct tensors in ``tree``: an expanded or broadcast view (stride 0) moves
            only its storage, never its logical size (GPT-2's tied LM head is an expanded weight)."""
            seen: set[int] = set()
            total = 0.0
            for t in tree_leaves(tree):
                if isinstance(t, torch.Tensor) and id(t) not in seen:
                    seen.add(id(t))
                    logical = float(t.numel() * t.element_size())
                    try:
                        total += min(logical, float(t.untyped_storage().nbytes()))
                    except (RuntimeError, NotImplementedError):
                        total += logical
            return total

        class Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
                kwargs = kwargs or {}
                out = func(*args, **kwargs)
                packet = func._overloadpacket
                name = packet.__name__
                if name in _IGNORE:
                    return out
                cls = classify_op(name, bool(getattr(func, "is_view", False)))
                flops = 0.0
                if cls == "attention":
                    flops = _attention_flops(name, tuple(args))
                elif name == "convolution_backward":
                    flops = _conv_backward_flops(tuple(args))
                elif packet in flop_registry:
                    flops = float(flop_registry[packet](*args, **kwargs, out_val=out))
                moved = 0.0 if cls == "host" else nbytes(args) + nbytes(kwargs) + nbytes(out)
                moved += second_pass_bytes(name, tuple(args), nbytes)
                rec.ops.append((cls, flops, moved))
                return out

        return Mode()


def _fused_attention(rec: _OpRecorder) -> Any:
    """F.scaled_dot_product_attention as one fused kernel (FlashAttention-style: the L×S scores never
    reach memory), recorded as one ``attention`` op forward and one backward. PyTorch picks such kernels
    on GPUs (and CPUs, for inference); the unfused math path would count the scores' traffic instead."""
    import torch

    def nb(*ts: torch.Tensor) -> float:
        return float(sum(t.numel() * t.element_size() for t in ts))

    class _Fused(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
            out = q.new_empty((*q.shape[:-1], v.shape[-1]))
            rec.ops.append(("attention", _attention_flops("sdpa", (q, k)), nb(q, k, v, out)))
            ctx.save_for_backward(q, k, v)
            return out

        @staticmethod
        def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
            q, k, v = ctx.saved_tensors
            rec.ops.append(("attention", 2.5 * _attention_flops("sdpa", (q, k)), 2 * nb(q, k, v, grad)))
            return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)

    def sdpa(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        return _Fused.apply(query, key, value)

    return sdpa


def _trace_once(
    entry: ZooEntry, mode: str, batch: int, seq_len: int | None, image_size: int | None, tiny: bool
) -> tuple[list[tuple[str, float, float]], int, int]:
    import torch.nn.functional as F
    from torch._subclasses.fake_tensor import FakeTensorMode

    rec = _OpRecorder()
    original = F.scaled_dot_product_attention
    F.scaled_dot_product_attention = _fused_attention(rec)
    try:
        with FakeTensorMode():
            return _run(entry, mode, batch, seq_len, image_size, tiny, rec)
    finally:
        F.scaled_dot_product_attention = original


def _run(
    entry: ZooEntry, mode: str, batch: int, seq_len: int | None, image_size: int | None, tiny: bool, rec: _OpRecorder
) -> tuple[list[tuple[str, float, float]], int, int]:
    import torch

    from rightsize.estimate.memory_trace import _fake_inputs

    model = entry.build(tiny)
    params = [p for p in model.parameters()]
    n_params = sum(int(p.numel()) for p in params)
    x, y = _fake_inputs(entry, batch, seq_len, image_size, tiny)
    inner_cfg = getattr(getattr(model, "inner", None), "config", None)
    if inner_cfg is not None and hasattr(inner_cfg, "use_cache"):
        inner_cfg.use_cache = False
    if mode == "training":
        model.train()
        with rec.mode():
            loss = model.loss(x, y)  # type: ignore[operator]
            loss.backward()
    else:
        model.eval()
        with torch.no_grad(), rec.mode():
            model(x)
    return rec.ops, n_params, len(params)


def _pair(
    a: list[tuple[str, float, float]], b: list[tuple[str, float, float]]
) -> list[tuple[tuple[str, float, float], tuple[str, float, float]]]:
    """Pair the ops of two traces one by one (aligned by class where the sequences differ); an op with no
    partner is paired with itself scaled by 3/2 (linear in the batch from 2 to 3)."""
    if len(a) == len(b) and all(x[0] == y[0] for x, y in zip(a, b, strict=True)):
        return list(zip(a, b, strict=True))
    import difflib

    out = []
    sm = difflib.SequenceMatcher(a=[x[0] for x in a], b=[y[0] for y in b], autojunk=False)
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag == "equal":
            out += list(zip(a[i1:i2], b[j1:j2], strict=True))
        else:
            out += [(x, (x[0], x[1] * 1.5, x[2] * 1.5)) for x in a[i1:i2]]
    return out


def trace_work(
    entry: ZooEntry,
    *,
    mode: Literal["inference", "training"] | str,
    seq_len: int | None = None,
    image_size: int | None = None,
    tiny: bool = False,
) -> WorkProfile:
    """The model's ops at batch 2 and 3 merged into a batch-linear WorkProfile (see module docstring)."""
    t0 = time.perf_counter()
    # Batches 2 and 3, not 1 and 2: some models dispatch a different op sequence at batch 1 (a squeeze,
    # a broadcast), which would break the op-by-op pairing; values extend linearly back to batch 1.
    ops2, n_params, n_tensors = _trace_once(entry, mode, 2, seq_len, image_size, tiny)
    ops3, _, _ = _trace_once(entry, mode, 3, seq_len, image_size, tiny)
    rows: Counter[tuple[str, float, float, float, float]] = Counter()
    for (cls, f2, b2), (_, f3, b3) in _pair(ops2, ops3):
        f1, by1 = max(0.0, 2 * f2 - f3), max(0.0, 2 * b2 - b3)  # the line through b=2 and b=3, at b=1
        rows[(cls, f1, f2, by1, b2)] += 1
    inp = {k: v for k, v in (("seq_len", seq_len), ("image_size", image_size)) if v is not None}
    return WorkProfile(
        model=entry.name,
        mode=str(mode),
        input=inp,
        tiny=tiny,
        ops=tuple((c, n, f1, f2, b1, b2) for (c, f1, f2, b1, b2), n in sorted(rows.items())),
        n_params=n_params,
        param_tensors=n_tensors,
        trace_s=time.perf_counter() - t0,
    )


def trace_works(keys: Iterable[tuple[str, str, str]]) -> dict[str, WorkProfile]:
    """Traces for (model, mode, "seq_len=128") keys, by ``reference.work_key``; unknown models are skipped."""
    from rightsize.errors import RightsizeError
    from rightsize.estimate.reference import parse_input, work_key
    from rightsize.models.zoo import layout_entry

    out: dict[str, WorkProfile] = {}
    for model, mode, inp_text in sorted(keys):
        inp = parse_input(inp_text)
        try:
            entry = layout_entry(model)
        except RightsizeError:
            continue
        out[work_key(model, mode, inp)] = trace_work(
            entry, mode=mode, seq_len=inp.get("seq_len"), image_size=inp.get("image_size")
        )
    return out
