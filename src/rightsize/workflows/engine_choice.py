"""Several engines measured and planned (``engines: [torch, onnxruntime]``): the cheapest feasible answer wins,
the others are reported beside it so the engine choice is visible and checkable (``workflows.plan.plan_spec``)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from rightsize.models.byo import ENGINE_NAMES
from rightsize.units import format_usd

if TYPE_CHECKING:
    from rightsize.plan import PlanResult


def _cost(result: PlanResult) -> float:
    rec = result.recommendation
    return math.inf if rec is None else _cand_cost(rec)


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
    if (source := _other_class(best, engine, runs)) is not None:
        context = _with_curve_of(best, context, source[2])
    names = ", ".join(ENGINE_NAMES[r[0]] for r in runs)
    best.why.append(f"engine: {ENGINE_NAMES[engine]}, the cheapest of {names} (ties: faster)")
    best.why += lines
    best.engine_plans = {other: (result.model, result.recommendation) for other, result, _ in runs if other != engine}
    best.assumptions["engines"] = {
        r[0]: {"model": r[1].model, "cost": None if r[1].recommendation is None else _cost(r[1])} for r in runs
    }
    return best, context


def _with_curve_of(best: PlanResult, context: dict[str, Any], other: dict[str, Any]) -> dict[str, Any]:
    """``context`` with the curve ``best.alternative`` was planned from when another engine planned it: the report
    simulates and draws the alternative from it (its rate sweep had come out empty: the T4 row of a PyTorch plan
    has no curve among an ONNX Runtime plan's)."""
    from rightsize.plan.options import curve_of

    alt, curves = best.alternative, list(context.get("curves", ()))
    if alt is None or any(curve_of(k, alt) for k in curves):
        return context
    return {**context, "curves": curves + [k for k in other.get("curves", ()) if curve_of(k, alt)][:1]}


def _other_class(
    best: PlanResult, engine: str, runs: list[tuple[str, PlanResult, dict[str, Any]]]
) -> tuple[str, PlanResult, dict[str, Any]] | None:
    """The best feasible plan of the device class the recommendation is not, over every engine's plans; the run it
    came from when another engine's. ONNX Runtime plans are CPU-only, and each engine's own "why not" was judged
    against its own pick: copying the other engine's put a CPU plan under "why not the other device class" of a CPU
    recommendation, or said "no CPU plan is feasible" beside an ONNX Runtime CPU plan that was."""
    from rightsize.plan.explain import alternative_lines

    rec = best.recommendation
    if rec is None:
        return None
    other = "gpu" if rec.device_class == "cpu" else "cpu"
    offers = [(run, c) for run in runs for c in (run[1].recommendation, run[1].alternative)
              if c is not None and c.feasible and c.device_class == other]  # fmt: skip
    if not offers:  # none feasible: the account of an engine that evaluated that class (why its rows fail)
        best.alternative = None
        if any(c.device_class == other for c in best.candidates):
            return None  # the engine's own ("no GPU plan is feasible; the closest, ...") stands
        for name, result, _ in runs:
            if (
                result.recommendation is not None
                and result.recommendation.device_class == rec.device_class
                and any(c.device_class == other for c in result.candidates)
            ):
                best.why_not = [f"{line} (engine {ENGINE_NAMES[name]})" for line in result.why_not]
                return None
        return None
    run, alt = min(offers, key=lambda o: (_cand_cost(o[1]), o[0][0] != engine))
    name = run[0]
    if alt is best.alternative:
        return None
    online = best.target.get("online") or {}
    percentile = float((online.get("latency") or {}).get("percentile", 95.0)) if isinstance(online, dict) else 95.0
    best.alternative = alt
    best.alternative_model = run[1].model if name != engine else None
    best.why_not = [f"{line} (engine {ENGINE_NAMES[name]})" if i == 0 and name != engine else line
                    for i, line in enumerate(alternative_lines(alt, rec, best.kind, percentile))]  # fmt: skip
    return run if name != engine else None


def _cand_cost(c: Any) -> float:
    return float(c.cost_usd_total if c.cost_usd_total is not None else c.cost_usd_per_hour)
