"""What a plan returns: ranked candidates, the recommendation, the Pareto frontier, and the reasons.

Every number a candidate carries says where it came from (``provenance``: measured | projected |
rule) and which price snapshot it used (``price_date``). ``PlanResult.to_dict()`` is the JSON that
``rightsize plan --json`` prints and the report renders.

    PlanResult
    ├── recommendation: Candidate | None    the cheapest feasible candidate (ties: faster)
    ├── candidates: [Candidate]             ranked: feasible by cost, then infeasible by how close
    ├── pareto: [Candidate]                 cost vs latency (online) or cost vs time (batch, training)
    ├── why / why_not                       plain-language reasons for the pick and against the best
    │                                       alternative of the other device class
    └── warnings, assumptions               common mistakes spotted; defaults used, with sources
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

from rightsize.models.byo import engine_of
from rightsize.profile import Latency, ServiceCurve

PlanKind = Literal["online", "batch", "training", "rules", "generative"]
DeviceClass = Literal["cpu", "gpu"]
Provenance = Literal["measured", "projected", "rule"]
# a "measured" row was timed on this machine, taken as the instance when its CPU family and cores (or its GPU model)
# match; "this very device" had claimed this VM was the instance
MEASURED_WORDS = ("times measured here, on the same CPU family and cores (or GPU) as the instance, with no band: a "
                  "shared machine's timings move between runs")  # fmt: skip

__all__ = ["Batching", "Candidate", "LatencyPrediction", "PlanKind", "PlanResult", "SpotPlan"]


@dataclass(frozen=True)
class Batching:
    """Micro-batching policy of one replica (Triton semantics: wait counts from the oldest request)."""

    max_batch: int  # samples per batch
    max_wait_ms: float  # longest the oldest queued request waits for a batch to fill


@dataclass(frozen=True)
class LatencyPrediction(Latency):
    """Predicted end-to-end request latency (queueing + batching wait + service): a ``Latency`` in
    milliseconds with the deployment behind it."""

    utilization: float = 0.0  # busy fraction of each replica, 0..1
    mean_batch: float = 1.0  # samples per executed batch
    method: str = "simulation"  # simulation | fluid
    p_target_ms: float | None = None  # at the spec's percentile (e.g. p90), when not one of the above
    # The same percentile under the service curve's band (projected curves): (optimistic, pessimistic).
    band_ms: tuple[float, float] | None = None


@dataclass(frozen=True)
class SpotPlan:
    """Spot with checkpointing (Young/Daly), docs/sources.md `young-daly`."""

    interruptions_per_hour: float
    checkpoint_interval_min: float  # Daly's tau*
    expected_hours: float  # expected wall time including checkpoints, lost work and restarts
    p_meet_deadline: float | None  # probability of finishing by the deadline (None: no deadline)
    policy: str  # "spot" | "mixed" (spot until slack runs out, then on-demand)
    expected_cost_usd: float
    # interruptions that stall the job, per hour: all of them for a synchronous job (training: any node's stops
    # every node), one instance's for independent items (batch: the others go on); None: interruptions_per_hour
    stalls_per_hour: float | None = None
    # the work, without spin-up, interruptions or restarts: what the checkpoint interval is weighed against (the
    # expected wall time had been: the same job read "182 min of work" at 1 interruption/h and 160 at 0.2/h)
    work_hours: float | None = None


@dataclass
class Energy:
    """Power and energy of a candidate (``rightsize.plan.energy``): at its predicted utilization."""

    watts: float  # all instances, at the device
    utilization: float
    kwh_per_hour: float  # at the wall: x PUE
    basis: str  # "per 1M requests" (online), "job" (batch, training) or "per hour"
    kwh: float  # on that basis
    co2e_kg: float  # on that basis, with the region's grid factor
    pue: float
    grid_kg_per_kwh: float
    notes: list[str] = field(default_factory=list)
    device_share: float | None = None  # GPU: the share of its busy time the GPU computes (plan/energy.py)
    compute_share: float | None = None  # GPU: the share of that device time its math units work
    kwh_per_epoch: float | None = None  # training with epochs: one epoch's work (no spin-up), at the wall
    spin_up_min: float | None = None  # a job's spin-up, billed at the idle draw (``idle_watts``), inside ``kwh``
    idle_watts: float | None = None
    spare_watts: float | None = None  # a spot-only online plan's spare instance, standing by at the idle draw


@dataclass
class Candidate:
    """One way to run the workload. ``count`` is instances (online: those hosting ``replicas``; batch) or nodes
    (training)."""

    instance: str
    provider: str
    region: str
    device_class: DeviceClass
    device: str  # accelerator name ("A10G") or "cpu"
    count: int  # instances (online: instances hosting ``replicas``; training: nodes)
    precision: str
    purchase: str  # on_demand | spot | mixed
    cost_usd_per_hour: float  # all ``count`` instances together
    feasible: bool
    provenance: Provenance
    price_date: str
    batching: Batching | None = None
    latency: LatencyPrediction | None = None  # online
    runtime_hours: float | None = None  # batch: wall time; training: time to train
    cost_usd_total: float | None = None  # batch / training: whole job; online: None (see per hour)
    # batch / training: the run time and total at the band's slow edge, where the deadline and the budget are judged
    # (job_costs.finish); what a "to fix" quotes and a frontier point that misses only there names
    runtime_hours_at_edge: float | None = None
    cost_usd_total_at_edge: float | None = None
    cost_usd_per_1m_requests: float | None = None  # online
    throughput_per_s: float | None = None  # samples per second of the whole deployment
    gpus: int = 0  # accelerators in total
    replicas: int = 0  # online: serving replicas (one per GPU, or one per CPU instance)
    vcpus: int = 0  # per instance
    cold_start_s: float | None = None  # scale-from-zero: provisioning + image pull + model load
    memory_bytes: int | None = None  # estimated peak per device
    memory_capacity_bytes: int | None = None  # per device
    memory_at_load: bool = False  # memory_bytes is the load's peak (a CPU int8 worker quantizing), not serving's
    grad_accumulation: int = 1  # training
    spot: SpotPlan | None = None
    reasons: list[str] = field(default_factory=list)  # why infeasible (or notes when feasible)
    notes: list[str] = field(default_factory=list)
    price_source: str = ""
    band: tuple[float, float] = (1.0, 1.0)  # uncertainty multipliers on times (projected curves)
    kind_hint: str = ""  # set by the planner: online | batch | training | rules
    workers_per_instance: int = 1  # CPU: worker processes (replicas) per instance
    threads_per_worker: int | None = None  # CPU: intra-op threads of each worker (`rightsize serve --threads`)
    energy: Energy | None = None  # power, kWh and CO2e (rightsize.plan.energy)
    idle_policy: str | None = None  # online with part-time traffic: scale to zero or k warm (plan.coldstart)
    idle: dict[str, Any] | None = None  # the chosen idle policy's numbers (IdlePolicy.to_dict), for --json
    spot_interruptions_per_hour: float | None = None  # online on spot: the fleet's expected interruptions per hour
    scaling_efficiency: float | None = None  # training, 2+ workers: speed-up over one worker / workers
    curve: ServiceCurve | None = field(default=None, repr=False, compare=False)  # the service curve it was sized on

    @property
    def time_hours(self) -> float | None:
        return self.runtime_hours

    def to_dict(self) -> dict[str, Any]:
        d = asdict(replace(self, curve=None))
        d.pop("curve")  # the service curve it was sized on is the profile's and the projection's, not the plan's
        d["batching"] = asdict(self.batching) if self.batching else None
        if self.latency is not None:
            d["latency_ms"] = {
                "p50": self.latency.p50,
                "p95": self.latency.p95,
                "p99": self.latency.p99,
                "mean": self.latency.mean,
                "target_percentile": self.latency.p_target_ms,
                "band": list(self.latency.band_ms) if self.latency.band_ms else None,
            }
            d["utilization"] = self.latency.utilization
            d["mean_batch"] = self.latency.mean_batch
            d["latency_method"] = self.latency.method  # a simulation, or "fluid approximation" (estimated)
        else:
            d["latency_ms"] = None
        d.pop("latency", None)
        d["time_to_train_hours"] = self.runtime_hours if self.kind_hint == "training" else None
        if self.kind_hint in ("batch", "training"):  # jobs run on ``count`` instances; serving replicas are online's
            d["replicas"] = None
        d["band"] = list(self.band)
        return _clean(d)


@dataclass
class PlanResult:
    """The answer of one plan, ready for the CLI table, ``--json`` and the report."""

    kind: PlanKind
    workload: str  # spec name
    model: str
    target: dict[str, Any]  # the spec's targets, as given (plus defaults)
    recommendation: Candidate | None
    candidates: list[Candidate]  # ranked, best first (feasible ones first)
    pareto: list[Candidate]  # non-dominated feasible candidates, by cost ascending
    why: list[str] = field(default_factory=list)  # why the recommendation
    why_not: list[str] = field(default_factory=list)  # why not the best of the other device class
    alternative: Candidate | None = None  # that best alternative of the other device class
    alternative_model: str | None = None  # the model ref it runs when another engine planned it (ort:distilbert)
    # several engines planned: each other engine's model ref and its best plan (None: none feasible), for the report
    engine_plans: dict[str, tuple[str, Candidate | None]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)  # common mistakes spotted
    assumptions: dict[str, Any] = field(default_factory=dict)  # defaults used, with sources
    price_date: str = ""  # newest price date among candidates
    elapsed_s: float = 0.0  # planning time
    infeasible_summary: dict[str, int] = field(default_factory=dict)  # reason -> count
    fleet: dict[str, Any] | None = None  # online with a request_mix: one pool vs a size split (plan.fleet)

    @property
    def feasible(self) -> bool:
        return self.recommendation is not None

    def top(self, n: int) -> list[Candidate]:
        return self.candidates[:n]

    def to_dict(self, top: int | None = None) -> dict[str, Any]:
        cands = self.candidates if top is None else self.candidates[:top]
        return _clean(
            {
                "kind": self.kind,
                "workload": self.workload,
                "model": self.model,
                "engine": engine_of(self.model),  # what the model ref runs on: torch, onnxruntime or openvino
                "target": self.target,
                "feasible": self.feasible,
                "recommendation": self.recommendation.to_dict() if self.recommendation else None,
                "why": list(self.why),
                # with the model and engine it runs: `--json` had named none, a PyTorch plan's CPU alternative priced
                # on ONNX Runtime read as PyTorch int8
                "alternative": {**self.alternative.to_dict(), "model": alt, "engine": engine_of(alt)}
                if self.alternative and (alt := self.alternative_model or self.model)
                else None,
                "why_not": list(self.why_not),
                "engine_plans": {
                    name: None if c is None else {**c.to_dict(), "model": ref, "engine": engine_of(ref)}
                    for name, (ref, c) in self.engine_plans.items()
                },
                "candidates": [c.to_dict() for c in cands],
                "pareto": [c.to_dict() for c in self.pareto],
                "warnings": list(self.warnings),
                "assumptions": self.assumptions,
                "price_date": self.price_date,
                "elapsed_s": self.elapsed_s,
                "infeasible_summary": dict(self.infeasible_summary),
                "n_candidates": len(self.candidates),
                "fleet": self.fleet,
            }
        )


def _clean(obj: Any) -> Any:
    """NaN/inf -> None, tuples -> lists, recursively (JSON-safe)."""
    if isinstance(obj, float):
        return None if not math.isfinite(obj) else obj
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_clean(v) for v in obj]
    return obj
