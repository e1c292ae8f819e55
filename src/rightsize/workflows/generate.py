"""Generative (decoder) serving plans from a spec: the model's shape, the target, the catalog -> ``LLMPlan``."""

from __future__ import annotations

from pathlib import Path

from rightsize.catalog.model import Catalog
from rightsize.errors import SpecError
from rightsize.llm.plan import LLMPlan, plan_generative
from rightsize.llm.shape import decoder_shape
from rightsize.spec.schema import Workload
from rightsize.spec.targets import Targets


def generative_purchase(targets: Targets) -> str:
    """The one purchase a generative plan prices at: on-demand when the spec allows it, else its first."""
    return "on_demand" if "on_demand" in targets.purchase else targets.purchase[0]


def plan_generative_spec(workload: Workload, catalog: Catalog, spec_dir: Path | None = None, seed: int = 0) -> LLMPlan:
    """Plan ``workload.targets.generative`` over ``catalog`` (CSV lengths resolve relative to ``spec_dir``)."""
    targets = workload.targets
    if targets is None or targets.generative is None:
        raise SpecError("targets.generative", "needs a generative target (rate_per_s, ttft, tpot)")
    shape = decoder_shape(workload.model, workload.tiny, spec_dir)
    purchase = generative_purchase(targets)
    plan = plan_generative(shape, targets.generative, catalog, purchase=purchase, providers=targets.providers,
                           regions=targets.regions, instances=targets.instances, base_dir=spec_dir,
                           seed=seed)  # fmt: skip
    if purchase != "on_demand":
        plan.notes.append("priced at spot; generative plans do not yet weigh interruptions")
    rec = plan.recommendation
    if rec is not None and rec.device_class == "cpu":
        plan.notes.append(CPU_ENGINE_NOTE)
    return plan


# A CPU recommendation rests on the roofline of an optimised CPU engine; rightsize's own eager engine served
# slower (docs/generative.md: the projected step at x0.42-x1.08 of the measured one on the 2-vCPU dev VM,
# 2026-11-26/27; x0.26-x0.51 on one vCPU of a lent Sapphire Rapids host, 2026-11-27, where that vCPU itself ran
# below the family's per-core rates, which an optimised engine would meet too)
CPU_ENGINE_NOTE = (
    "CPU step times assume an optimised CPU engine (llama.cpp, vLLM's or OpenVINO's CPU backend); rightsize's own "
    "eager engine measured up to ~4x slower than projected (one Sapphire Rapids vCPU; ~2.4x on a 2-vCPU AMD VM; "
    "docs/generative.md): time the engine you will deploy before you commit to this plan"
)
