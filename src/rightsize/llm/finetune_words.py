"""What ``rightsize finetune`` says about a fine-tune's precision and, when nothing holds it, what to change.

    header_words(mem), precision_line(mem), no_fit_hint(mem)

Every word is read off the ``FinetuneMemory`` the plan printed (unsharded, one GPU), not restated: the adapters'
bytes per parameter are its adapter_weights / gradients / optimizer_states over params_trainable, so the text
cannot drift from the arithmetic in ``llm.finetune`` (a QLoRA base is NF4, not "pure bf16"; HF PEFT's adapters
train in fp32 whatever ``--precision``).
"""

from __future__ import annotations

from rightsize.llm.finetune import GIB, FinetuneMemory, model_state_bytes
from rightsize.llm.finetune_plan import flops_per_token
from rightsize.llm.shape import DecoderShape

__all__ = ["FULL_PRECISION_WORDS", "checkpointing_line", "header_words", "no_fit_hint", "precision_line"]

# A full fine-tune's --precision in the header: "bf16" is pure (as `memory --precision bf16` is not: that one is AMP)
FULL_PRECISION_WORDS = {
    "bf16": "pure bf16 (no fp32 master weights; amp_bf16 keeps them)",
    "fp16": "pure fp16 (no fp32 master weights; amp_fp16 keeps them)",
    "amp_bf16": "amp_bf16 (fp32 master weights and Adam states)",
    "amp_fp16": "amp_fp16 (fp32 master weights and Adam states)",
}
_OPTIMIZER_WORDS = {"adamw": "AdamW", "adamw8bit": "8-bit AdamW", "sgd_momentum": "SGD momentum", "sgd": "SGD"}


def _compute(mem: FinetuneMemory) -> str:
    """The dtype the matmuls run in (and LoRA's frozen base is stored in): amp_bf16 autocasts to bf16."""
    return mem.precision.removeprefix("amp_")


def _adapter_bytes(mem: FinetuneMemory) -> tuple[int, int, int]:
    """(weight, gradient, optimizer incl. any fp32 master) bytes per adapter parameter, as finetune_memory counted."""
    n = max(1, mem.params_trainable)
    return mem.adapter_weights // n, mem.gradients // n, mem.optimizer_states // n


def _base_words(mem: FinetuneMemory, double_quant: bool) -> str:
    """The frozen base as finetune_memory stores it: QLoRA's block linears NF4 (4 bits + constants), LoRA's 16-bit."""
    if mem.method == "qlora":
        dq = " (double-quantised)" if double_quant else ""
        return f"NF4 frozen base{dq}, {_compute(mem)} compute"
    return f"{_compute(mem)} frozen base"


def _adapter_dtype(mem: FinetuneMemory) -> tuple[str, bool]:
    """The adapters' stored dtype and whether an fp32 master copy is kept (amp_* with adapters in the model dtype)."""
    w = _adapter_bytes(mem)[0]
    return ("fp32" if w == 4 else _compute(mem)), mem.precision.startswith("amp_") and w != 4


def header_words(mem: FinetuneMemory, double_quant: bool = True) -> str:
    """The precision in the header: a full fine-tune's --precision, or LoRA / QLoRA's base and adapters, which differ
    (calling a QLoRA run "pure bf16" hid its NF4 base)."""
    if mem.method == "full":
        return FULL_PRECISION_WORDS.get(mem.precision, mem.precision)
    dtype, master = _adapter_dtype(mem)
    return f"{_base_words(mem, double_quant)}, {dtype} adapters" + (" with fp32 master weights" if master else "")


def precision_line(mem: FinetuneMemory, double_quant: bool = True) -> str | None:
    """Bytes per trained parameter: pure bf16 / fp16 against its amp_ twin for a full fine-tune (None under amp_ and
    fp32, whose header says it); for LoRA / QLoRA what is frozen, in what, and the adapters' bytes."""
    p = mem.precision
    if mem.method == "full":
        if p not in ("bf16", "fp16"):
            return None
        return (f"{p}: pure {p} weights, grads and AdamW states ({model_state_bytes(p)} B/param); "
                f"amp_{p} keeps fp32 master weights ({model_state_bytes('amp_' + p)} B/param)")  # fmt: skip
    w, g, s = _adapter_bytes(mem)
    dtype, master = _adapter_dtype(mem)
    opt = _OPTIMIZER_WORDS.get(mem.optimizer, mem.optimizer)
    states = (f"weights and grads in {dtype}, fp32 master weights and {opt} states" if master
              else f"weights, grads and {opt} states in {dtype}")  # fmt: skip
    kept = f"; embeddings, LM head and norms stay {_compute(mem)}" if mem.method == "qlora" else ""
    line = (f"{mem.method}: {_base_words(mem, double_quant)}{kept}; only the adapters train, their {states} "
            f"({w} + {g} + {s} = {w + g + s} B/param)")  # fmt: skip
    if dtype == "fp32" and p != "fp32":  # HF PEFT's autocast_adapter_dtype: the cast ignores --precision
        return line + f"; {mem.framework} keeps them in fp32 whatever --precision (PEFT's autocast_adapter_dtype)"
    if p in ("bf16", "fp16") and mem.optimizer == "adamw":
        return line + f"; amp_{p} adds fp32 master weights ({model_state_bytes('amp_' + p)} B/param)"
    return line


def checkpointing_line(mem: FinetuneMemory, shape: DecoderShape) -> str:
    """Whether activation checkpointing is on, and what it costs in FLOPs a token: the text had never said so while
    the memory and the hours counted it (the JSON's gradient_checkpointing)."""
    n = float(shape.params())
    on, off = (flops_per_token(shape, mem.method, c) / n for c in (True, False))
    if mem.gradient_checkpointing:
        return (
            f"activation checkpointing on: the forward recomputed in the backward pass (hours count {on:g}N "
            f"FLOPs a token, not {off:g}N); --no-checkpointing turns it off, for more activation memory"
        )
    return (
        f"activation checkpointing off (--no-checkpointing): every layer keeps its activations (hours count "
        f"{off:g}N FLOPs a token; --checkpointing: less memory, {on:g}N)"
    )


def no_fit_hint(mem: FinetuneMemory) -> str:
    """What to change when no instance holds the fine-tune, named after the term that dominates one GPU's peak:
    activations and logits grow with batch x seq and no ZeRO stage splits them, so --method qlora (which shrinks only
    the weights) is offered only when the model states are the bulk."""
    b = mem.breakdown()
    moving = b["activations"] + b["logits"]
    states = sum(b[k] for k in ("weights", "quant_constants", "adapter_weights", "gradients", "optimizer_states",
                                "optimizer_step_transient"))  # fmt: skip
    of = f"of its {mem.total_bytes / GIB:.1f} GiB on one GPU"
    if moving >= states:
        tries = ([] if mem.gradient_checkpointing else ["--checkpointing"]) + ["a smaller --batch or --seq"]
        terms = " and ".join(k for k in ("activations", "logits") if b[k] > 0) or "activations"  # both plural
        return (f"{terms} take {moving / GIB:.1f} {of}, growing with --batch x --seq, and no sharding splits them: "
                f"try {', '.join(tries)}")  # fmt: skip
    fix = {"full": "--method lora or qlora", "lora": "--method qlora"}.get(
        mem.method, "a GPU with more memory (another --provider) or a smaller model"
    )
    return f"the model states (weights, gradients, optimizer states) take {states / GIB:.1f} {of}: try {fix}"
