"""Planning targets of a workload: what it must achieve, and the options the planner may use.

Defaults cite their source in ``docs/planning.md``; every field can be overridden in the spec.
"""

from __future__ import annotations

import math
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from rightsize.inputfile import yaml11_number

PurchaseOption = Literal["on_demand", "spot"]
Arrival = Literal["poisson", "bursty", "constant"]
Balancer = Literal["jsq", "p2c", "random"]
WorkloadKind = Literal["deep_learning", "classic_ml", "etl"]


_BOTH: tuple[PurchaseOption, ...] = ("on_demand", "spot")


def _numeric(annotation: Any) -> bool:
    """Whether a field's type takes numbers (int, float, optional or in a list/tuple), not booleans."""
    if annotation in (int, float):
        return True
    return any(_numeric(a) for a in get_args(annotation) if a is not type(None))


class SpecModel(BaseModel):
    """Base of every spec model: unknown fields are errors, numbers are finite, and a number is never a boolean
    (pydantic would read ``rate_per_s: true`` as 1 and ``percentile: true`` as p1, and plan from it)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _no_booleans_for_numbers(cls, value: Any, info: ValidationInfo) -> Any:
        field = cls.model_fields.get(info.field_name or "")
        if field is None or not _numeric(field.annotation):
            return value
        items = value if isinstance(value, list | tuple) else [value]
        for i, item in enumerate(items):
            where = f"[{i}] " if items is value else ""
            if isinstance(item, bool):
                raise ValueError(f"{where}must be a number (not a boolean), got {str(item).lower()}")
            if (why := yaml11_number(item)) is not None:  # `1:30`: text to the loader, 90 to YAML 1.1; pydantic
                raise ValueError(where + why)  # itself reads "1_000" as 1000 and "017" as 17
        if isinstance(value, str) and any(e in value for e in "eE"):  # YAML reads 5e6 (no dot) as a string
            try:
                return float(value)  # a whole number then passes an int field; 2.5e0 is refused there as fractional
            except ValueError:
                return value
        return value


class LatencyBound(SpecModel):
    percentile: float = Field(95, gt=0, lt=100, description="e.g. 95 for p95")
    bound_ms: float = Field(..., gt=0, le=86_400_000, description="latency bound at that percentile, milliseconds")


class RequestClass(SpecModel):
    """One size of request in a mix: ``share`` of all requests carry ``samples`` samples each."""

    samples: int = Field(..., ge=1, le=1_000_000, description="samples per request of this class")
    share: float = Field(..., gt=0, le=1, description="fraction of all requests")


class OnlineTarget(SpecModel):
    """Online inference: serve ``rate_per_s`` requests within a latency percentile bound."""

    rate_per_s: float = Field(
        ..., ge=1e-6, le=10_000_000, description="peak request rate (>= 1e-6: one request in 12 days)"
    )
    latency: LatencyBound = Field(..., description="latency bound, e.g. {percentile: 95, bound_ms: 80}")
    request_samples: int = Field(1, ge=1, le=1_000_000, description="samples per request")
    request_mix: list[RequestClass] | None = Field(
        None,
        min_length=1,
        max_length=16,
        description="requests of several sizes: [{samples, share}, ...], shares adding up to 1 (instead of "
        "request_samples); the plan then compares one pool with a fleet split by request size",
    )
    budget_usd_per_hour: float | None = Field(None, gt=0, le=1e9)
    arrival: Arrival = "poisson"
    burstiness: float = Field(4.0, ge=1, le=1000, description="peak-to-mean rate ratio of bursts (arrival: bursty)")
    burst_s: float = Field(1.0, gt=0, le=3600, description="mean length of one burst, seconds (arrival: bursty)")
    balancer: Balancer = Field("jsq", description="load balancer in front of the replicas: jsq, p2c or random")
    headroom: float = Field(0.8, gt=0, le=1, description="max planned utilisation per replica")
    max_replicas: int = Field(64, ge=1, le=10_000)

    @model_validator(mode="after")
    def _mix(self) -> OnlineTarget:
        if self.request_mix is None:
            return self
        if self.request_samples != 1:
            raise ValueError("request_mix: set request_samples or request_mix, not both (the mix gives the sizes)")
        sizes = [c.samples for c in self.request_mix]
        if len(set(sizes)) != len(sizes):
            raise ValueError(f"request_mix: each size once, got samples {sizes}; add the shares of a repeated size")
        total = sum(c.share for c in self.request_mix)
        if abs(total - 1.0) > 1e-6:
            raise ValueError(f"request_mix: shares add up to {total:g}; make them add up to 1")
        return self

    def sizes(self) -> list[tuple[int, float]]:
        """(samples, share) of every request size, by size: the mix, or request_samples alone."""
        if self.request_mix is None:
            return [(self.request_samples, 1.0)]
        return sorted((c.samples, c.share) for c in self.request_mix)


class BatchTarget(SpecModel):
    """Offline batch inference: process ``items`` before ``deadline_hours``."""

    items: int = Field(..., ge=1, le=10**13)
    deadline_hours: float = Field(..., gt=0, le=100_000)
    budget_usd: float | None = Field(None, gt=0, le=1e12)
    max_instances: int = Field(64, ge=1, le=10_000)


class TrainingTarget(SpecModel):
    """Training: ``epochs`` over ``dataset_size`` samples (or ``steps``) before ``deadline_hours``."""

    dataset_size: int | None = Field(None, ge=1, le=10**13, description="samples per epoch")
    epochs: float | None = Field(None, gt=0, le=1_000_000)
    steps: int | None = Field(None, ge=1, le=10**10)
    batch_size: int = Field(32, ge=1, le=10_000_000, description="global batch size")
    deadline_hours: float | None = Field(None, gt=0, le=100_000)
    budget_usd: float | None = Field(None, gt=0, le=1e12)
    checkpoint_minutes: float = Field(5.0, ge=0, le=100_000, description="time to write one checkpoint")
    restart_minutes: float = Field(15.0, ge=0, le=100_000, description="time to resume after an interruption")
    max_nodes: int = Field(8, ge=1, le=1024)
    scaling_efficiency: float | None = Field(
        None, gt=0, le=1, description="per-doubling data-parallel efficiency; default from the catalog"
    )

    @model_validator(mode="after")
    def _length(self) -> TrainingTarget:
        if self.steps is None and (self.dataset_size is None or self.epochs is None):
            raise ValueError("give either steps, or dataset_size and epochs")
        if self.steps is not None and (self.dataset_size is not None or self.epochs is not None):
            given = ", ".join(k for k in ("dataset_size", "epochs") if getattr(self, k) is not None)
            raise ValueError(f"give either steps, or dataset_size and epochs, not both (got steps and {given})")
        return self


class Lengths(SpecModel):
    """Token counts per request: ``fixed``, ``uniform: [lo, hi]`` (inclusive) or ``csv`` (a file with one count per
    row; ``column`` names which when the file has several), resolved relative to the spec's folder by the loader."""

    fixed: int | None = Field(None, ge=1, le=1_000_000)
    uniform: tuple[int, int] | None = Field(None, description="[lo, hi], inclusive")
    csv: str | None = Field(None, min_length=1, max_length=4096)
    column: str | None = Field(None, min_length=1, max_length=200)

    @model_validator(mode="after")
    def _one(self) -> Lengths:
        given = [k for k in ("fixed", "uniform", "csv") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of fixed, uniform, csv; got {', '.join(given) or 'none'}")
        if self.uniform is not None and not 1 <= self.uniform[0] <= self.uniform[1] <= 1_000_000:
            raise ValueError(f"uniform must be [lo, hi] with 1 <= lo <= hi <= 1000000, got {list(self.uniform)}")
        return self


def _lengths(v: object) -> object:
    """A bare count is ``{fixed: n}``; a mapping (or Lengths) is checked by Lengths; anything else is named."""
    if isinstance(v, (dict, Lengths)):
        return v
    if (why := yaml11_number(v)) is not None:  # float() reads "1_000" as 1000
        raise ValueError(why)
    n: float | None = None
    if isinstance(v, int) and not isinstance(v, bool):
        n = v
    elif isinstance(v, float) or (isinstance(v, str) and v.strip()):
        try:
            n = float(v)  # YAML reads 1e6 (no dot) as a string
        except ValueError:
            n = None
    if n is not None and math.isfinite(n) and float(n).is_integer():
        if not 1 <= n <= 1_000_000:  # checked here, so the error names the field the user wrote, not ".fixed"
            shown = int(n) if abs(n) < 1e15 else f"{n:g}"  # 1e300: not 300 digits
            raise ValueError(f"must be 1 to 1000000 tokens, got {shown}")
        return {"fixed": int(n)}
    raise ValueError("give a whole number of tokens (e.g. 512), {uniform: [lo, hi]} or {csv: FILE}")


WeightPrecision = Literal["fp16", "bf16", "int8", "int4"]
PlanPrecision = Literal["fp32", "tf32", "bf16", "fp16", "int8"]  # tf32: fp32 tensors, TF32 tensor-core math
ServingEngine = Literal["graphs", "eager"]  # rightsize.llm.costs: CUDA-graph replay, or eager dispatch per op


class GenerativeTarget(SpecModel):
    """Generative (decoder) serving: ``rate_per_s`` requests of prompt + output tokens, SLOs on time to first
    token (TTFT) and time per output token (TPOT). Lengths: an int, ``{uniform: [lo, hi]}`` or ``{csv: file}``."""

    rate_per_s: float = Field(..., ge=1e-6, le=1_000_000, description="request rate (>= 1e-6: one request in 12 days)")
    prompt_tokens: Lengths = Field(default_factory=lambda: Lengths(fixed=512))
    output_tokens: Lengths = Field(default_factory=lambda: Lengths(fixed=128))
    ttft: LatencyBound = Field(..., description="time to first token bound, e.g. {percentile: 95, bound_ms: 1000}")
    tpot: LatencyBound = Field(..., description="time per output token bound, e.g. {percentile: 50, bound_ms: 50}")
    weight_precision: WeightPrecision = Field("fp16", description="fp16 | bf16 | int8 | int4 weights")
    budget_usd_per_hour: float | None = Field(None, gt=0, le=1e9)
    max_replicas: int = Field(64, ge=1, le=10_000)
    max_seqs: int = Field(256, ge=1, le=65_536, description="most sequences one replica runs at once")
    engine: ServingEngine = Field(
        "graphs",
        description="graphs: the serving engine replays CUDA graphs (vLLM >= 0.6, TGI, TensorRT-LLM); eager: it "
        "dispatches every operator each step (rightsize serve on a GPU, HF generate), so no step beats the host",
    )

    @field_validator("prompt_tokens", "output_tokens", mode="before")
    @classmethod
    def _int_is_fixed(cls, v: object) -> object:
        return _lengths(v)


class ColdStart(SpecModel):
    """Scale-from-zero costs; defaults from docs/sources.md `cold-start` (VM boot ~25 s, large images 8-15 min)."""

    scale_from_zero: bool = False
    provision_s: float = Field(25.0, ge=0, le=1_000_000, description="VM boot to ready")
    image_pull_s: float = Field(120.0, ge=0, le=1_000_000, description="container image pull")
    model_load_s: float = Field(10.0, ge=0, le=1_000_000, description="load weights and warm up")
    min_warm_replicas: int = Field(1, ge=0, le=10_000)
    active_hours_per_day: float = Field(
        24.0, gt=0, le=24, description="online: hours a day with traffic; below 24 the plan weighs scaling to zero"
    )
    resumes_per_day: float = Field(1.0, ge=0, le=1440, description="online: times a day traffic resumes after idle")

    @model_validator(mode="after")
    def _zero_needs_scale_from_zero(self) -> ColdStart:
        # scale_from_zero is the switch that lets every replica go (docs/planning.md, part-time traffic); without it
        # min_warm_replicas 0 had been read as 1 without a word
        if self.min_warm_replicas == 0 and not self.scale_from_zero:
            raise ValueError("min_warm_replicas 0 keeps no replica warm, which needs scale_from_zero: true: set it "
                             "(or drop min_warm_replicas to keep 1 warm)")  # fmt: skip
        return self


class Targets(SpecModel):
    """At most one of ``online``, ``batch``, ``training``, ``generative``; plus purchase and catalog filters."""

    kind: WorkloadKind = "deep_learning"
    online: OnlineTarget | None = None
    batch: BatchTarget | None = None
    training: TrainingTarget | None = None
    generative: GenerativeTarget | None = None
    data_gb: float | None = Field(None, gt=0, le=1e9, description="dataset size in GB (classic_ml, etl)")
    rows: int | None = Field(None, ge=1, le=10**15, description="rows (classic_ml, etl)")
    purchase: list[PurchaseOption] = Field(default_factory=lambda: list(_BOTH), min_length=1)
    interruptions_per_hour: float | None = Field(
        None, ge=0, le=60, description="override the catalog's spot interruption rate"
    )
    # an empty list would filter out every instance: leave the key out to consider them all
    providers: list[str] | None = Field(None, min_length=1, max_length=64)
    regions: list[str] | None = Field(None, min_length=1, max_length=256)
    instances: list[str] | None = Field(None, min_length=1, max_length=4096, description="only these instance types")
    # the spec's top-level `precisions` is what to measure here; the plan weighs every precision the hardware runs
    # (int8 and bf16 projected where this machine lacks them) unless this lists the ones it may recommend
    precisions: list[PlanPrecision] | None = Field(
        None, min_length=1, max_length=5, description="only plan these precisions (default: any the hardware runs)"
    )
    cold_start: ColdStart = ColdStart()

    @model_validator(mode="after")
    def _one_goal(self) -> Targets:
        goals = [g for g in ("online", "batch", "training", "generative") if getattr(self, g) is not None]
        if len(goals) > 1:
            raise ValueError(f"give one of online, batch, training, generative; got {', '.join(goals)}")
        if self.kind == "deep_learning" and not goals:
            raise ValueError("give one of online, batch, training or generative (or kind: classic_ml / etl)")
        if self.kind != "deep_learning" and goals:
            # a rules plan (plan.rules) sizes a CPU from rows or data_gb and measures nothing: a deadline or SLO it
            # cannot check had been accepted and left out of the answer without a word
            raise ValueError(f"{goals[0]} cannot be checked: kind {self.kind} is planned by rules (a CPU family "
                             "and size from rows or data_gb; nothing is measured): drop it, or plan a model "
                             "with kind: deep_learning")  # fmt: skip
        if self.kind == "deep_learning" and (self.rows is not None or self.data_gb is not None):
            field = "rows" if self.rows is not None else "data_gb"
            raise ValueError(f"{field} sizes only kind: classic_ml or etl plans; a deep-learning plan sizes from "
                             "its measured model: drop it (a batch job's size is targets.batch.items)")  # fmt: skip
        return self
