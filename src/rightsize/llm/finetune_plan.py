"""Fine-tuning plans for decoders: which GPU instance holds a full / LoRA / QLoRA fine-tune, with what
sharding, how long it takes and what it costs.

    options = plan_finetune("llama-7b", "lora", tokens=50e6, batch=4, seq_len=2048, catalog=load_catalog())
    options[0].instance, options[0].zero_stage, options[0].hours, options[0].usd

1. **Fit.** Per GPU instance (n GPUs of one kind): ``finetune_memory`` per GPU with ZeRO stage 0 (each GPU
   holds the whole model: data parallel), else stage 3 (FSDP: weights, gradients and optimizer states
   sharded over the n GPUs), against the usable memory of one GPU (``memory_budget``).
2. **Time.** FLOPs per trained token (Kaplan et al. 2020, https://arxiv.org/abs/2001.08361, §2.1: 2N
   forward, 4N backward for a full fine-tune of N parameters): full 6N; LoRA and QLoRA 4N (the frozen
   weights need the input gradients, 2N, but no weight gradients); +2N with activation checkpointing
   (the forward recomputed). hours = tokens x FLOPs per token / (n x dense bf16 peak x ``mfu``) / 3600.
3. **Cost.** (hours + spin-up) x the instance's price; cheapest first. Spin-up is the planner's own
   (``plan.coldstart.spin_up`` with the spec defaults: provision, a CUDA image pull, model load; docs/sources.md
   ``cold-start``): billed like the training, it is what makes an 8-GPU node for a 3-minute job cost more
   than one GPU for an hour.

``mfu`` (model FLOPs utilisation) defaults to ``DEFAULT_MFU``, an assumption, not a fit: the time is
labelled projected. QLoRA's dequantisation is not in the FLOPs (it makes QLoRA slower than LoRA: LitGPT's
resource table, cited in llm/data/llm_references.csv, shows 3.68 vs 2.36 min per 1k iterations for
Llama 2 7B on one A100).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from rightsize.catalog.model import Catalog
from rightsize.catalog.query import filter_instances
from rightsize.errors import SpecError
from rightsize.llm.finetune import finetune_memory
from rightsize.llm.shape import DecoderShape, decoder_shape
from rightsize.memory_budget import GIB, usable_gpu_bytes
from rightsize.plan.coldstart import spin_up
from rightsize.spec.targets import ColdStart

__all__ = ["DEFAULT_MFU", "FinetuneOption", "flops_per_token", "plan_finetune"]

# Model FLOPs utilisation of a fine-tuning run: assumed (PaLM reports 46% MFU for pre-training at scale,
# Chowdhery et al. 2022, https://arxiv.org/abs/2204.02311, Table 3; single-node fine-tuning with eager
# PyTorch usually runs lower). Override with --mfu once a run of yours shows its own.
DEFAULT_MFU = 0.35


@dataclass(frozen=True)
class FinetuneOption:
    provider: str
    region: str
    instance: str
    accelerator: str
    gpus: int
    zero_stage: int
    gib_per_gpu: float
    usable_gib_per_gpu: float
    hours: float  # billed: training + spin-up
    usd_per_hour: float
    usd: float
    train_hours: float = 0.0
    spinup_hours: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def flops_per_token(shape: DecoderShape, method: str, gradient_checkpointing: bool) -> float:
    """Training FLOPs per token (module docstring, step 2)."""
    n = float(shape.params())
    base = 6.0 * n if method == "full" else 4.0 * n
    return base + (2.0 * n if gradient_checkpointing else 0.0)


def plan_finetune(
    model: str | DecoderShape,
    method: str,
    *,
    tokens: float,
    batch: int,
    seq_len: int,
    catalog: Catalog,
    precision: str = "bf16",
    lora_rank: int = 16,
    lora_targets: str | Sequence[str] = ("q", "k", "v", "o"),
    gradient_checkpointing: bool = True,
    mfu: float = DEFAULT_MFU,
    purchase: str = "on_demand",
    providers: Sequence[str] | None = None,
) -> list[FinetuneOption]:
    """GPU instances that hold the fine-tune, cheapest total first (module docstring)."""
    if tokens <= 0:
        raise SpecError("tokens", f"must be > 0 (tokens to train on, epochs x dataset tokens), got {tokens:g}")
    if not 0 < mfu <= 1:
        raise SpecError("mfu", f"must be in (0, 1], got {mfu:g}")
    shape = model if isinstance(model, DecoderShape) else decoder_shape(model)
    per_token = flops_per_token(shape, method, gradient_checkpointing)
    up = spin_up(ColdStart.model_validate({}), gpu=True).total_hours
    out: list[FinetuneOption] = []
    for inst in filter_instances(catalog.instances, providers=providers, device_class="gpu"):
        price = inst.price_usd_per_hour(purchase)
        acc = catalog.accelerators.get(inst.accelerator or "")
        if price is None or acc is None:
            continue
        n = inst.accelerator_count
        usable = usable_gpu_bytes(acc.memory_gib * GIB)
        for stage in (0, 3) if n > 1 else (0,):
            mem = finetune_memory(shape, method, batch=batch, seq_len=seq_len, precision=precision,
                                  lora_rank=lora_rank, lora_targets=lora_targets,
                                  gradient_checkpointing=gradient_checkpointing, zero_stage=stage, gpus=n)  # fmt: skip
            if mem.total_bytes <= usable:
                peak = acc.peak_flops_per_s("bf16") or acc.peak_flops_per_s("fp16")  # T4, V100: no bf16
                train = tokens * per_token / (n * peak * mfu) / 3600.0
                out.append(FinetuneOption(inst.provider, inst.region, inst.instance_type, acc.name, n, stage,
                                          round(mem.total_bytes / GIB, 2), round(usable / GIB, 2), train + up, price,
                                          (train + up) * price, train, up))  # fmt: skip
                break
    return sorted(out, key=lambda o: (round(o.usd, 6), o.hours))
