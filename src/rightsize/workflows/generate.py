"""Generative (decoder) serving plans from a spec: the model's shape, the target, the catalog -> ``LLMPlan``."""

from __future__ import annotations

import json
from pathlib import Path

from rightsize.catalog.model import Catalog
from rightsize.errors import SpecError
from rightsize.llm.plan import LLMPlan, plan_generative
from rightsize.llm.shape import DecoderShape
from rightsize.spec.schema import Workload


def decoder_shape(model: str, tiny: bool = False, base_dir: Path | None = None) -> DecoderShape:
    """A zoo decoder by name, or ``hf:DIR`` holding a config.json of a decoder (no weights, no transformers)."""
    if model.startswith("hf:"):
        path = Path(model[3:])
        path = path if path.is_absolute() or base_dir is None else base_dir / path
        cfg = path / "config.json" if path.is_dir() else path
        try:
            data = json.loads(cfg.read_text())
        except (OSError, ValueError) as e:
            raise SpecError("model", f"cannot read a decoder config from {cfg}: {e}. To fix: point hf: at a "
                            "directory holding config.json") from None  # fmt: skip
        return DecoderShape.from_hf_config(data)
    from rightsize.models.zoo import get_entry

    entry = get_entry(model)
    if entry.family != "decoder":
        raise SpecError("model", f"{model} is a {entry.family}, not a decoder; targets.generative plans token "
                        "generation. To fix: use a decoder (gpt2, llama-1b, llama-7b, ...) "
                        "or an online target")  # fmt: skip
    return DecoderShape.from_zoo(model, tiny=tiny)


def plan_generative_spec(workload: Workload, catalog: Catalog, spec_dir: Path | None = None, seed: int = 0) -> LLMPlan:
    """Plan ``workload.targets.generative`` over ``catalog`` (CSV lengths resolve relative to ``spec_dir``)."""
    targets = workload.targets
    if targets is None or targets.generative is None:
        raise SpecError("targets.generative", "needs a generative target (rate_per_s, ttft, tpot)")
    shape = decoder_shape(workload.model, workload.tiny, spec_dir)
    purchase = "on_demand" if "on_demand" in targets.purchase else targets.purchase[0]
    plan = plan_generative(shape, targets.generative, catalog, purchase=purchase, providers=targets.providers,
                           regions=targets.regions, instances=targets.instances, base_dir=spec_dir,
                           seed=seed)  # fmt: skip
    if purchase != "on_demand":
        plan.notes.append("priced at spot; generative plans do not yet weigh interruptions")
    return plan
