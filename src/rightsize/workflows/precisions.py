"""Which precisions a plan weighs and what it says about them: int8 added to CPU serving plans, int8 dropped
for a model that cannot quantize, and notes when the recommendation's precision is not the spec's or an
unlisted one is clearly faster at the same price."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rightsize.plan import PlanResult
    from rightsize.profile import Profile
    from rightsize.spec import Workload


def int8_unquantizable(model: str) -> str | None:
    """Why ``model``'s format cannot run int8 in PyTorch here (a TorchScript or torch.export file), or None."""
    from rightsize.measure.config import INT8_NOTHING_QUANTIZED
    from rightsize.models.byo import TORCHSCRIPT_SUFFIXES

    if not model.startswith(("ort:", "ov:")) and model.endswith((*TORCHSCRIPT_SUFFIXES, ".pt2")):
        return f"{INT8_NOTHING_QUANTIZED}: a TorchScript or torch.export file shows no torch.nn.Linear layers to swap"
    return None


def no_int8(model: str, profile: Profile) -> str | None:
    """Why ``model`` cannot run int8, or None. PyTorch's int8 here swaps nn.Linear layers for quantized ones, and a
    TorchScript or torch.export file exposes none (its layers are script or graph modules); an int8 config measured
    here that quantized nothing says the same of any model. The projection had planned such a model at int8 from
    its fp32 timings, a precision ``rightsize serve`` cannot run."""
    from rightsize.measure.config import INT8_NOTHING_QUANTIZED

    if (why := int8_unquantizable(model)) is not None:
        return why
    for m in profile.measurements:
        if m.precision == "int8" and INT8_NOTHING_QUANTIZED in (m.reason or ""):
            return f"{INT8_NOTHING_QUANTIZED} (measured here: no torch.nn.Linear layers)"
    return None


def unlisted_precision(
    result: PlanResult, listed: Sequence[str], allowed: Sequence[str] | None, added: Sequence[str] = ()
) -> list[str]:
    """A note when the recommendation runs a precision the spec's ``precisions`` did not list (that list is what to
    measure here; the plan weighs every precision the hardware runs unless ``targets.precisions`` says which):
    a spec of [fp32] was recommended bf16, projected, with no word on it."""
    rec = result.recommendation
    if rec is None or allowed is not None or rec.precision in (*listed, *added) or rec.precision == "tf32":
        return []  # ``added``: int8 on a CPU serving plan, which says so in its own note
    return [f"the recommendation runs {rec.precision}, which the spec's precisions ({', '.join(listed)}) do not list: "
            f"{rec.precision} changes the model's outputs slightly (check its accuracy on your own data); "
            f"targets.precisions: [{', '.join(listed)}] plans only those"]  # fmt: skip


def faster_unlisted(result: PlanResult, listed: Sequence[str]) -> list[str]:
    """A note when the same instance at the same price runs an unlisted precision clearly faster than the
    recommendation (beyond ``explain.SPEED_NOISE``): the ranking keeps the listed one at a price tie, and the
    frontier's "Standard_NC4as_T4_v3 x1 fp16 ($0.53/h, 37 ms)" read as better than the fp32 pick at 61 ms, unsaid."""
    from rightsize.plan.explain import SPEED_NOISE, speed_of, target_ms
    from rightsize.units import format_hours

    rec = result.recommendation
    if rec is None or result.kind == "rules" or rec.precision not in listed:  # unlisted: another note says so
        return []
    mine = speed_of(rec, result.kind)
    same = [c for c in result.candidates if c.feasible and c.precision not in listed and c.precision != "tf32"
            and (c.provider, c.region, c.instance, c.count, c.purchase) == (rec.provider, rec.region, rec.instance,
                                                                            rec.count, rec.purchase)
            and c.cost_usd_per_hour <= rec.cost_usd_per_hour * (1 + 1e-9)
            and speed_of(c, result.kind) * (1 + SPEED_NOISE) < mine]  # fmt: skip
    if not same:
        return []
    best = min(same, key=lambda c: speed_of(c, result.kind))
    if result.kind == "online":
        how = f"the SLO percentile in {target_ms(best):.0f} ms against {target_ms(rec):.0f} ms"
    else:
        how = f"{format_hours(best.runtime_hours or 0.0)} against {format_hours(rec.runtime_hours or 0.0)}"
    return [f"{rec.instance} runs {best.precision} at the same price, {how} at {rec.precision}: the plan keeps "
            f"{rec.precision} because the spec's precisions list it and a precision they do not list wins only by "
            f"being cheaper; add {best.precision} to precisions to have it win this tie (it changes the model's "
            "outputs slightly: check its accuracy on your own data)"]  # fmt: skip


def with_cpu_serving_precisions(workload: Workload) -> tuple[Workload, list[str]]:
    """An online or batch inference plan on CPU always tries int8 for zoo models: it is the CPU's usual
    inference precision, and it must be measured here to be planned well. A convolution net is quantized
    statically (its convolutions run int8), any other model dynamically (its Linear layers);
    ``measure.precision`` says which ran."""
    notes: list[str] = []
    targets = workload.targets
    inference = targets is not None and (targets.online is not None or targets.batch is not None)
    if not inference or "cpu" not in workload.devices or "int8" in workload.precisions or workload.mode != "inference":
        return workload, notes
    if targets is not None and targets.precisions is not None and "int8" not in targets.precisions:
        return workload, notes  # the plan may not recommend it: nothing to measure it for
    try:
        from rightsize.models.zoo import get_entry

        family = get_entry(workload.model).family
    except Exception:  # a user model: leave the precisions as given
        return workload, notes
    how = "static quantization: convolutions too" if family == "cnn" else "dynamic quantization of Linear layers"
    notes.append(
        f"int8 ({how}) added to the CPU precisions: CPU inference plans always try it; int8 changes the "
        "model's outputs slightly: check its accuracy on your own data before you ship an int8 plan"
    )
    return workload.model_copy(update={"precisions": [*workload.precisions, "int8"]}), notes
