"""Peak memory of training or inference for a zoo model, without allocating it.

    est = estimate_memory("llama-7b", mode="infer", precision="fp16", batch_size=1, seq_len=2048)
    est.total_gib, est.tier, est.fits, est.breakdown

Peak tensor memory (one device, steady state: optimizer states exist, ``zero_grad(set_to_none=True)``):

    train:  W + O + max(P_fb, G + T)       W weights, O optimizer states, G gradients, T optimizer-step
                                           transient, P_fb peak of the traced forward + backward
                                           (activations, logits + loss, backward transients, the
                                           gradients accumulated so far); see memory_trace.
    infer:  W + P_f + KV                   P_f peak of the traced forward (no_grad), KV the cache
                                           2 * layers * kv_heads * head_dim * bytes * batch * seq

On CUDA add the context, the cuBLAS/cuDNN workspace and an allocator-fragmentation margin; on CPU
the kernels' own scratch at the peak (a convolution's layout copy, traced op by op: ``workspace``) and
an allocator margin over the bytes a step allocates (``Overheads``). The breakdown lists what is
live at the peak, so it sums to the total; ``components`` gives each quantity at its full size.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

from rightsize.errors import SpecError, did_you_mean
from rightsize.estimate.memory_tiers import (
    TIER_HEADROOM_FRACTION,
    Advice,
    GpuTier,
    pick_tier,
    tier_fits,
)

if TYPE_CHECKING:
    from rightsize.estimate.memory_trace import ModelStats, TraceResult
    from rightsize.models.zoo import ZooEntry

__all__ = [
    "BREAKDOWN_KEYS",
    "DEVICES",
    "MODES",
    "OPTIMIZERS",
    "OVERHEADS",
    "PRECISIONS",
    "MemoryEstimate",
    "MemoryInputs",
    "Overheads",
    "assemble",
]

GIB = 2**30
Mode = Literal["train", "infer"]
Device = Literal["cuda", "cpu"]
PRECISIONS = ("fp32", "fp16", "bf16", "int8", "int4")
MODES = ("train", "infer")
OPTIMIZERS = ("adamw", "sgd")
DEVICES = ("cuda", "cpu")
BREAKDOWN_KEYS = (
    "weights", "gradients", "optimizer_states", "optimizer_step_transient", "activations", "logits",
    "backward_transient", "kv_cache", "cuda_context", "workspace", "fragmentation",
)  # fmt: skip

# Bytes per stored weight element. int4: GPTQ/AWQ-style groups of 128 weights share an fp16 scale and
# an fp16 zero point (+4 bytes per 128 weights); int8: one fp16 scale per output row (LLM.int8()).
WEIGHT_BYTES = {"fp32": 4.0, "fp16": 2.0, "bf16": 2.0, "int8": 1.0, "int4": 0.5}
INT4_GROUP_SIZE = 128
# Optimizer states per parameter, fp32 (docs/sources.md `memory-accounting`): AdamW exp_avg + exp_avg_sq; SGD momentum.
OPTIMIZER_STATE_BYTES_PER_PARAM = {"adamw": 8, "sgd": 4}


@dataclass(frozen=True)
class Overheads:
    """Memory a process uses besides live tensors. The CUDA context and the caching allocator's margins are
    measured: ``rightsize bench`` on an H100 and an H200 (torch 2.11.0+cu130, driver 580.159.04, 2026-11-26;
    ``benchmarks/gpu/results/``, ``benchmarks/gpu_memory_vs_device.py``)."""

    # The context of a process that has run a model (context + cuBLAS/cuDNN handles, lazy loading on): 708-799 MB
    # on the H100 and H200 runs (docs/sources.md `memory-accounting` gives 0.3-0.7 GB for older CUDA).
    context_bytes: int = 750 * 10**6
    # PyTorch's default cuBLAS workspace on Hopper, CUBLAS_WORKSPACE_CONFIG=":4096:8" (8 x 4 MiB; older
    # GPUs ":4096:2:16:8" ~ 8 MiB): PyTorch docs, "Reproducibility" / torch.use_deterministic_algorithms.
    cublas_workspace_bytes: int = 32 * 2**20
    # cuDNN convolution workspace beyond the traced tensors: none seen with PyTorch's default cudnn.benchmark=False.
    # On the H100/H200 runs ResNet-50's peak allocated exceeded its tensor trace by 34-36 MiB at every batch,
    # inference and training: the cuBLAS workspace alone (was 128 MiB, assumed). cudnn.benchmark=True may pick
    # algorithms with larger workspaces: not measured.
    cudnn_workspace_bytes: int = 0
    # Caching-allocator fragmentation, max_memory_reserved - max_memory_allocated. Training: a fraction of all tensor
    # bytes (measured 0.06-0.17, median 0.12, over 8 ResNet-50 / BERT-base training configs). Inference: a fraction of
    # the bytes that come and go (everything but the weights): the freed activations of varying sizes stay reserved
    # (measured 0.3-0.7 of them; 0.5 gave median 2.4% over 24 fp32 inference configs, and a cap, not a fit of each).
    fragmentation_fraction: float = 0.12
    inference_fragmentation_fraction: float = 0.5
    # CPU: RSS above the live tensor bytes of a step (glibc arenas, oneDNN scratch), as a fraction of
    # the bytes allocated above the resident weights/optimizer states. Median of 9 `--validate` runs
    # on the project's 2-core dev machine (resnet50, distilbert, gpt2, llama-1b; train 0.93-1.35x,
    # inference 1.5-1.8x of tensor bytes): noisy, indicative.
    cpu_allocator_fraction: float = 0.35


OVERHEADS = Overheads()


@dataclass(frozen=True)
class MemoryInputs:
    """Everything ``assemble`` needs: the request plus the traced model."""

    model: str
    mode: Mode
    precision: str
    device: Device
    batch_size: int
    seq_len: int | None
    image_size: int | None
    optimizer: str
    fused: bool
    stats: ModelStats
    trace: TraceResult
    overheads: Overheads = OVERHEADS
    optimizer_state_bytes_per_param: float | None = None  # None: OPTIMIZER_STATE_BYTES_PER_PARAM
    shards: int = 1  # ZeRO-3 / FSDP (train) or tensor parallel (infer): model state split over N GPUs
    shape: list[int] | None = None  # a user model's per-sample input shape (rightsize.models.resolve_model)
    vocab: int | None = None  # a user model's token-id inputs are below this


@dataclass
class MemoryEstimate:
    """Peak memory of one configuration; ``breakdown`` (bytes, live at the peak) sums to ``total_bytes``."""

    model: str
    mode: str
    precision: str
    device: str
    batch_size: int
    seq_len: int | None
    image_size: int | None
    optimizer: str | None
    fused: bool
    param_count: int
    breakdown: dict[str, int]
    components: dict[str, int]  # full-size quantities (not all live at once)
    peak_phase: str  # "forward_backward" | "optimizer_step" | "optimizer_step_cpu_heap" | "forward"
    total_bytes: int
    total_gib: float
    tier: str | None = None
    tier_memory_gib: float | None = None
    fits: bool = False
    headroom_fraction: float = TIER_HEADROOM_FRACTION
    tiers: list[dict[str, Any]] = field(default_factory=list)
    advice: list[Advice] = field(default_factory=list)
    assumptions: list[str] = field(default_factory=list)
    trace_s: float = 0.0
    shape: list[int] | None = None  # a user model's input (see MemoryInputs)
    vocab: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """Every field (bytes as ints, advice as dicts): what ``rightsize memory --json`` prints."""
        return asdict(self)

    def to_json(self) -> str:
        from rightsize.jsonout import to_json

        return to_json(self.to_dict())

    def summary(self) -> str:
        """One line: the config, the peak, its three largest parts and the smallest tier that holds it."""
        from rightsize.units import format_bytes

        shape = "".join(f", {k} {v}" for k, v in (("seq", self.seq_len), ("image", self.image_size)) if v)
        largest = sorted(((n, k) for k, n in self.breakdown.items() if n > 0), reverse=True)[:3]
        parts = ", ".join(f"{k} {format_bytes(n)}" for n, k in largest)
        where = f", fits {self.tier}" if self.tier else ""  # its label has its size: "A10/A10G/L4 (22.49 GiB)"
        if not self.tier and self.tiers:
            where = f", fits none of the {len(self.tiers)} tiers checked"
        return (f"{self.mode} {self.precision} on {self.device}, batch {self.batch_size}{shape}: "
                f"{self.total_gib:.2f} GiB peak ({parts}){where}")  # fmt: skip

    def __repr__(self) -> str:
        """Short (the dataclass's ran to 2 KB, every part and tier); ``.to_dict()`` has every field."""
        return f"MemoryEstimate({self.model!r}, {self.summary()})"

    def _repr_html_(self) -> str:
        """Notebook display: the summary and every part live at the peak, largest first (as Profile's table)."""
        import html

        from rightsize.jsonout import html_table

        rows = [{"part": k, "GiB": n / GIB, "share": f"{n / max(1, self.total_bytes):.0%}"}
                for k, n in sorted(self.breakdown.items(), key=lambda kn: -kn[1]) if n > 0]  # fmt: skip
        head = f"{self.model}: {self.summary()}"
        return f"<div><b>{html.escape(head)}</b>{html_table(rows, ['part', 'GiB', 'share'], limit=len(rows))}</div>"


def compute_dtype(mode: str, precision: str, device: str) -> tuple[Literal["fp32", "fp16", "bf16"], bool]:
    """(activation dtype, autocast?): training keeps fp32 weights and autocasts fp16/bf16 (AMP);
    inference casts the model; int8/int4 weights compute in fp16 on CUDA and fp32 on CPU."""
    if precision in ("fp16", "bf16"):
        return precision, mode == "train"  # type: ignore[return-value]
    if precision in ("int8", "int4"):
        return ("fp16" if device == "cuda" else "fp32"), False
    return "fp32", False


def weight_bytes(stats: ModelStats, mode: str, precision: str, device: str) -> int:
    """Parameters + buffers as stored: fp32 for training (AMP keeps fp32 master weights; docs/sources.md
    `memory-accounting`)."""
    act = WEIGHT_BYTES[compute_dtype(mode, precision, device)[0]]
    if mode == "train":
        return int(4 * (stats.param_count + stats.float_buffer_numel) + stats.other_buffer_bytes)
    if precision in ("int8", "int4"):
        q = stats.linear_weight_numel
        if precision == "int8":
            quant = q * 1 + stats.linear_out_features * 2
        else:
            quant = q // 2 + math.ceil(q / INT4_GROUP_SIZE) * 4
        rest = (stats.param_count - q) * act
        return int(quant + rest + stats.float_buffer_numel * act + stats.other_buffer_bytes)
    b = WEIGHT_BYTES[precision]
    return int((stats.param_count + stats.float_buffer_numel) * b + stats.other_buffer_bytes)


def kv_cache_bytes(stats: ModelStats, act_bytes: float, batch_size: int, seq_len: int) -> int:
    """docs/sources.md `memory-accounting`: 2 (K and V) * layers * kv_heads * head_dim * bytes * batch * seq."""
    return int(2 * stats.kv_layers * stats.kv_heads * stats.head_dim * act_bytes * batch_size * seq_len)


def step_transient_bytes(inp: MemoryInputs) -> int:
    """Temporary memory of optimizer.step(): fused ~0; CUDA foreach AdamW ~ one fp32 params-size
    (``_foreach_sqrt(exp_avg_sq)``, docs/sources.md `memory-accounting`); CPU defaults to the per-tensor loop, whose
    ``exp_avg_sq.sqrt() / bias_correction`` holds ~2 copies of the largest parameter. SGD
    (momentum, no weight decay) updates in place."""
    if inp.fused or inp.optimizer != "adamw":
        return 0
    if inp.device == "cuda":
        return 4 * inp.stats.param_count
    return 2 * 4 * inp.stats.largest_param_numel


def assemble(inp: MemoryInputs) -> tuple[dict[str, int], dict[str, int], str]:
    """(breakdown live at the peak, full-size components, peak phase) from a trace. Pure."""
    st, tr, n = inp.stats, inp.trace, inp.shards
    w = weight_bytes(st, inp.mode, inp.precision, inp.device) // n
    tags = dict(tr.peak_by_tag)
    tags["gradients"] //= n  # sharded gradients are reduce-scattered as they are produced
    scratch = tags.get("scratch", 0)  # a CPU kernel's internal buffers at the peak (memory_trace)
    out = dict.fromkeys(BREAKDOWN_KEYS, 0)
    out["weights"] = w
    comp: dict[str, int] = {
        "weights": w, "activations_saved": tr.saved_bytes, "logits": tr.logits_bytes,
        "forward_peak": tr.peak_live_bytes,
    }  # fmt: skip
    if inp.mode == "train":
        per_param = inp.optimizer_state_bytes_per_param or OPTIMIZER_STATE_BYTES_PER_PARAM[inp.optimizer]
        opt = int(per_param * st.param_count) // n
        grads = 4 * st.param_count // n
        trans = step_transient_bytes(inp) // n
        comp |= {"gradients": grads, "optimizer_states": opt, "optimizer_step_transient": trans}
        out["optimizer_states"] = opt
        if sum(tags.values()) >= grads + trans:
            phase = "forward_backward"
            out |= {
                "gradients": tags["gradients"], "activations": tags["activations"] + tags["input"],
                "logits": tags["logits"], "backward_transient": tags["backward"], "workspace": scratch,
            }  # fmt: skip
        else:
            phase = "optimizer_step"
            out |= {"gradients": grads, "optimizer_step_transient": trans}
    else:
        phase = "forward"
        act_bytes = WEIGHT_BYTES[compute_dtype(inp.mode, inp.precision, inp.device)[0]]
        kv = kv_cache_bytes(st, act_bytes, inp.batch_size, inp.seq_len or 0) // n if st.kv_layers else 0
        comp["kv_cache"] = kv
        out |= {
            "activations": tags["activations"] + tags["input"], "logits": tags["logits"], "kv_cache": kv,
            "workspace": scratch,
        }  # fmt: skip
    ov = inp.overheads
    if inp.device == "cpu":
        dynamic = sum(out.values()) - out["weights"] - out["optimizer_states"]
        out["fragmentation"] = int(ov.cpu_allocator_fraction * dynamic)
        if inp.mode == "train":
            # glibc's heap does not shrink between phases: the forward-backward peak's freed activations stay
            # resident while the rest of the gradients and the optimizer step's temporaries are allocated, so a
            # CPU step's peak RSS holds all three (DistilBERT b8: RSS rose 1125 -> 1244 -> 1767 MiB over
            # forward, backward, step). Same-sized, allocated-once buffers: no fragmentation margin on them.
            fb = {"gradients": tags["gradients"], "activations": tags["activations"] + tags["input"],
                  "logits": tags["logits"], "backward_transient": tags["backward"], "workspace": scratch}  # fmt: skip
            out |= fb | {"gradients": grads, "optimizer_step_transient": trans}
            out["fragmentation"] = int(ov.cpu_allocator_fraction * sum(fb.values()))
            phase = "optimizer_step_cpu_heap"
    else:
        tensors = sum(out.values())
        workspace = ov.cublas_workspace_bytes + (ov.cudnn_workspace_bytes if _has_conv(inp) else 0)
        if inp.mode == "train":
            frag = ov.fragmentation_fraction * (tensors + workspace)
        else:  # the weights are allocated once; what fragments is what comes and goes around them
            frag = ov.inference_fragmentation_fraction * (tensors + workspace - out["weights"])
        out |= {
            "cuda_context": ov.context_bytes, "workspace": out["workspace"] + workspace, "fragmentation": int(frag),
        }  # fmt: skip
    return out, comp, phase


def _has_conv(inp: MemoryInputs) -> bool:
    return inp.image_size is not None


def scaled_trace(trace: TraceResult, factor: float) -> TraceResult:
    """The trace at ``factor`` x the batch: batch-dependent bytes scale linearly (gradients do not)."""
    tags = {k: int(v * factor) if k != "gradients" else v for k, v in trace.peak_by_tag.items()}
    return replace(
        trace, saved_bytes=int(trace.saved_bytes * factor), peak_live_bytes=sum(tags.values()), peak_by_tag=tags,
        logits_bytes=int(trace.logits_bytes * factor),
        block_saved_bytes=tuple(int(b * factor) for b in trace.block_saved_bytes),
        block_input_bytes=tuple(int(b * factor) for b in trace.block_input_bytes),
    )  # fmt: skip


MAX_BATCH, MAX_SEQ, MAX_IMAGE = 100_000_000, 1_000_000, 8192  # the CLI's --batch, --seq, --image limits too
MIN_IMAGE = 8  # a spec's input.image_size and serve --image take no less (--image 7 had been estimated)


def check_request(
    entry: ZooEntry, mode: str, precision: str, device: str, optimizer: str, batch_size: int,
    seq_len: int | None, image_size: int | None,
) -> None:  # fmt: skip
    """Raise SpecError naming the field for anything this estimator cannot take."""
    for name, value, choices in (
        ("mode", mode, MODES), ("precision", precision, PRECISIONS), ("device", device, DEVICES),
        ("optimizer", optimizer, OPTIMIZERS),
    ):  # fmt: skip
        if value not in choices:
            raise SpecError(
                name, f"unknown {name} {value!r}; choose one of {', '.join(choices)}.{did_you_mean(value, choices)}"
            )
    if mode == "train" and precision in ("int8", "int4"):
        raise SpecError("precision", f"{precision} weights are for inference; train with fp32, bf16 or fp16 (AMP)")
    if batch_size < 1:
        raise SpecError("batch", f"must be >= 1, got {batch_size}")
    limits: tuple[tuple[str, int | None, int], ...] = (
        ("batch", batch_size, MAX_BATCH), ("seq", seq_len, MAX_SEQ), ("image", image_size, MAX_IMAGE),
    )  # fmt: skip
    for what, n, most in limits:  # 1e12 samples had traced into an overflow blamed on seq
        if n is not None and n > most:
            raise SpecError(what, f"must be at most {most:,}, got {n:,}")
    if (fixed := getattr(entry, "fixed_batch", None)) and batch_size != fixed:  # ONNX Runtime's traceback, before
        raise SpecError("batch", f"{entry.name} was exported for batch {fixed} only; estimate batch {fixed}, or "
                        "re-export it with a dynamic batch axis (torch.onnx.export(..., dynamic_shapes))")  # fmt: skip
    if seq_len is not None and entry.kind != "tokens":
        raise SpecError("seq", f"only applies to token models; {entry.name} takes {entry.kind} input: drop it")
    if seq_len is not None and seq_len < 1:
        raise SpecError("seq", f"must be >= 1, got {seq_len}")
    if image_size is not None and (entry.kind != "image" or image_size < MIN_IMAGE):  # as a spec's input.image_size
        raise SpecError("image", f"must be >= {MIN_IMAGE} and only applies to image models, got {image_size} for "
                        f"{entry.name}")  # fmt: skip


def build_estimate(inp: MemoryInputs, tiers: list[GpuTier]) -> MemoryEstimate:
    """The estimate for ``inp`` with its tier choice (no advice, no assumptions). Pure."""
    breakdown, comp, phase = assemble(inp)
    total = sum(breakdown.values())
    tier = pick_tier(total, tiers)
    return MemoryEstimate(
        model=inp.model, mode=inp.mode, precision=inp.precision, device=inp.device, batch_size=inp.batch_size,
        seq_len=inp.seq_len, image_size=inp.image_size, optimizer=inp.optimizer if inp.mode == "train" else None,
        fused=inp.fused, param_count=inp.stats.param_count, breakdown=breakdown, components=comp, peak_phase=phase,
        total_bytes=total, total_gib=round(total / GIB, 3), tier=tier.label if tier else None,
        tier_memory_gib=tier.memory_gib if tier else None, fits=tier is not None,
        tiers=[{"tier": t.label, "memory_gib": t.memory_gib, "fits": tier_fits(total, t.memory_gib)} for t in tiers],
    )  # fmt: skip


def assumptions(inp: MemoryInputs, tier_source: str, tiny: bool) -> list[str]:
    """What the numbers rest on, one line each (shown by the CLI, kept in the JSON)."""
    compute, amp = compute_dtype(inp.mode, inp.precision, inp.device)
    out = [
        f"tiers from {tier_source}; a tier fits when total <= (1 - {TIER_HEADROOM_FRACTION:.0%}) x its memory "
        "(what a process can allocate, where the catalog records it)"
    ]
    if tiny:
        out.append("tiny model variant (tests)")
    if inp.mode == "train":
        out += [
            f"training: fp32 weights and gradients{f', autocast {compute} activations (AMP)' if amp else ''}; "
            f"{inp.optimizer} states {OPTIMIZER_STATE_BYTES_PER_PARAM[inp.optimizer]} B/param (docs/sources.md)",
            "steady state: optimizer states exist, zero_grad(set_to_none=True) frees gradients before forward",
            "optimizer step: " + ("fused, no transient" if inp.fused or inp.optimizer == "sgd" else
                                  "foreach, +1 fp32 params-size" if inp.device == "cuda" else
                                  "per-tensor loop, +2 x the largest parameter"),
        ]  # fmt: skip
        if amp and inp.device == "cuda":
            out.append("autocast op lists traced with CPU autocast (CUDA's differ in a few ops)")
    else:
        out.append(f"inference: model cast to {inp.precision}, activations {compute}, no_grad")
        if inp.precision in ("int8", "int4"):
            out.append(f"{inp.precision}: nn.Linear weights except the output head quantized"
                       + (f" (groups of {INT4_GROUP_SIZE}, fp16 scale + zero)" if inp.precision == "int4" else
                          " (fp16 scale per row)"))  # fmt: skip
        if inp.stats.kv_layers:
            out.append("KV cache for the whole sequence at the activation dtype; logits for every position")
    out += list(inp.trace.notes)
    if inp.device == "cuda":
        ov = inp.overheads
        frag = (
            f"fragmentation {ov.fragmentation_fraction:.0%} of tensor bytes"
            if inp.mode == "train"
            else f"fragmentation {ov.inference_fragmentation_fraction:.0%} of the bytes besides the weights"
        )
        out.append(
            f"CUDA context {ov.context_bytes / 2**30:.2f} GiB, cuBLAS workspace {ov.cublas_workspace_bytes >> 20} MiB, "
            f"no cuDNN workspace beyond the trace (cudnn.benchmark off), {frag}: measured on an H100 and an H200 "
            "(torch 2.11, CUDA 13.0; benchmarks/gpu_memory_vs_device.py)"
        )
    else:
        out.append(
            "CPU: no context; workspace = a convolution's oneDNN layout copy at the peak, max(input, output) "
            f"(forward) or grad_output + input (backward), measured; allocator margin "
            f"{inp.overheads.cpu_allocator_fraction:.0%} of the bytes a step allocates (RSS vs tensors on the dev "
            "machine; noisy)"
        )
    return out
