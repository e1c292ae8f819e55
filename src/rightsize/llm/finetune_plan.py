"""Fine-tuning plans for decoders: which GPU instance holds a full / LoRA / QLoRA fine-tune, with what
sharding, how long it takes and what it costs.

    options = plan_finetune("llama-7b", "lora", tokens=50e6, batch=4, seq_len=2048, catalog=load_catalog())
    options[0].instance, options[0].zero_stage, options[0].hours, options[0].usd

1. **Fit.** Per GPU instance (n GPUs of one kind): ``finetune_memory`` per GPU with ZeRO stage 0 (each GPU
   holds the whole model: data parallel), else stage 3 (FSDP: weights, gradients and optimizer states
   sharded over the n GPUs), against the usable memory of one GPU (``memory_budget``). When no single node
   holds it, ZeRO-3 over k = 2, 4 or 8 such nodes (the fewest that hold it; multi-GPU instances with a
   network figure in catalog/data/interconnect.csv only).
2. **Time.** FLOPs per trained token (Kaplan et al. 2020, https://arxiv.org/abs/2001.08361, §2.1: 2N
   forward, 4N backward for a full fine-tune of N parameters): full 6N; LoRA and QLoRA 4N (the frozen
   weights need the input gradients, 2N, but no weight gradients); +2N with activation checkpointing
   (the forward recomputed). hours = tokens x FLOPs per token / (n x dense bf16 peak x ``mfu``) / 3600.
   Across k nodes each step also moves ZeRO-3's traffic over each node's network link: the stored weights
   gathered twice (forward, and backward) and the trained gradients reduce-scattered, (k - 1) / k x
   ``FinetuneMemory.zero3_step_bytes`` (a full fine-tune in 16 bits: 3 x 2 bytes x N, Rajbhandari et al. 2020,
   https://arxiv.org/abs/1910.02054, §7, communication analysis: 3Ψ, 1.5x data parallelism's all-reduce; 4-byte
   words in fp32; an adapter's frozen base sends no gradients) at ``plan.comm.LINK_EFFICIENCY`` of the link,
   none of it hidden (the rule ``plan.comm`` states for inter-node traffic); a step is B x S x k x n tokens.
3. **Cost.** (hours + spin-up) x the instance's price x nodes; cheapest first. Spin-up is the planner's own
   (``plan.coldstart.spin_up`` with the spec defaults: provision, a CUDA image pull, model load; docs/sources.md
   ``cold-start``): billed like the training, it is what makes an 8-GPU node for a 3-minute job cost more
   than one GPU for an hour.

``mfu`` (model FLOPs utilisation) defaults to ``DEFAULT_MFU``, an assumption, not a fit: the time is
labelled projected. QLoRA's dequantisation is not in the FLOPs but makes QLoRA slower than LoRA: every step
dequantises every NF4 weight, a cost per step, not per token, timed at the GPU's bandwidth
(``QLORA_DEQUANT_BYTES``, from LitGPT's resource table, cited in llm/data/llm_references.csv; ``qlora_note``
says so).

Prices: each option carries its catalog row's ``source`` and ``price_date``; ``unverified_note`` flags a
recommendation priced off a row not read off a price list (``catalog.model.is_unverified``), as ``rightsize plan``
does, naming the cheapest option on a verified row.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from rightsize.catalog.model import Accelerator, Catalog, is_unverified
from rightsize.catalog.model import unverified_note as price_note
from rightsize.catalog.query import filter_instances
from rightsize.errors import SpecError
from rightsize.llm.costs import EFFICIENCIES
from rightsize.llm.finetune import FinetuneMemory, finetune_memory
from rightsize.llm.shape import DecoderShape, decoder_shape
from rightsize.memory_budget import GIB, usable_gpu_bytes
from rightsize.plan.coldstart import spin_up
from rightsize.plan.comm import LINK_EFFICIENCY
from rightsize.spec.targets import ColdStart

__all__ = [
    "DEFAULT_MFU",
    "MULTI_NODES",
    "QLORA_DEQUANT_BYTES",
    "SMALL_STEP_TOKENS",
    "FinetuneOption",
    "dequant_seconds",
    "flops_per_token",
    "global_batch_note",
    "plan_finetune",
    "qlora_note",
    "small_step_note",
    "spin_up_hours",
    "step_seconds",
    "unverified_note",
]

MULTI_NODES = (2, 4, 8)  # node counts tried, fewest first, when one node does not hold the fine-tune

# Model FLOPs utilisation of a fine-tuning run: assumed (PaLM reports 46% MFU for pre-training at scale,
# Chowdhery et al. 2022, https://arxiv.org/abs/2204.02311, Table 3; single-node fine-tuning with eager
# PyTorch usually runs lower). Override with --mfu once a run of yours shows its own.
DEFAULT_MFU = 0.35
# Below this many tokens per GPU step a full fine-tune runs well under DEFAULT_MFU: the optimizer step over every
# parameter and the host's dispatch do not shrink with the batch. Llama 2 7B on an H200, pure bf16 AdamW
# (benchmarks/gpu/results/h200-2026-11-27/finetune_steps.json): 512 tokens a step ran at 10-12% MFU, 2048 and more
# at 36-46%. The plan times the optimizer's pass (FinetuneMemory.optimizer_step_traffic); the rest stays a note.
SMALL_STEP_TOKENS = 2048
# QLoRA's step is LoRA's plus dequantising every NF4 weight to 16 bits on each forward and backward (bitsandbytes'
# matmul_4bit; not in the FLOPs): a cost per step and per weight, not per token, so it is timed per step at the
# GPU's bandwidth, not as a factor on the math. LitGPT's resource table, "Finetuning with LoRA on 1 GPU", micro-batch
# 1, one A100-SXM4-40GB (1,555 GB/s, catalog row A100-40GB), bf16-true: Llama 2 7B 3.68 min per 1k iterations with
# bnb.nf4 against 2.36 min unquantised, 79.2 ms a step for its 6,476,005,376 NF4 weights: 19.0 bytes moved per weight
# at that bandwidth. Source:
# https://github.com/Lightning-AI/litgpt/blob/0cc02afa1dca7434418cf612690da13d38d294fd/tutorials/resource-tables.md
# (2023-10-27; llm/data/llm_references.csv, rows litgpt-llama2-7b-*). The same table's 13B row and its Adapter rows
# are the check (benchmarks/qlora_step_vs_published.py): a factor of 1.56 on the math had read a batch-4 x 2048 step
# on an L4 56% slower, where the dequantisation adds 5%.
QLORA_ANCHOR_STEP_S = (3.68 - 2.36) * 60.0 / 1000.0
QLORA_ANCHOR_WEIGHTS = 6_476_005_376  # Llama 2 7B's block linears (llm.finetune._Dims.block_linear_params)
QLORA_ANCHOR_BANDWIDTH = 1555e9  # A100-SXM4-40GB, bytes/s
QLORA_DEQUANT_BYTES = QLORA_ANCHOR_STEP_S * QLORA_ANCHOR_BANDWIDTH / QLORA_ANCHOR_WEIGHTS


def small_step_note(method: str, batch: int, seq_len: int) -> str | None:
    """A caveat for the hours of a full fine-tune whose steps are too small for the assumed MFU, else None."""
    n = batch * seq_len
    if method != "full" or n >= SMALL_STEP_TOKENS:
        return None
    return (f"{n:,} token{'s' if n > 1 else ''} a step: a full fine-tune's fixed work per step is large against its "
            "math at this size; the hours count the optimizer's pass over every weight, not the host's dispatch or "
            "small GEMMs (Llama 2 7B on an H200 at 512 tokens a step: 10-12% MFU, steps 20-43% longer than "
            "planned), so they may be short: a larger --batch or --seq amortises it")  # fmt: skip


def qlora_note(method: str) -> str | None:
    """What the QLoRA hours add to LoRA's (``QLORA_DEQUANT_BYTES``), else None."""
    if method != "qlora":
        return None
    return (f"QLoRA's steps add dequantising the NF4 weights, {QLORA_DEQUANT_BYTES:.0f} bytes moved per weight at the "
            "GPU's bandwidth, per step not per token: a larger --batch or --seq amortises it (LitGPT's resource table, "
            "Llama 2 7B on one A100: 3.68 vs 2.36 min per 1k iterations, 79 ms a step)")  # fmt: skip


def dequant_seconds(mem: FinetuneMemory, acc: Accelerator) -> float:
    """Seconds one GPU's step spends dequantising its NF4 weights (0 unless QLoRA): ``QLORA_DEQUANT_BYTES`` per
    weight at its datasheet bandwidth, the basis the constant was read at."""
    return QLORA_DEQUANT_BYTES * mem.nf4_weights / (acc.bandwidth_gbps * 1e9)


@dataclass(frozen=True)
class FinetuneOption:
    provider: str
    region: str
    instance: str
    accelerator: str
    gpus: int
    zero_stage: int
    gib_per_gpu: float  # unrounded: the table rounds it once, as the header rounds the one-GPU total
    usable_gib_per_gpu: float
    hours: float  # billed: training + spin-up
    usd_per_hour: float
    usd: float
    train_hours: float = 0.0
    spinup_hours: float = 0.0
    nodes: int = 1  # instances, ZeRO-3 across them when > 1 (``gpus`` is per node)
    network_share: float = 0.0  # of the training hours, the share the network's ZeRO-3 traffic takes
    optimizer_share: float = 0.0  # of the training hours, the share the optimizer step's pass over the weights takes
    price_source: str = ""  # the catalog row's source (is_unverified: a price not read off a price list)
    price_date: str = ""  # the catalog row's price_date, YYYY-MM or YYYY-MM-DD
    global_batch: int = 0  # sequences per optimizer step: the micro-batch per GPU x gpus x nodes

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["gib_per_gpu"], d["usable_gib_per_gpu"] = round(self.gib_per_gpu, 3), round(self.usable_gib_per_gpu, 3)
        return d


def flops_per_token(shape: DecoderShape, method: str, gradient_checkpointing: bool) -> float:
    """Training FLOPs per token (module docstring, step 2)."""
    n = float(shape.params())
    base = 6.0 * n if method == "full" else 4.0 * n
    return base + (2.0 * n if gradient_checkpointing else 0.0)


def step_seconds(mem: FinetuneMemory, acc: Accelerator, flops: float, peak: float, mfu: float) -> tuple[float, float]:
    """(math, optimizer) seconds of one GPU's step: its ``flops`` at ``mfu`` of ``peak`` (plus, for QLoRA, the
    dequantisation: ``dequant_seconds``), then the optimizer's pass over its trained weights
    (``mem.optimizer_step_traffic``) at the bandwidth decode streams weights at."""
    opt_s = mem.optimizer_step_traffic / (acc.bandwidth_gbps * 1e9 * EFFICIENCIES["gpu"].bandwidth)
    return flops / (peak * mfu) + dequant_seconds(mem, acc), opt_s


def spin_up_hours() -> float:
    """The spin-up every option bills (module docstring, step 3)."""
    return spin_up(ColdStart.model_validate({}), gpu=True).total_hours


def _peak(acc: Accelerator, precision: str) -> float:
    """The dense peak a fine-tune in ``precision`` runs at on ``acc`` (0: it cannot: bf16 on a GPU without bf16)."""
    base = {"amp_bf16": "bf16", "amp_fp16": "fp16"}.get(precision, precision)
    return acc.peak_flops_per_s(base)


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
    framework: str = "hf",
) -> list[FinetuneOption]:
    """GPU instances that hold the fine-tune, cheapest total first (module docstring)."""
    if tokens <= 0:
        raise SpecError("tokens", f"must be > 0 (tokens to train on, epochs x dataset tokens), got {tokens:g}")
    if not 0 < mfu <= 1:
        raise SpecError("mfu", f"must be in (0, 1], got {mfu:g}")
    shape = model if isinstance(model, DecoderShape) else decoder_shape(model)
    per_token = flops_per_token(shape, method, gradient_checkpointing)
    up = spin_up_hours()
    out: list[FinetuneOption] = []
    for inst in filter_instances(catalog.instances, providers=providers, device_class="gpu"):
        price = inst.price_usd_per_hour(purchase)
        acc = catalog.accelerators.get(inst.accelerator or "")
        if price is None or acc is None:
            continue
        n = inst.accelerator_count
        usable = usable_gpu_bytes(acc.usable_memory_gib * GIB)  # exposed_gib where recorded
        peak = _peak(acc, precision)
        if not peak:  # bf16 on a GPU without it (T4, V100), or no 16-bit peak in the catalog (P4)
            continue
        links = catalog.links.get((inst.provider, inst.instance_type))
        network = links.network_gbps / 8.0 * 1e9 * LINK_EFFICIENCY if links is not None else 0.0  # bytes/s
        layouts = [(1, 0), *([(1, 3)] if n > 1 else []), *((k, 3) for k in MULTI_NODES if n > 1 and network > 0)]
        for nodes, stage in layouts:
            gpus = nodes * n
            mem = finetune_memory(shape, method, batch=batch, seq_len=seq_len, precision=precision,
                                  lora_rank=lora_rank, lora_targets=lora_targets, zero_stage=stage, gpus=gpus,
                                  gradient_checkpointing=gradient_checkpointing, framework=framework)  # fmt: skip
            if mem.total_bytes > usable:
                continue
            # each GPU's step: its B x S tokens at the assumed MFU, then the optimizer's pass over its weights (or
            # their shard) at the bandwidth decode streams weights at; the hours are steps x that
            math_s, opt_s = step_seconds(mem, acc, batch * seq_len * per_token, peak, mfu)
            steps = tokens / (batch * seq_len * gpus)
            share = 0.0
            if nodes > 1:  # ZeRO-3 traffic over each node's link per step, against the step's compute
                net_s = (nodes - 1) / nodes * mem.zero3_step_bytes / network
                share = net_s / (math_s + opt_s + net_s)
            train = steps * (math_s + opt_s) / 3600.0 / (1.0 - share)
            out.append(FinetuneOption(inst.provider, inst.region, inst.instance_type, acc.name, n, stage,
                                      mem.total_bytes / GIB, usable / GIB, train + up,
                                      price * nodes, (train + up) * price * nodes, train, up, nodes,
                                      round(share, 4), round(opt_s / (math_s + opt_s) * (1.0 - share), 4),
                                      inst.source, inst.price_date, batch * gpus))  # fmt: skip
            break
    return sorted(out, key=lambda o: (round(o.usd, 6), o.hours))


def global_batch_note(options: Sequence[FinetuneOption], batch: int, tokens: float, seq_len: int) -> str | None:
    """Say that --batch is per GPU, so rows with more GPUs train a larger global batch in fewer optimizer steps (a
    different run: learning rate and warm-up tuned for one do not carry over), when the rows differ; else None.
    The micro-batch per GPU is kept, not the global batch (``rightsize plan``'s way): a global batch of 4 cannot be
    split over 8 GPUs, and the memory per GPU is what decides which rows hold it."""
    sizes = sorted({o.global_batch for o in options})
    if len(sizes) < 2:
        return None
    lo, hi = sizes[0], sizes[-1]
    return (f"--batch {batch} is the micro-batch per GPU: a row's global batch is {batch} x its GPUs (column "
            f"\"global batch\"), from {lo:,} sequences a step ({tokens / (lo * seq_len):,.0f} optimizer steps) to "
            f"{hi:,} ({tokens / (hi * seq_len):,.0f} steps) here: rows with more GPUs train a different run, fewer and "
            "larger steps; a smaller --batch on them (or gradient accumulation on fewer GPUs) keeps one global "
            "batch")  # fmt: skip


def unverified_note(options: Sequence[FinetuneOption], purchase: str = "on_demand") -> str | None:
    """Flag a recommendation (``options[0]``, cheapest first) priced off a catalog row marked for re-checking, with
    the cheapest option on a verified row; the wording of ``rightsize plan``'s (``llm.plan``, ``plan.explain``)."""
    if not options or not is_unverified(options[0].price_source, purchase):
        return None
    rec = options[0]
    v = next((o for o in options if not is_unverified(o.price_source, purchase)), None)
    if v is None:
        return price_note(rec.instance, rec.price_source)
    nodes = f"{v.nodes} x " if v.nodes > 1 else ""
    said = f"{nodes}{v.instance} ({v.gpus} x {v.accelerator}) at ${v.usd:,.2f} total, ${v.usd_per_hour:.2f}/h"
    return price_note(rec.instance, rec.price_source, said, v.usd / max(1e-9, rec.usd))
