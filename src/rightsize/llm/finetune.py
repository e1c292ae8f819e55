"""Peak GPU memory of fine-tuning a decoder LM (full, LoRA, QLoRA), from its shape alone.

    m = finetune_memory("llama-7b", "qlora", batch=4, seq_len=2048, lora_targets="all-linear")
    m.total_gib, m.breakdown(), m.params_trainable

Pure arithmetic: no torch, no trace. ``shape`` is a zoo name ("llama-7b"), an HF config object or a
mapping with layers / hidden / heads / kv_heads / intermediate / vocab (HF key names work too).

Model states, bytes per parameter (Rajbhandari et al. 2020, "ZeRO", arXiv:1910.02054, §3.1):

    precision       stored weight  gradient  optimizer (AdamW)              full fine-tune
    fp32            4              4         8   (m, v fp32)                16
    bf16 / fp16     2              2         4   (m, v in the param dtype)  8    pure 16-bit (torchtune,
                                                                                 LitGPT bf16-true)
    amp_bf16/fp16   2              2         12  (fp32 master + m + v)      16   mixed precision
    LoRA / QLoRA: the frozen base has weights only; gradients and optimizer states exist for the
    adapters alone (Hu et al. 2021, arXiv:2106.09685). adamw8bit keeps m, v in 1 byte each
    (Dettmers et al. 2021, arXiv:2110.02861); sgd is torch.optim.SGD's default (no momentum, no state).

QLoRA (Dettmers et al. 2023, arXiv:2305.14314, §3): the blocks' linear weights are NF4, 4 bits each
plus the quantisation constants: one fp32 absmax per 64 weights = 0.5 bit/param, or with double
quantisation 8/64 + 32/(64·256) = 0.127 bit/param. Embeddings, LM head and norms stay 16-bit.

Activations, bytes per token per layer (the method of Korthikanti et al. 2022, arXiv:2205.05198, §4.1,
whose GPT layer stores sbh(34 + 5as/h); redone here for a Llama layer: RMSNorm, SwiGLU, no dropout,
FlashAttention/SDPA so no s² term; a = activation bytes, h hidden, k = kv_heads·head_dim, f intermediate):

    2 RMSNorms        2·4h   each saves its fp32 upcast input (HF and torchtune upcast)  (+a·h if trainable)
    attention         a(2h + 2k)   q, k, v after RoPE and the output, saved by the flash kernel
    SwiGLU            3a·f   gate output, SiLU(gate) and up output (the product's operands)
    linear inputs     a·h (q/k/v input), a·h (gate/up input), a·f (down input): kept only where the
                      weight trains, carries a LoRA adapter, or is bitsandbytes 4-bit (its MatMul4Bit
                      saves its input whatever needs grad); the o_proj input is the flash output itself
    LoRA              a·r per adapter, plus a·in + 1·in (dropped copy + mask) per adapter if dropout > 0
    fp32 adapters     HF PEFT's default (``autocast_adapter_dtype=True``: bf16/fp16 adapter weights are upcast to
                      fp32, https://huggingface.co/docs/peft/v0.20.0/package_reference/peft_model): each adapter
                      casts its input to fp32 and saves that copy, 4·in + 4·r per adapter (5·in with dropout: the
                      dropped fp32 copy + mask), and the frozen 16-bit linears then keep no input of their own.
                      The adapters then train in fp32: 4-byte gradients and AdamW states, no master copy.

Llama-2-7B frozen with LoRA on q, v: 14h + 4k + 6f = 34.1h bytes, close to Korthikanti's 34h for GPT.
Peak of forward + backward: every layer's saved bytes (without checkpointing) or every layer's input
(with per-layer checkpointing, Korthikanti §4.1: 2sbh per layer in 16 bits), plus the larger or the sum (by
framework, below) of one layer's worth (the layer being recomputed, or the activation gradients of the layer in
backward) and the logits at the start of backward, the loss on fp32-upcast logits.

The training code matters (``framework``; FRAMEWORKS):

    hf         HF transformers >= 4.46 + PEFT: fp32 adapters (above); the model returns 16-bit logits and its loss
               upcasts them, so at the start of backward live are the saved fp32 log-softmax output, its gradient
               and the logits' gradient, 12·V bytes per token, freed before any layer's backward: the peak is the
               larger of the two. Measured on an H200 (benchmarks/finetune_vs_device.py: 13 Llama 2 7B configs,
               PEFT 0.21, transformers 5.17) and, per saved tensor, with a saved-tensors hook on a small Llama.
    torchtune  the recipe's loop holds the fp32 logits through backward: 16·V bytes per token (those, the saved
    litgpt     log-softmax output, its gradient, the logits' gradient), counted with one layer's worth; adapters
               in the model's dtype. Checked against the published LitGPT and torchtune tables
               (benchmarks/llm_memory_vs_published.py).

Peak = weights + optimizer states + max(forward/backward, gradients + optimizer-step transient)
(gradients live during forward/backward when accumulating), plus, per GPU: ZeRO-3's gathered layers,
QLoRA's one dequantised weight, cuBLAS workspace, allocator fragmentation on the dynamic bytes and the
CUDA context (the last two from ``estimate.memory.OVERHEADS``: defaults, not fits). ZeRO / FSDP over
``gpus``: stage 1 shards optimizer states, 2 also gradients, 3 also weights; activations are per GPU
(``batch`` is the per-GPU micro-batch).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from rightsize.errors import SpecError, did_you_mean
from rightsize.estimate.memory import OVERHEADS, Overheads
from rightsize.inputfile import short
from rightsize.llm.shape import DecoderShape, decoder_shape

__all__ = [
    "FRAMEWORKS",
    "LINEARS",
    "METHODS",
    "OPTIMIZERS",
    "PRECISIONS",
    "FinetuneMemory",
    "finetune_memory",
    "lora_trainable_params",
    "model_state_bytes",
]

GIB = 2**30
METHODS = ("full", "lora", "qlora")
# precision -> (stored weight, gradient, fp32 master copy, optimizer state element) bytes
_STATE_BYTES: dict[str, tuple[int, int, int, int]] = {
    "fp32": (4, 4, 0, 4),
    "bf16": (2, 2, 0, 2),
    "fp16": (2, 2, 0, 2),
    "amp_bf16": (2, 2, 4, 4),
    "amp_fp16": (2, 2, 4, 4),
}
PRECISIONS = tuple(_STATE_BYTES)


def model_state_bytes(precision: str, optimizer: str = "adamw") -> int:
    """Bytes per trained parameter of its model states: the stored weight, its gradient, the fp32 master copy (amp_*)
    and the optimizer's states (module docstring table): pure bf16 AdamW 8, amp_bf16 16."""
    w_b, g_b, master_b, state_b = _STATE_BYTES[precision]
    n_states, state_override = _OPTIMIZER_STATES[optimizer]
    return w_b + g_b + master_b + n_states * (state_override or state_b)


@dataclass(frozen=True)
class _Framework:
    adapter_fp32: bool  # LoRA adapters upcast to fp32 (HF PEFT's autocast_adapter_dtype=True) or in the model dtype
    logit_bytes: int  # per vocab entry per token at the start of backward
    logits_with_layer: bool  # the logits still live while a layer's backward runs (the loop holds them)


FRAMEWORKS = {
    "hf": _Framework(adapter_fp32=True, logit_bytes=12, logits_with_layer=False),
    "torchtune": _Framework(adapter_fp32=False, logit_bytes=16, logits_with_layer=True),
    "litgpt": _Framework(adapter_fp32=False, logit_bytes=16, logits_with_layer=True),
}
# optimizer -> (states per parameter, bytes per state element or None for the precision's)
_OPTIMIZER_STATES: dict[str, tuple[int, int | None]] = {
    "adamw": (2, None),
    "adamw8bit": (2, 1),
    "sgd_momentum": (1, None),
    "sgd": (0, None),
}
OPTIMIZERS = tuple(_OPTIMIZER_STATES)
# optimizer -> (passes over the updated weight, over the gradient, over state-sized tensors) of one step, each pass
# one read or one write of every element. torch.optim.AdamW (foreach, torch/optim/adam.py _multi_tensor_adam, 2.x):
# weight decay p *= 1-lr·wd (p: r+w), m.lerp_(g) (m: r+w, g: r), v *= b2 (v: r+w), v.addcmul_(g, g) (v: r+w, g: r),
# s = sqrt(v) (v: r, s: w), s /= bc2 and s += eps (s: r+w twice), p.addcdiv_(m, s) (p: r+w, m: r, s: r) = 4, 2, 14.
# fused=True: one kernel reading p, g, m, v and writing p, m, v = 2, 1, 4 (bitsandbytes' 8-bit AdamW too). SGD with
# momentum (foreach): buf *= mu, buf += g, p -= lr·buf = 2, 1, 5; plain SGD 2, 1, 0.
_STEP_PASSES: dict[str, tuple[int, int, int]] = {
    "adamw": (4, 2, 14), "adamw_fused": (2, 1, 4), "adamw8bit": (2, 1, 4), "sgd_momentum": (2, 1, 5), "sgd": (2, 1, 0),
}  # fmt: skip
LINEARS = ("q", "k", "v", "o", "gate", "up", "down")  # one decoder layer's linear layers
_ALIASES = {f"{n}_proj": n for n in LINEARS} | {"output": "lm_head", "output_proj": "o", "w1": "gate", "w3": "up"}
NF4_BITS = 4.0
# QLoRA §3: fp32 absmax per 64-weight block = 32/64 bit; double quantisation 8/64 + 32/(64·256) bit.
NF4_CONSTANT_BITS = {False: 32 / 64, True: 8 / 64 + 32 / (64 * 256)}
NORM_SAVED_BYTES = 4  # RMSNorm keeps its fp32 upcast input


@dataclass(frozen=True)
class _Dims:
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    intermediate: int
    vocab: int
    tied: bool = False
    gated: bool = True
    extra: int = 0  # parameters besides the block linears, embeddings, LM head and norm weights (biases, wpe)

    @property
    def kv_dim(self) -> int:
        return self.hidden // self.heads * self.kv_heads

    def linear_shapes(self) -> dict[str, tuple[int, int]]:
        """(in, out) features of one layer's linears."""
        h, k, f = self.hidden, self.kv_dim, self.intermediate
        out = {"q": (h, h), "k": (h, k), "v": (h, k), "o": (h, h), "up": (h, f), "down": (f, h)}
        return out | ({"gate": (h, f)} if self.gated else {})

    def block_linear_params(self) -> int:
        return self.layers * sum(i * o for i, o in self.linear_shapes().values())

    def other_params(self) -> int:
        """Embeddings, LM head (unless tied), norm weights and ``extra``: never quantised."""
        return self.vocab * self.hidden * (1 if self.tied else 2) + (2 * self.layers + 1) * self.hidden + self.extra


_KEYS = {
    "layers": ("layers", "num_hidden_layers", "n_layer"),
    "hidden": ("hidden", "hidden_size", "n_embd"),
    "heads": ("heads", "num_attention_heads", "n_head"),
    "kv_heads": ("kv_heads", "num_key_value_heads"),
    "intermediate": ("intermediate", "intermediate_size", "n_inner"),
    "vocab": ("vocab", "vocab_size"),
}


def _dims(shape: str | DecoderShape | Mapping[str, Any] | Any) -> _Dims:
    """The decoder's dimensions from a decoder reference (``llm.shape.decoder_shape``: a zoo name or hf:DIR), a
    DecoderShape, a mapping or an HF config object."""
    if isinstance(shape, str):
        shape = decoder_shape(shape)
    if isinstance(shape, DecoderShape):
        s = shape
        if s.heads * s.head_dim != s.hidden:
            raise SpecError("model", f"head_dim {s.head_dim} x num_attention_heads {s.heads} != hidden_size "
                            f"{s.hidden}: the fine-tune memory arithmetic assumes head_dim = hidden_size / heads, so "
                            "it cannot plan this model")  # fmt: skip
        dims = _Dims(s.layers, s.hidden, s.heads, s.kv_heads, s.intermediate, s.vocab, tied=s.tied_embeddings,
                     gated=s.gated_mlp)  # fmt: skip
        # what the block linears and the embeddings / norms above leave out: GPT-2's biases, LayerNorm biases and
        # learned position table (0 for a Llama shape); frozen, never quantised
        return replace(dims, extra=s.params() - dims.block_linear_params() - dims.other_params())
    get = shape.get if isinstance(shape, Mapping) else lambda k, d=None: getattr(shape, k, d)
    vals: dict[str, int] = {}
    for field, keys in _KEYS.items():
        found = next((get(k) for k in keys if get(k) is not None), None)
        if found is None and field == "kv_heads":
            found = vals.get("heads")
        if found is None and field == "intermediate" and "hidden" in vals:
            found = 4 * vals["hidden"]
        if found is None:
            raise SpecError("shape", f"missing {field!r} (any of {', '.join(keys)}); give the decoder's {field}")
        vals[field] = int(found)
    if vals["hidden"] % vals["heads"] or vals["heads"] % vals["kv_heads"]:
        raise SpecError("shape", f"hidden {vals['hidden']} / heads {vals['heads']} / kv_heads {vals['kv_heads']} "
                        "do not divide; check the config")  # fmt: skip
    act = get("hidden_act", None) or get("activation_function", None) or get("activation", None) or "silu"
    gated = get("gated_mlp", None)
    return _Dims(**vals, tied=bool(get("tie_word_embeddings", False)),
                 gated=bool(gated) if gated is not None else str(act) in ("silu", "swiglu", "geglu"))  # fmt: skip


def _targets(targets: str | Sequence[str], dims: _Dims) -> tuple[str, ...]:
    targets = (targets,) if isinstance(targets, str) else tuple(targets)
    every = tuple(n for n in LINEARS if n in dims.linear_shapes())  # PEFT's "all-linear": not the LM head
    if targets == ("all-linear",):
        return every
    known = (*dims.linear_shapes(), "lm_head")
    out = []
    for t in targets:
        if t == "all-linear":  # with other names: refused below, once those are known to be layers
            continue
        name = _ALIASES.get(t, t)
        if name not in known:
            why = f"unknown target {t!r}"
            if name in LINEARS:  # a decoder layer's linear this model lacks: gpt2's MLP is not gated
                why = f"{t!r}: this model has no such layer" + (" (its MLP is not gated)" if name == "gate" else "")
            raise SpecError("lora_targets", f"{why}; use 'all-linear' or names among "
                            f"{', '.join(known)}.{did_you_mean(t, known)}")  # fmt: skip
        out.append(name)
    if "all-linear" in targets:  # PEFT takes all-linear as the whole value, not one name of a list
        raise SpecError("lora_targets", f"'all-linear' takes no other names: it already adapts every linear of the "
                        f"blocks ({', '.join(every)}), and never lm_head. To fix: pass all-linear alone, or list the "
                        f"names: {','.join(dict.fromkeys((*every, *out)))}")  # fmt: skip
    return tuple(dict.fromkeys(out))


def lora_trainable_params(shape: str | Mapping[str, Any] | Any, rank: int, targets: str | Sequence[str]) -> int:
    """r·(in + out) per adapted linear (A is r×in, B is out×r), in every layer; the LM head once."""
    dims = _dims(shape)
    return _lora_params(dims, rank, _targets(targets, dims))


def _lora_params(dims: _Dims, rank: int, targets: tuple[str, ...]) -> int:
    lin = dims.linear_shapes()
    per_layer = sum(rank * sum(lin[t]) for t in targets if t != "lm_head")
    head = rank * (dims.hidden + dims.vocab) if "lm_head" in targets else 0
    return dims.layers * per_layer + head


@dataclass(frozen=True)
class FinetuneMemory:
    """Per-GPU memory of one fine-tuning configuration, bytes. Components are full-size; ``breakdown()``
    is what is live at the peak and sums to ``total_bytes``."""

    method: str
    precision: str
    optimizer: str
    batch: int
    seq_len: int
    gradient_checkpointing: bool
    zero_stage: int
    gpus: int
    params_total: int
    params_trainable: int
    weights: int  # base weights as stored (NF4 data for QLoRA's linears)
    quant_constants: int  # QLoRA absmax constants
    adapter_weights: int
    gradients: int
    optimizer_states: int  # includes the fp32 master copy under amp_*
    optimizer_step_transient: int  # foreach AdamW: one copy of exp_avg_sq.sqrt()
    activations: int  # the one in use (checkpointed or not)
    activations_checkpointed: int
    activations_full: int
    logits: int
    zero3_gather: int  # two layers' gathered weights (current + prefetch)
    quant_transient: int  # one dequantised linear weight
    workspace: int
    cuda_context: int
    fragmentation_fraction: float
    grad_accumulation: bool
    framework: str = "hf"  # the training code (FRAMEWORKS): adapter dtype and the logits' life
    layer_in_flight: int = 0  # one layer's worth (in activations_*): recomputed, or its gradients in backward
    logits_with_layer: bool = True  # logits live beside layer_in_flight (else the peak is the larger of the two)
    # bytes one optimizer step reads and writes on one GPU (its shard under ZeRO >= 1): the pass over every trained
    # weight that no token count amortises (_STEP_PASSES); the fine-tune plan times it at the GPU's bandwidth
    optimizer_step_traffic: int = 0
    # QLoRA: the NF4 weights each step dequantises (each GPU its whole model), timed per step by the fine-tune plan
    nf4_weights: int = 0
    # ZeRO-3: one step's collectives over the whole model, before the (k - 1) / k a link carries: the stored weights
    # gathered twice and the trained gradients reduce-scattered (ZeRO §7: 3Ψ for a full 16-bit fine-tune)
    zero3_step_bytes: int = 0

    def _dynamic(self) -> tuple[str, dict[str, int]]:
        fb = {"activations": self.activations, "logits": self.logits}
        if not self.logits_with_layer:  # logits freed before any layer's backward: the larger of the two counts
            if self.logits >= self.layer_in_flight:
                fb["activations"] -= self.layer_in_flight
            else:
                fb["logits"] = 0
        step = {"gradients": self.gradients, "optimizer_step_transient": self.optimizer_step_transient}
        if self.grad_accumulation:
            fb["gradients"] = self.gradients
        if sum(fb.values()) >= sum(step.values()):
            return "forward_backward", fb
        return "optimizer_step", step

    @property
    def peak_phase(self) -> str:
        return self._dynamic()[0]

    def breakdown(self) -> dict[str, int]:
        """Bytes live at the peak, by component; sums to ``total_bytes``."""
        out = dict.fromkeys(
            ("weights", "quant_constants", "adapter_weights", "optimizer_states", "gradients",
             "optimizer_step_transient", "activations", "logits", "zero3_gather", "quant_transient",
             "workspace", "fragmentation", "cuda_context"), 0)  # fmt: skip
        out |= {"weights": self.weights, "quant_constants": self.quant_constants,
                "adapter_weights": self.adapter_weights, "optimizer_states": self.optimizer_states,
                "zero3_gather": self.zero3_gather, "quant_transient": self.quant_transient,
                "workspace": self.workspace, "cuda_context": self.cuda_context}  # fmt: skip
        dyn = self._dynamic()[1]
        out |= dyn
        moving = sum(dyn.values()) + self.zero3_gather + self.quant_transient
        out["fragmentation"] = int(self.fragmentation_fraction * moving)
        return out

    @property
    def allocated_bytes(self) -> int:
        """Live tensors at the peak (what ``torch.cuda.max_memory_allocated`` reports)."""
        b = self.breakdown()
        return sum(b.values()) - b["fragmentation"] - b["cuda_context"]

    @property
    def reserved_bytes(self) -> int:
        """Allocated plus caching-allocator fragmentation (``torch.cuda.max_memory_reserved``)."""
        return self.allocated_bytes + self.breakdown()["fragmentation"]

    @property
    def total_bytes(self) -> int:
        """Reserved plus the CUDA context: what ``nvidia-smi`` shows for the process."""
        return sum(self.breakdown().values())

    @property
    def total_gib(self) -> float:
        return round(self.total_bytes / GIB, 3)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"peak_phase": self.peak_phase, "breakdown": self.breakdown(),
                               "allocated_bytes": self.allocated_bytes, "total_bytes": self.total_bytes}  # fmt: skip


def _layer_activation_bytes(
    dims: _Dims, method: str, targets: tuple[str, ...], rank: int, dropout: float, act: int, adapter_fp32: bool = False
) -> int:
    """Saved-for-backward bytes of one decoder layer per token (module docstring)."""
    h, k, f = dims.hidden, dims.kv_dim, dims.intermediate
    full = method == "full"
    total = 2 * NORM_SAVED_BYTES * h + (2 * act * h if full else 0)  # two RMSNorms (+ normalised copy)
    total += act * (2 * h + 2 * k)  # flash attention: q, k, v, out
    total += act * f * (3 if dims.gated else 1)  # SwiGLU: gate, SiLU(gate), up | plain MLP: the pre-activation
    lin = dims.linear_shapes()

    def kept(names: tuple[str, ...]) -> bool:
        present = [n for n in names if n in lin]
        # fp32 adapters save their own fp32 copy (below), so the frozen 16-bit input is kept for no adapter
        return full or method == "qlora" or (not adapter_fp32 and any(n in targets for n in present))

    total += act * h * (kept(("q", "k", "v")) + kept(("gate", "up"))) + act * f * kept(("down",))
    for t in targets:
        if t not in lin:
            continue
        if adapter_fp32:  # the input cast to fp32 (dropped copy + mask with dropout) and A's fp32 output
            total += 4 * rank + lin[t][0] * (5 if dropout > 0 else 4)
        else:
            total += act * rank + (lin[t][0] * (act + 1) if dropout > 0 else 0)
    return total


def finetune_memory(
    shape: str | Mapping[str, Any] | Any,
    method: str = "lora",
    *,
    batch: int,
    seq_len: int,
    precision: str = "bf16",
    optimizer: str = "adamw",
    lora_rank: int = 16,
    lora_targets: str | Sequence[str] = ("q", "k", "v", "o"),
    lora_dropout: float = 0.0,
    framework: str = "hf",
    gradient_checkpointing: bool = True,
    grad_accumulation_steps: int = 1,
    double_quant: bool = True,
    fused_optimizer: bool = False,
    zero_stage: int = 0,
    gpus: int = 1,
    overheads: Overheads = OVERHEADS,
) -> FinetuneMemory:
    """Peak per-GPU memory of fine-tuning ``shape`` (see the module docstring for every formula)."""
    for name, value, choices in (("method", method, METHODS), ("precision", precision, PRECISIONS),
                                 ("optimizer", optimizer, OPTIMIZERS), ("framework", framework,
                                                                        tuple(FRAMEWORKS))):  # fmt: skip
        if value not in choices:
            raise SpecError(name, f"unknown {name} {short(value)}; choose one of {', '.join(choices)}."
                            f"{did_you_mean(str(value), choices)}")  # fmt: skip
    counts = {"batch": batch, "seq_len": seq_len, "gpus": gpus, "lora_rank": lora_rank,
              "grad_accumulation_steps": grad_accumulation_steps}  # fmt: skip
    for name, n in counts.items():
        if n < 1:
            raise SpecError(name, f"must be >= 1, got {n}")
    if zero_stage not in (0, 1, 2, 3):
        raise SpecError("zero_stage", f"must be 0, 1, 2 or 3 (ZeRO stage; FSDP full-shard is 3), got {zero_stage}")
    if method == "qlora" and precision.startswith("fp32"):
        raise SpecError("precision", "QLoRA computes in 16 bits; use bf16 or fp16 (the NF4 base is dequantised to it)")
    dims = _dims(shape)
    if method != "full" and lora_rank > dims.hidden:  # an adapter of rank r adds r·(in + out): past the width, waste
        raise SpecError("lora_rank", f"must be <= the model's hidden size {dims.hidden} (LoRA ranks are 4-256), "
                        f"got {lora_rank}")  # fmt: skip
    w_b, g_b, master_b, state_b = _STATE_BYTES[precision]
    n_states, state_override = _OPTIMIZER_STATES[optimizer]
    opt_per_param = master_b + n_states * (state_override or state_b)
    act = 4 if precision == "fp32" else 2
    tokens = batch * seq_len

    # 1. parameters: trainable (full: all; else the adapters) and the frozen base as stored
    linear_p, other_p = dims.block_linear_params(), dims.other_params()
    targets = _targets(lora_targets, dims) if method != "full" else ()
    adapters = _lora_params(dims, lora_rank, targets)
    trainable = linear_p + other_p if method == "full" else adapters
    quant = 0
    if method == "qlora":
        weights = int(linear_p * NF4_BITS / 8) + other_p * w_b
        quant = int(linear_p * NF4_CONSTANT_BITS[double_quant] / 8)
    else:
        weights = (linear_p + other_p) * w_b
    fw = FRAMEWORKS[framework]
    # an fp32 model's adapters are fp32 already: PEFT's cast returns the input itself, no copy
    adapter_fp32 = method != "full" and fw.adapter_fp32 and precision != "fp32"
    if adapter_fp32:  # the adapters train in fp32: 4-byte weights, gradients and states, no master copy
        w_a, g_b, state_b, opt_per_param = 4, 4, 4, n_states * (state_override or 4)
    else:
        w_a = w_b
    adapter_w = adapters * w_a
    grads = trainable * g_b
    opt = trainable * opt_per_param
    step = trainable * (state_override or state_b) if optimizer == "adamw" and not fused_optimizer else 0
    p_pass, g_pass, s_pass = _STEP_PASSES["adamw_fused" if optimizer == "adamw" and fused_optimizer else optimizer]
    updated_b = master_b or (w_a if method != "full" else w_b)  # what the step updates: the fp32 master when kept
    per_param = p_pass * updated_b + g_pass * g_b + s_pass * (state_override or state_b)
    if master_b and not adapter_fp32:  # the updated master copied back into the stored weight: read 4, write w_b
        per_param += master_b + w_b
    traffic = trainable * per_param
    collectives = 2 * (weights + quant + adapter_w) + trainable * g_b  # before sharding: the whole model's, each step

    # 2. activations: saved per layer, with and without per-layer checkpointing, plus logits
    per_layer = _layer_activation_bytes(dims, method, targets, lora_rank, lora_dropout, act, adapter_fp32)
    residual = dims.hidden * (4 if precision.startswith(("fp32", "amp")) else act)  # AMP keeps an fp32 residual
    act_full = tokens * (dims.layers * per_layer + per_layer + residual)
    act_ckpt = tokens * (dims.layers * residual + per_layer + residual)
    logits = tokens * dims.vocab * fw.logit_bytes

    # 3. ZeRO / FSDP sharding over gpus
    n = gpus
    if zero_stage >= 1:
        opt, step, traffic = opt // n, step // n, traffic // n
    if zero_stage >= 2:
        grads //= n
    gather = 0
    if zero_stage >= 3 and n > 1:
        weights, quant, adapter_w = weights // n, quant // n, adapter_w // n
        layer_p = linear_p // dims.layers + 2 * dims.hidden
        gather = 2 * layer_p * (2 if method == "qlora" else max(w_b, act))
    lin = dims.linear_shapes()
    dequant = max(i * o for i, o in lin.values()) * act if method == "qlora" else 0

    return FinetuneMemory(
        method=method, precision=precision, optimizer=optimizer, batch=batch, seq_len=seq_len,
        gradient_checkpointing=gradient_checkpointing, zero_stage=zero_stage, gpus=gpus,
        params_total=linear_p + other_p + adapters, params_trainable=trainable, weights=weights,
        quant_constants=quant, adapter_weights=adapter_w, gradients=grads, optimizer_states=opt,
        optimizer_step_transient=step, activations=act_ckpt if gradient_checkpointing else act_full,
        activations_checkpointed=act_ckpt, activations_full=act_full, logits=logits, zero3_gather=gather,
        quant_transient=dequant, workspace=overheads.cublas_workspace_bytes, cuda_context=overheads.context_bytes,
        fragmentation_fraction=overheads.fragmentation_fraction, grad_accumulation=grad_accumulation_steps > 1,
        framework=framework, layer_in_flight=tokens * per_layer, logits_with_layer=fw.logits_with_layer,
        optimizer_step_traffic=traffic, nf4_weights=linear_p if method == "qlora" else 0,
        zero3_step_bytes=collectives,
    )  # fmt: skip
