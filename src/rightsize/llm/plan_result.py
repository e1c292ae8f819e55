"""The generative plan's result: one candidate per instance type (``LLMCandidate``) and the plan (``LLMPlan``) with
its replicas' step costs and sampled lengths, for the CLI, ``--json``, the report and the store
(``rightsize.llm.plan`` builds it)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from rightsize.llm import sizing
from rightsize.llm.costs import StepCosts
from rightsize.llm.sim import LLMSimConfig
from rightsize.spec.targets import GenerativeTarget
from rightsize.units import format_usd

__all__ = ["NO_TPOT", "LLMCandidate", "LLMPlan"]


@dataclass(frozen=True)
class LLMCandidate:
    """One instance type serving the target: replicas of ``tp`` GPUs (or one CPU replica per instance)."""

    provider: str
    region: str
    instance: str
    device: str  # accelerator name or CPU family
    device_class: str  # gpu | cpu
    tp: int  # 1 for a CPU replica (all its cores); printed "-" (``tp_words``) and null in ``to_dict``
    replicas: int
    instances: int
    usd_per_hour: float
    kv_tokens: int  # per replica
    ttft_ms: float  # at the target's percentile, at the band's edge
    tpot_ms: float
    output_tokens_per_s: float  # whole fleet, at the target rate
    usd_per_m_output_tokens: float
    meets: bool
    over_budget: bool = False
    why: str = ""
    step_source: str = ""
    price_source: str = ""  # the catalog row's source (is_unverified: a price not read off a price list)
    price_date: str = ""  # the catalog row's YYYY-MM (the online plan's rows carried it; these had not)
    busy: float = 0.0  # a replica's simulated busy fraction at the target rate
    device_share: float = 1.0  # of its busy time, the share the GPU works (the rest it waits on an eager host)
    compute_share: float = 0.0  # of the GPU's work, the share its math units do (prefill; decode GEMMs)
    # energy (rightsize.plan.energy: Cloud Carbon Footprint's watts at this utilization, x the cloud's PUE)
    watts: float | None = None
    kwh_per_m_output_tokens: float | None = None
    co2e_kg_per_m_output_tokens: float | None = None

    def gpu_work(self) -> str:
        """What the GPUs do of the fleet's busy time, in words ("" for a CPU candidate): the CLI and the report."""
        if self.device_class != "gpu" or round(self.busy, 2) == 0:  # a share of no busy time says nothing
            return ""
        return f"the GPUs working {self.device_share:.0%} of it, their math units {self.compute_share:.0%} of that"

    def tp_words(self) -> str:
        """The tensor-parallel degree as the table and the report print it: "-" for a CPU replica, which has none
        (it had read "tp 1")."""
        return str(self.tp) if self.device_class == "gpu" else "-"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        if self.device_class != "gpu":  # a CPU draws by its utilization alone: no device or math share to report
            d["device_share"] = d["compute_share"] = None
            d["tp"] = None  # no tensor parallelism (``state`` keeps the 1 the energy arithmetic counts GPUs by)
        return d


# _replicas' reason when one request alone misses: its TTFT and TPOT with their bounds (no TPOT: one output token)
_CAPPED = "more than max_replicas="  # the start of a reason no replica count under the cap meets the SLOs with
_ALONE = re.compile(r"TTFT p[\d.]+ ([\d.]+) ms \(bound ([\d.]+)\)(?:, TPOT p[\d.]+ ([\d.]+) ms \(bound ([\d.]+)\))?")
NO_TPOT = "n/a (1 output token)"  # the TPOT of a plan whose requests all ask for one output token


@dataclass
class LLMPlan:
    candidates: list[LLMCandidate]
    infeasible: list[tuple[str, str]]  # (instance, reason)
    notes: list[str] = field(default_factory=list)
    # per candidate (provider, region, instance): its replica's step costs at the band's edge and scheduler
    # limits, for sweeps (report); not in to_dict
    replicas: dict[tuple[str, str, str], tuple[StepCosts, LLMSimConfig]] = field(default_factory=dict)
    prompts: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    outputs: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    def sweep(self, c: LLMCandidate, target: GenerativeTarget, factors: Sequence[float], seed: int = 0
              ) -> list[tuple[float, float, float]]:  # fmt: skip
        """(fleet rate, TTFT at the target's percentile, TPOT at its percentile) of ``c`` at ``factors`` x the
        target rate, over the same replicas (the report's TTFT/TPOT vs rate). Rates past capacity are left out:
        their queue grows for as long as the run lasts (QUEUE_GROWTH), so their TTFT says how long the simulation
        ran, not what a user waits."""
        costs, cfg = self.replicas[(c.provider, c.region, c.instance)]
        out = []
        for f in factors:
            rate = target.rate_per_s * f
            lv = sizing.level(costs, cfg, rate, c.replicas, self.prompts, self.outputs, target, seed)
            if math.isfinite(lv.ttft_ms) and not lv.growing:
                out.append((rate, lv.ttft_ms, lv.tpot_ms))
        return out

    def state(self) -> dict[str, Any]:
        """What a report needs to be written later from the store (``from_state``): every candidate, each
        replica's step costs and scheduler limits, the sampled lengths. JSON-safe."""
        return {
            "candidates": [asdict(c) for c in self.candidates],
            "infeasible": [list(x) for x in self.infeasible],
            "notes": list(self.notes),
            "replicas": [
                {"key": list(k), "costs": asdict(step), "sim": asdict(cfg)} for k, (step, cfg) in self.replicas.items()
            ],
            "prompts": self.prompts.tolist(),
            "outputs": self.outputs.tolist(),
        }

    @classmethod
    def from_state(cls, d: Mapping[str, Any]) -> LLMPlan:
        """The plan ``state`` stored."""

        def costs(c: Mapping[str, Any]) -> StepCosts:
            tuples = ("prefill_floor", "decode_floor", "decode_by_seqs")
            fields: dict[str, Any] = {k: tuple(v) if k in tuples else v for k, v in c.items()}
            return StepCosts(**fields)

        return cls(
            candidates=[LLMCandidate(**c) for c in d["candidates"]],
            infeasible=[(str(i), str(r)) for i, r in d["infeasible"]],
            notes=list(d["notes"]),
            replicas={tuple(r["key"]): (costs(r["costs"]), LLMSimConfig(**r["sim"])) for r in d["replicas"]},
            prompts=np.asarray(d["prompts"], dtype=np.int64),
            outputs=np.asarray(d["outputs"], dtype=np.int64),
        )

    @property
    def judges_tpot(self) -> bool:
        """False when every request asks for one output token: none has a time per output token, so the plan's
        TPOT (0) is no figure to print or judge."""
        return bool((self.outputs > 1).any()) if self.outputs.size else True

    def tpot_words(self, tpot_ms: float, cell: bool = False) -> str:
        """A TPOT as the CLI and the report print it: "58.9 ms", or ``NO_TPOT`` (it had read "0.0 ms"); ``cell``: a
        table's, "n/a" (the plan's note says why)."""
        return f"{tpot_ms:.1f} ms" if self.judges_tpot else "n/a" if cell else NO_TPOT

    def within_budget(self) -> list[LLMCandidate]:
        """The plans that meet the SLOs within the budget, cheapest first: what may be recommended or offered."""
        return [c for c in self.candidates if c.meets and not c.over_budget]

    @property
    def recommendation(self) -> LLMCandidate | None:
        ok = self.within_budget()
        return ok[0] if ok else None

    def best(self, device_class: str) -> LLMCandidate | None:
        """The cheapest of ``device_class`` within the budget, as the other planners' alternative (over budget is
        infeasible there): an over-budget GPU plan had been printed as "best GPU plan" beside the recommendation,
        unmarked. The table still lists it, marked "(over budget)"; ``why_none`` names one when none is within."""
        return next((c for c in self.within_budget() if c.device_class == device_class), None)

    def infeasible_by_interest(self) -> list[tuple[str, str]]:
        """The options that cannot serve it, the telling ones first: GPU options that hold the model but miss the
        SLOs, nearest miss first (how far they miss is what to change), then other SLO misses, then those that
        cannot hold it."""

        def miss(reason: str) -> float:  # worst of TTFT / bound and TPOT / bound of a "one request alone" reason
            m = _ALONE.search(reason)
            if m is None:
                return math.inf
            return max(float(m[1]) / float(m[2]), float(m[3]) / float(m[4]) if m[3] else 0.0)

        return sorted(self.infeasible, key=lambda ir: (ir[1].startswith("weights "), " tp=" not in ir[0], miss(ir[1])))

    def why_none(self, budget_usd_per_hour: float | None = None) -> str | None:
        """Why there is no recommendation, with the fix (None when there is one)."""
        if self.recommendation is not None:
            return None
        over = next((c for c in self.candidates if c.meets), None)
        if over is not None:  # every plan that meets the SLOs is over budget
            return (f"no plan meets the target within the budget of {format_usd(budget_usd_per_hour or 0)}/h: the "
                    f"cheapest that meets the SLOs is {over.instances} x {over.instance} ({over.device}) at "
                    f"{format_usd(over.usd_per_hour)}/h. To fix: raise budget_usd_per_hour"
                    + (", lower the rate" if over.instances > 1 else "")  # one instance is the least there is
                    + ", or lower weight_precision (int8/int4: fewer, smaller GPUs)")  # fmt: skip
        shown = self.infeasible_by_interest()
        # with no plan, options that meet the SLOs but need more than max_replicas are the telling ones: only the cap
        # stops them
        shown = sorted(shown, key=lambda ir: not ir[1].startswith(_CAPPED))
        closest = f" (e.g. {shown[0][0]}: {shown[0][1]})" if shown else ""
        if shown and shown[0][1].startswith(_CAPPED):
            return (f"no instance option meets the SLOs within the replica cap{closest}. To fix: raise "
                    "targets.generative.max_replicas, lower the rate, or plan a smaller model or lower "
                    "weight_precision")  # fmt: skip
        return (f"no instance option meets the SLOs{closest}. To fix: relax the TTFT or TPOT bounds, lower the rate, "
                "or plan a smaller model or lower weight_precision")  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        rec = self.recommendation
        return {
            "recommendation": rec.to_dict() if rec else None,
            "best_cpu": (c.to_dict() if (c := self.best("cpu")) else None),
            "best_gpu": (c.to_dict() if (c := self.best("gpu")) else None),
            "candidates": [c.to_dict() for c in self.candidates],
            "infeasible": [
                {"instance": name, "tp": int(tp) if tp else None, "reason": r}
                for (name, _, tp), r in ((i.partition(" tp="), r) for i, r in self.infeasible)
            ],
            "notes": self.notes,
        }
