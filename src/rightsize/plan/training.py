"""Training planner: step time from the training curve, memory fit (gradient accumulation / AMP),
data-parallel scaling across GPUs and nodes, time-to-train and cost per cluster size and purchase.

For an option (instance type x precision; bf16/fp16 curves are AMP autocast) on n nodes with g
accelerators each (CPU instances: one worker each), W = n g workers share the global batch B:

    b = ceil(B / W)                      per-worker batch per optimizer step
    m = min(b, largest batch that fits)  micro-batch; a = ceil(b / m) accumulation steps
    step = a t(m) / eff(g, n)            t from the curve (per worker, one micro-batch fwd+bwd+step)
    time = steps x step + spin-up        steps = ceil(dataset x epochs / B), or the spec's steps
    cost = n x price x time              on-demand; spot and mixed via ``spot.py``

eff(g, n) = e_intra^log2(g) x e_inter^log2(n) with per-doubling efficiencies (``ScalingModel``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from rightsize.catalog.model import Instance, Links
from rightsize.plan.coldstart import spin_up
from rightsize.plan.comm import all_reduce
from rightsize.plan.job_costs import copy_candidate, finish, spot_odds, spot_variant
from rightsize.plan.options import GIB, Option
from rightsize.plan.result import Batching, Candidate
from rightsize.profile import ServiceCurve
from rightsize.spec.targets import ColdStart, TrainingTarget

__all__ = ["ScalingModel", "node_counts", "plan_training", "training_steps"]

AMP_PRECISIONS = ("bf16", "fp16")
NOT_TRAINABLE = ("int8", "int4")  # quantised weights are for inference
MIN_GAIN_PER_NODE_STEP = 1.1  # a larger cluster must beat the best smaller one by 10% to keep adding nodes
# An instance the interconnect table lacks (most CPU instances): its network assumed at 10 Gbps, the "up to"
# figure of mid-size general-purpose instances, so a multi-node plan still pays its gradients' all-reduce (it
# fell back to a per-doubling efficiency of 0.97 whatever the gradient bytes: BERT-base's 440 MB over 4 CPU
# nodes planned as scaling almost perfectly). A row in interconnect.csv replaces it.
DEFAULT_NETWORK_GBPS = 10.0
SMALL_WORKER_BATCH = 8  # a worker's batch under this leaves most devices idle: say so and suggest a larger batch


@dataclass(frozen=True)
class ScalingModel:
    """Data-parallel efficiency per doubling of workers (1.0 = linear).

    Defaults (docs/sources.md `scaling`): NVIDIA DeepLearningExamples ResNet-50 on 8 A100s in one node scales
    7.72x in TF32 -> (7.72/8)^(1/3) = 0.988 per doubling, and 6.72x with AMP -> (6.72/8)^(1/3) = 0.944
    (faster compute, same communication). Across nodes, Horovod keeps ~90% at 512 GPUs over 25 Gb/s
    RoCE, i.e. from 8-GPU nodes 0.90^(1/6) = 0.983 per doubling of nodes.
    """

    intra_fp32: float = 0.988
    intra_amp: float = 0.944
    inter: float = 0.983
    source: str = "docs/sources.md `scaling` (NVIDIA DeepLearningExamples ResNet-50 8xA100; Horovod 512 GPUs)"

    @classmethod
    def uniform(cls, per_doubling: float) -> ScalingModel:
        return cls(per_doubling, per_doubling, per_doubling, "spec: targets.training.scaling_efficiency")

    def efficiency(self, per_node: int, nodes: int, precision: str) -> float:
        intra = self.intra_amp if precision in AMP_PRECISIONS else self.intra_fp32
        return intra ** math.log2(max(1, per_node)) * self.inter ** math.log2(max(1, nodes))


def _micro_words(batch: int, accum: int) -> str:
    """The micro-batch size, or the range of an uneven split: "7" or "6-7"."""
    small, extra = divmod(batch, accum)
    return str(small) if not extra else f"{small}-{small + 1}" if small else "1"


def _accumulated_ms(curve: ServiceCurve, batch: int, accum: int) -> float:
    """One optimizer step of ``batch`` samples in ``accum`` micro-batches as even as they split (32 in 5: 7, 7, 6,
    6, 6), each timed at its own size: 5 x 7 would time 35 samples."""
    small, extra = divmod(batch, accum)
    return extra * curve.t_ms(small + 1) + (accum - extra) * (curve.t_ms(small) if small else 0.0)


def training_steps(target: TrainingTarget) -> int:
    if target.steps is not None:
        return target.steps
    assert target.dataset_size is not None and target.epochs is not None
    return max(1, math.ceil(target.dataset_size * target.epochs / target.batch_size))


def node_counts(max_nodes: int) -> list[int]:
    """1..8, then powers of two up to ``max_nodes``."""
    out = [n for n in (1, 2, 3, 4, 6, 8) if n <= max_nodes]
    n = 16
    while n <= max_nodes:
        out.append(n)
        n *= 2
    if max_nodes not in out:
        out.append(max_nodes)
    return out


def plan_training(
    options: Sequence[Option],
    target: TrainingTarget,
    purchase: Sequence[str] = ("on_demand", "spot"),
    cold: ColdStart | None = None,
    rate_of: Callable[[Instance], float | None] | None = None,
    scaling: ScalingModel | None = None,
    spot_mc_top: int = 16,
    seed: int = 0,
    links: Mapping[tuple[str, str], Links] | None = None,
) -> list[Candidate]:
    """Candidates for every option x node count x purchase option, unranked (infeasible ones say why)."""
    cold = cold or ColdStart.model_validate({})
    scale = scaling or (
        ScalingModel.uniform(target.scaling_efficiency) if target.scaling_efficiency else ScalingModel()
    )
    steps = training_steps(target)
    out: list[Candidate] = []
    work: dict[int, float] = {}  # id(candidate) -> compute hours (no spin-up, no interruptions)
    for opt in options:
        if opt.precision in NOT_TRAINABLE:
            continue
        link = (links or {}).get((opt.instance.provider, opt.instance.instance_type))
        for c, hours in _option(opt, target, steps, purchase, cold, scale, rate_of, link):
            out.append(c)
            work[id(c)] = hours
    ckpt_h, restart_h = target.checkpoint_minutes / 60.0, target.restart_minutes / 60.0
    out += spot_odds(out, work, target.deadline_hours, target.budget_usd, ckpt_h, restart_h, spot_mc_top, seed)
    return out


def _option(
    opt: Option,
    target: TrainingTarget,
    steps: int,
    purchase: Sequence[str],
    cold: ColdStart,
    scale: ScalingModel,
    rate_of: Callable[[Instance], float | None] | None,
    links: Links | None = None,
) -> list[tuple[Candidate, float]]:
    inst, curve = opt.instance, opt.curve
    gpu = inst.accelerator is not None
    up = spin_up(cold, gpu)
    per_node = opt.per_instance
    fit = (1 << 30) if opt.memory is None else opt.memory.max_batch(opt.usable_bytes)
    grads = opt.memory.gradient_bytes if opt.memory is not None else None
    assumed = ""  # the note of a network the catalog lacks
    if links is None and grads:
        assumed = f"no network figure in the catalog: assumed {DEFAULT_NETWORK_GBPS:g} Gbps"
        assumed += " (add a row to interconnect.csv)"
        links = Links(DEFAULT_NETWORK_GBPS, 0.0, assumed)
    out: list[tuple[Candidate, float]] = []
    best_rate = 0.0
    one_ms: float | None = None  # one worker's step at the whole global batch: the speed-up's reference
    for nodes in node_counts(target.max_nodes):
        first = len(out)
        workers = nodes * per_node
        base = _base(opt, nodes, workers, target)
        base.cold_start_s = up.total_s
        if workers > target.batch_size:
            if nodes == 1:
                base.reasons.append(
                    f"global batch {target.batch_size} is smaller than the {workers} workers of one instance"
                )
                out.append((base, 0.0))
            break
        b = math.ceil(target.batch_size / workers)
        if fit < 1:
            need = opt.need_bytes(1) or 0.0
            base.reasons.append(
                f"does not fit memory: weights + gradients + optimizer states + one sample need {need / GIB:.1f} GiB, "
                f"{opt.device} has {opt.usable_bytes / GIB:.1f} GiB usable (needs sharding such as ZeRO/FSDP, "
                "which rightsize does not plan)"
            )
            out.append((base, 0.0))
            break
        accum = math.ceil(b / min(b, fit))
        micro = math.ceil(b / accum)
        compute_ms = _accumulated_ms(curve, b, accum)
        if one_ms is None:
            one_accum = math.ceil(target.batch_size / min(target.batch_size, fit))
            one_ms = _accumulated_ms(curve, target.batch_size, one_accum)
        # the all-reduce from gradient bytes and links, unless the spec gives its own per-doubling efficiency
        if grads and links is not None and workers > 1 and not target.scaling_efficiency:
            ar = all_reduce(grads, per_node, nodes, links, compute_ms)
            step_ms = compute_ms + ar.lost_ms
            scaling = ar.describe(compute_ms)
        else:
            eff = scale.efficiency(per_node, nodes, curve.precision)
            step_ms = compute_ms / eff
            scaling = "one worker"
            if workers > 1:
                scaling = f"efficiency {eff:.2f} at this batch per worker (per-doubling model)"
        compute_h = steps * step_ms / 3.6e6
        base.batching = Batching(micro, 0.0)
        base.band = curve.band_at(micro)  # a projected curve's band at the micro-batch it runs
        base.grad_accumulation = accum
        opt.size_memory(base, micro)
        base.throughput_per_s = target.batch_size * 1000.0 / step_ms
        speedup = one_ms / step_ms
        base.scaling_efficiency = round(speedup / workers, 3)  # 1.0 for one worker
        if workers > 1:
            scaling += f"; x{speedup:.2f} the speed of one worker at the same global batch"
            if b < SMALL_WORKER_BATCH:
                scaling += (f" (batch {b} per worker: too small to keep {workers} workers busy; a larger "
                            "training.batch_size spreads better)")  # fmt: skip
            if assumed and nodes > 1:
                scaling += f"; {assumed}"
        base.notes.append(
            f"{workers} worker(s) x batch {b} ({accum} x micro-batch {_micro_words(b, accum)}); {scaling}; "
            f"spin-up {up.describe()}"
        )
        if accum > 1:
            base.notes.append(f"gradient accumulation x{accum}: batch {b} per worker does not fit in one pass")
        if "on_demand" in purchase:
            c = copy_candidate(base, "on-demand", inst.on_demand_usd_per_hour * nodes)
            finish(c, compute_h + up.total_hours, target.deadline_hours, target.budget_usd, fixed_hours=up.total_hours)
            out.append((c, compute_h))
        if "spot" in purchase:
            rate = rate_of(inst) if rate_of else None
            ckpt_h, restart_h = target.checkpoint_minutes / 60.0, target.restart_minutes / 60.0
            sc = spot_variant(
                base, inst, nodes, compute_h, up.total_hours, ckpt_h, restart_h, rate,
                target.deadline_hours, target.budget_usd,
            )  # fmt: skip
            if sc is not None:
                out.append((sc, compute_h))
        rate = target.batch_size / step_ms
        if nodes > 1 and rate < MIN_GAIN_PER_NODE_STEP * best_rate:
            for c, _ in out[first:]:
                c.notes.append(
                    f"adding nodes stops here: {nodes} nodes run {rate / best_rate:.2f}x the best smaller cluster's "
                    "rate (communication eats the gain)"
                )
            break  # more nodes only add communication
        best_rate = max(best_rate, rate)
    return out


def _base(opt: Option, nodes: int, workers: int, target: TrainingTarget) -> Candidate:
    inst = opt.instance
    return opt.candidate(
        count=nodes,
        cost_usd_per_hour=inst.on_demand_usd_per_hour * nodes,
        gpus=workers if inst.accelerator else 0,
        kind_hint="training",
    )
