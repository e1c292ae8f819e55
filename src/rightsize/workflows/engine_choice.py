"""Several engines measured and planned (``engines: [torch, onnxruntime]``): the cheapest feasible answer wins,
the others are reported beside it so the engine choice is visible and checkable (``workflows.plan.plan_spec``)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from rightsize.units import format_usd

if TYPE_CHECKING:
    from rightsize.plan import PlanResult

ENGINE_NAMES = {"torch": "PyTorch eager", "onnxruntime": "ONNX Runtime", "openvino": "OpenVINO"}


def _cost(result: PlanResult) -> float:
    rec = result.recommendation
    if rec is None:
        return math.inf
    return rec.cost_usd_total if rec.cost_usd_total is not None else rec.cost_usd_per_hour


def _cost_key(result: PlanResult) -> tuple[float, float]:
    """Cheapest first; at equal cost (both on the smallest instance) the faster answer."""
    rec = result.recommendation
    lat = rec.latency.p95 if rec is not None and rec.latency is not None else math.inf
    hours = rec.runtime_hours if rec is not None and rec.runtime_hours is not None else math.inf
    return round(_cost(result), 6), min(lat, hours)


def pick_engine(runs: list[tuple[str, PlanResult, dict[str, Any]]]) -> tuple[PlanResult, dict[str, Any]]:
    """The cheapest feasible engine's plan, with a line per other engine saying what it would cost."""
    engine, best, context = min(runs, key=lambda r: _cost_key(r[1]))
    lines = []
    for other, result, _ in runs:
        if other == engine:
            continue
        if result.recommendation is None:
            lines.append(f"engine {ENGINE_NAMES[other]}: no feasible plan")
        else:
            ratio = _cost(result) / _cost(best) if _cost(best) > 0 else math.inf
            rec = result.recommendation
            p95 = f", p95 {rec.latency.p95:.0f} ms" if rec.latency is not None else ""
            lines.append(
                f"engine {ENGINE_NAMES[other]}: best plan {rec.instance} {rec.precision} at "
                f"{format_usd(rec.cost_usd_per_hour)}/h{p95} ({ratio:.2f}x the cost)"
            )
    if best.recommendation is not None and not any(
        c.device_class != best.recommendation.device_class for c in best.candidates
    ):  # ONNX Runtime plans are CPU-only: the other device class's answer comes from the other engine
        for other, result, _ in runs:
            if other != engine and result.alternative is not None:
                best.alternative = result.alternative
                best.why_not = [f"{line} (engine {ENGINE_NAMES[other]})" for line in result.why_not]
                break
    names = ", ".join(ENGINE_NAMES[r[0]] for r in runs)
    best.why.append(f"engine: {ENGINE_NAMES[engine]}, the cheapest of {names} (ties: faster)")
    best.why += lines
    best.assumptions["engines"] = {
        r[0]: {"model": r[1].model, "cost": None if r[1].recommendation is None else _cost(r[1])} for r in runs
    }
    return best, context
