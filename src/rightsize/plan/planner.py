"""The planner's front door: a workload with targets, its service curves, the catalog and memory needs
in; a ranked, explained ``PlanResult`` out. Pure: no files, no torch.

    from rightsize.plan import plan
    result = plan(workload, curves, catalog, memory={"fp32": MemoryModel(4.4e8, 2.1e6)})
    result.recommendation, result.to_dict()
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rightsize.catalog.model import Catalog, Instance
from rightsize.catalog.query import (
    HOURS_PER_MONTH,
    check_filters,
    filter_instances,
    interruptions_per_hour,
    where_instances_are,
)
from rightsize.errors import NotFoundError, SpecError
from rightsize.memory_budget import CPU_RUNTIME_BYTES, GIB, GPU_HEADROOM_FRACTION
from rightsize.plan.batch import InputStage, plan_batch
from rightsize.plan.coldstart import GPU_IMAGE_FACTOR, choose_idle_policy, idle_policies, spin_up
from rightsize.plan.energy import add_energy
from rightsize.plan.explain import explain, infeasible_summary, pareto, rank
from rightsize.plan.fleet import FleetPlan, plan_fleet, plan_mixed_single
from rightsize.plan.job_costs import MIN_P_MEET, unrated_spot_note
from rightsize.plan.online import plan_online
from rightsize.plan.options import (
    USABLE_RAM_FRACTION,
    MemoryModel,
    Option,
    pair_options,
)
from rightsize.plan.result import Candidate, PlanKind, PlanResult
from rightsize.plan.rules import plan_rules
from rightsize.plan.training import DEFAULT_NETWORK_GBPS, ScalingModel, plan_training, training_steps
from rightsize.plan.verify import NO_SPOT_RATE, serving_buy
from rightsize.profile import ServiceCurve
from rightsize.spec.schema import Workload
from rightsize.spec.targets import ColdStart, OnlineTarget, Targets
from rightsize.units import format_bytes, format_usd

__all__ = ["plan", "plan_kind"]


def plan_kind(targets: Targets) -> PlanKind:
    if targets.kind in ("classic_ml", "etl"):
        return "rules"
    if targets.online is not None:
        return "online"
    if targets.batch is not None:
        return "batch"
    if targets.generative is not None:
        return "generative"
    return "training"


def _rate_of(targets: Targets) -> Callable[[Instance], float | None]:
    def rate(inst: Instance) -> float | None:
        if targets.interruptions_per_hour is not None:
            return targets.interruptions_per_hour
        return interruptions_per_hour(inst.spot_interruption)

    return rate


def check_mode(workload: Workload) -> None:
    """A SpecError naming ``mode`` when it does not fit the targets (what `bench` would measure is not what the plan
    needs): "mode: inference does not fit training targets; set mode: training"."""
    t = workload.targets
    kind = None if t is None else plan_kind(t)
    want = {"training": "training", "online": "inference", "batch": "inference"}.get(kind or "")
    if want is not None and workload.mode != want:
        why = " (the sweep must time optimizer steps)" if want == "training" else ""
        raise SpecError("mode", f"{workload.mode} does not fit {kind} targets; set mode: {want}{why}")


def plannable(workload: Workload, catalog: Catalog) -> list[Instance]:
    """The catalog instances ``workload``'s targets may use; a SpecError (or NotFoundError) for what no measurement
    can fix: no targets, a mode that does not match them, filters that match no instance. Checked before the sweep
    (``workflows.plan``) as well as here: a `mode: inference` spec with training targets had measured for minutes
    before it was refused."""
    t = workload.targets
    if t is None:
        raise SpecError("targets", "missing; add targets with online, batch or training (see examples/)")
    kind = plan_kind(t)
    if kind == "generative":
        raise SpecError("targets.generative", "is planned by rightsize.llm.plan (`rightsize plan SPEC` routes there), "
                        "not from measured service curves")  # fmt: skip
    check_mode(workload)
    check_filters(catalog.instances, providers=t.providers, regions=t.regions, names=t.instances)
    instances = filter_instances(catalog.instances, providers=t.providers, regions=t.regions, names=t.instances)
    if not instances:  # each filter names something, but together nothing: say what each provider has, and where
        have = where_instances_are(catalog.instances, t.providers, t.instances)
        raise NotFoundError(f"no catalog instance matches targets.providers/regions/instances ({have}); widen the "
                            "filters or see `rightsize catalog`")  # fmt: skip
    return instances


def plan(
    workload: Workload,
    curves: Sequence[ServiceCurve],
    catalog: Catalog,
    memory: Mapping[str, MemoryModel] | None = None,
    *,
    seed: int = 0,
    input_stage: InputStage | None = None,
    text_input: bool = False,
) -> PlanResult:
    """Plan ``workload`` over ``catalog``. ``curves``: per device and precision (``estimate.projection``);
    ``memory``: per precision, one replica's (inference) or worker's (training) need; ``input_stage``: a
    batch job's measured read/preprocess/write work per item (``rightsize pipeline``); ``text_input``: the model
    reads tokens, whose preparation the JPEG-decode rule of thumb (``checks.SAMPLES_PER_VCPU_PER_S``) overstates."""
    started = time.perf_counter()
    instances = plannable(workload, catalog)
    t = workload.targets
    assert t is not None
    kind = plan_kind(t)
    assumptions: dict[str, Any] = {}
    fleet: FleetPlan | None = None
    mix_warnings: list[str] = []
    centred: list[Candidate] = []  # online: the projected options sized at their band's centre (cheaper_at_centre)
    percentile, bound, samples = 95.0, None, 1
    if kind == "rules":
        cands, size = plan_rules(instances, t.kind, t.data_gb, t.rows, t.purchase)
        assumptions["sizing"] = list(size.assumptions)
        assumptions["rule"] = "seed article: classic ML and ETL -> CPU (compute- or memory-optimised by data size)"
    else:
        options = pair_options(instances, curves, catalog.accelerators, memory)
        if not options:
            devices = sorted({c.device for c in curves}) or ["none"]
            raise NotFoundError(
                f"no service curve matches a catalog instance (curves for: {', '.join(devices)}); "
                "check the catalog filters or re-run the projection"
            )
        assumptions.update(_common_assumptions(memory))
        if kind == "online":
            assert t.online is not None
            o = t.online
            percentile, bound, samples = o.latency.percentile, o.latency.bound_ms, o.request_samples
            options, excluded = _spot_rated(options, t)
            if o.request_mix is not None:
                # Each row serves the whole mix on one pool of its option (event simulation of the sizes);
                # plan.fleet also tries pools split by request size and says which is cheaper.
                samples = o.sizes()[-1][0]
                cands = plan_mixed_single(options, o, t.purchase, seed=seed)
                fleet = plan_fleet(options, o, o.sizes(), t.purchase, seed=seed, singles=cands,
                                   listed=workload.precisions)  # fmt: skip
                if fleet.choice == "split":
                    mix_warnings.append(f"request_mix: a fleet split by request size is cheaper than any one pool "
                                        f"({fleet.notes[-1]}); see Request mix")  # fmt: skip
                assumptions["request_mix"] = {"sizes": fleet.mix, "fleet": fleet.notes}
            else:
                cands = plan_online(options, o, t.purchase, seed=seed)
                if undercut := _could_undercut(options, cands, t.purchase):
                    centred = plan_online(undercut, o, t.purchase, seed=seed, at_edge=False, verify_top=0,
                                          frontier=False, simulate_groups=2, n_screen=1000)  # fmt: skip
            cands += excluded
            _spot_online(cands, instances, t, o)
            _cold_start_online(cands, t)
            assumptions.update(
                headroom=o.headroom,
                arrival=o.arrival if o.arrival != "bursty" else f"bursty (x{o.burstiness:g}, {o.burst_s:g} s bursts)",
                balancer=o.balancer,
                service_spread="lognormal with the curve's coefficient of variation",
                purchase="on-demand" if "on_demand" in t.purchase else "spot (+1 spare replica)",
            )
        elif kind == "batch":
            assert t.batch is not None
            cands = plan_batch(options, t.batch, t.purchase, t.cold_start, _rate_of(t), seed=seed,
                               input_stage=input_stage, cpus=catalog.cpus)  # fmt: skip
            assumptions.update(_job_assumptions(t))
            if input_stage is not None:
                assumptions["input_stage"] = (
                    f"read + preprocess + write: {input_stage.core_s_per_item * 1e6:,.1f} CPU µs per item, measured "
                    "here; scaled by cores and clock, shared with inference on CPU instances, feeding the GPUs on "
                    "GPU instances"
                )
        else:
            assert t.training is not None
            tr = t.training
            scale = ScalingModel.uniform(tr.scaling_efficiency) if tr.scaling_efficiency else ScalingModel()
            cands = plan_training(
                options, tr, t.purchase, t.cold_start, _rate_of(t), scale, seed=seed, links=catalog.links
            )
            assumptions.update(_job_assumptions(t))
            # the per-doubling constants apply to a model without a gradient size, or the spec's own (plan/training.py)
            grads = 0.0 if tr.scaling_efficiency else max((m.gradient_bytes or 0.0 for m in (memory or {}).values()),
                                                          default=0.0)  # fmt: skip
            assumptions.update(
                steps=training_steps(tr),
                scaling=f"several workers: each step pays the all-reduce of the model's {format_bytes(grads)} of "
                "gradients over the instance's links (catalog interconnect.csv; an instance without a row: "
                f"{DEFAULT_NETWORK_GBPS:g} Gbps) and waits for the slowest worker (plan/comm.py); each candidate's "
                "scaling_efficiency is the result"
                if grads
                else f"per doubling: in-node {scale.intra_fp32:g} (AMP {scale.intra_amp:g}), "
                f"across nodes {scale.inter:g}; {scale.source}",
            )
    if kind != "rules" and catalog.power is not None:  # a hand-built Catalog may carry no power table
        by_key = {(i.provider, i.region, i.instance_type): i for i in instances}
        rate = t.online.rate_per_s if t.online is not None else None
        epochs = t.training.epochs if t.training is not None else None
        add_energy(cands, by_key, catalog.accelerators, kind, rate, table=catalog.power, epochs=epochs)
        if fleet is not None and rate is not None:  # a request mix's pools: per 1M of the requests each serves
            for pool, share in fleet.pools():
                add_energy([pool], by_key, catalog.accelerators, kind, rate * share, table=catalog.power)
        assumptions["energy"] = (
            "Cloud Carbon Footprint's method and coefficients (catalog/data/power.csv, grid.csv): per-vCPU and "
            "per-GPU min..max watts at the predicted utilization, RAM 0.392 W/GiB, x PUE, x the region's grid factor"
        )
    ranked = rank(cands, kind, workload.precisions)
    smallest = t.online.sizes()[0][0] if t.online is not None and t.online.request_mix is not None else None
    why, why_not, alt, warnings = explain(kind, ranked, percentile, bound, samples,
                                          input_stage is not None or text_input, smallest_request=smallest,
                                          samples_per_s=_samples_per_s(t.online),
                                          global_batch=t.training.batch_size if t.training else None)  # fmt: skip
    warnings += mix_warnings
    rec = next((c for c in ranked if c.feasible), None)
    if spot_words := unrated_spot_note(rec, ranked, kind):
        warnings.append(spot_words)
    if centre_words := cheaper_at_centre(rec, centred):
        warnings.append(centre_words)
    if kind == "rules" and rec is not None:
        why.insert(1, "; ".join(assumptions.get("sizing", [])))
    dates = sorted({c.price_date for c in ranked if c.price_date})
    return PlanResult(
        kind=kind,
        workload=workload.name,
        model=workload.model,
        target=t.model_dump(mode="json"),
        recommendation=rec,
        candidates=ranked,
        pareto=pareto(ranked, kind),
        why=why,
        why_not=why_not,
        alternative=alt,
        warnings=warnings,
        assumptions=assumptions,
        price_date=dates[-1] if dates else "",
        elapsed_s=time.perf_counter() - started,
        infeasible_summary=infeasible_summary(ranked),
        fleet=fleet.to_dict() if fleet is not None else None,
    )


def _samples_per_s(o: OnlineTarget | None) -> float | None:
    """An online target's rate in samples per second: requests x their mean samples (a mix's by share)."""
    return None if o is None else o.rate_per_s * sum(n * share for n, share in o.sizes())


AT_CENTRE_SAVING = 0.1  # a projected option cheaper by at least this share at its band's centre is named
AT_CENTRE_OPTIONS = 24  # the cheapest options per instance the what-if sizes again (a lead, not a second plan)


def _could_undercut(options: Sequence[Option], cands: Sequence[Candidate], purchase: Sequence[str]) -> list[Option]:
    """When the cheapest feasible plan is a measured one (planned at its timing, where the projected ones are
    planned at their band's slow edge), the projected options (band past 1) whose one instance costs under
    (1 - AT_CENTRE_SAVING) of it, the AT_CENTRE_OPTIONS cheapest: only they can be named by ``cheaper_at_centre``.
    Sizing every option a second time had made online plans 40-60% slower."""
    best = min((c for c in cands if c.feasible), key=lambda c: c.cost_usd_per_hour, default=None)
    if best is None or best.provenance != "measured":  # all sized at their edges: no measured one to favour
        return []
    cap = best.cost_usd_per_hour * (1.0 - AT_CENTRE_SAVING)
    # at the price the plan buys (plan_online): ranked by their spot prices, on-demand D4s_v5s at $0.19/h had
    # crowded F2s_v2 at $0.085/h out of the list
    buy = serving_buy(purchase)
    priced = []
    for x in options:
        price = x.instance.price_usd_per_hour(buy)
        if x.curve.provenance == "projected" and x.curve.band_hi > 1.0 and price and price < cap:
            priced.append((price, x))
    priced.sort(key=lambda px: px[0])
    return [x for _, x in priced[:AT_CENTRE_OPTIONS]]


def cheaper_at_centre(rec: Candidate | None, centred: Sequence[Candidate]) -> str | None:
    """A check line naming the cheapest other instance that would serve the target at the centre of its projection
    band, when it costs at least AT_CENTRE_SAVING less than the recommendation. Projected options are sized at the
    band's slow edge (x2.16 on CPUs) and a measured one at its timing, so the family measured here won every CPU
    plan: c6i.large at $0.085/h never beat c7a.large at $0.103/h. Measuring it there is how to find out."""
    if rec is None:
        return None
    others = [c for c in centred if c.feasible and c.instance != rec.instance]
    if not others:
        return None
    c = min(others, key=lambda c: (c.cost_usd_per_hour, c.instance))
    if c.cost_usd_per_hour > rec.cost_usd_per_hour * (1.0 - AT_CENTRE_SAVING):
        return None
    n = f" x{c.count}" if c.count > 1 else ""
    return (f"projected options are sized at the slow edge of their band; at the band's centre, {c.provider} "
            f"{c.instance}{n} ({c.precision}) would meet the SLO for {format_usd(c.cost_usd_per_hour)}/h against "
            f"{format_usd(rec.cost_usd_per_hour)}/h: measure it there (`rightsize bench` on one) before ruling it "
            "out")  # fmt: skip


def _common_assumptions(memory: Mapping[str, MemoryModel] | None) -> dict[str, Any]:
    return {
        "gpu_memory": f"the estimate's total (tensors, CUDA context, workspace, fragmentation) must fit "
        f"{1 - GPU_HEADROOM_FRACTION:.0%} of device memory, the budget `rightsize memory` uses "
        "(rightsize.memory_budget)",
        "cpu_memory": f"{USABLE_RAM_FRACTION:.0%} of instance RAM is usable, less {CPU_RUNTIME_BYTES / GIB:g} GiB per "
        "worker process (interpreter, torch, server); an int8 worker holds its fp32 weights twice while it quantizes",
        "memory": "estimated per precision" if memory else "not estimated: every option assumed to fit",
    }


def _job_assumptions(t: Targets) -> dict[str, Any]:
    cs = t.cold_start
    if t.interruptions_per_hour is not None:
        rate = f"{t.interruptions_per_hour:g}/h per node (spec)"
    else:
        rate = (
            "from the catalog's Spot Advisor bucket; instances without one are excluded from spot plans (each says so)"
        )
    return {
        "spin_up": f"provision {cs.provision_s:g} s + image pull {cs.image_pull_s:g} s (x{GPU_IMAGE_FACTOR:g} for GPU "
        f"images at the default) + model load {cs.model_load_s:g} s (docs/sources.md `cold-start`)",
        "spot": f"interruptions {rate}; a spot plan needs >= {MIN_P_MEET:.0%} odds of meeting the deadline",
        "purchase": list(t.purchase),
    }


def _spot_rated(options: list[Option], t: Targets) -> tuple[list[Option], list[Candidate]]:
    """A spot-only online plan keeps the options with an interruption estimate (the catalog's Spot Advisor bucket
    or the spec's rate); the others become infeasible rows that say why."""
    if "on_demand" in t.purchase:
        return options, []
    rate_of = _rate_of(t)
    keep, out = [], []
    for o in options:
        if o.instance.price_usd_per_hour("spot") is not None and rate_of(o.instance) is None:
            c = o.candidate(purchase="spot", cost_usd_per_hour=o.instance.price_usd_per_hour("spot") or 0.0)
            c.reasons.append(NO_SPOT_RATE)
            out.append(c)
        else:
            keep.append(o)
    return keep, out


def _spot_online(cands: list[Candidate], instances: Sequence[Instance], t: Targets, o: OnlineTarget) -> None:
    """Each feasible spot row's interruption estimate, with its source: per instance and over the fleet."""
    rate_of = _rate_of(t)
    allowance = 1.0 - o.latency.percentile / 100.0
    by_key = {(i.provider, i.region, i.instance_type): i for i in instances}
    for c in cands:
        inst = by_key.get((c.provider, c.region, c.instance))
        if not c.feasible or not c.purchase.startswith("spot") or inst is None:
            continue
        rate = rate_of(inst)
        if rate is None:
            continue
        bucket = f"AWS Spot Advisor bucket {inst.spot_interruption}"
        src = "the spec" if t.interruptions_per_hour is not None else bucket
        fleet = rate * c.count
        c.spot_interruptions_per_hour = fleet
        # Each interruption leaves an instance missing for a spin-up; one spare covers one at a time. Instances
        # down at once ~ Poisson(fleet rate x spin-up): two or more down must stay within the SLO's allowance.
        up = spin_up(t.cold_start, inst.accelerator is not None)
        down = fleet * up.total_hours
        two_down = 1.0 - math.exp(-down) * (1.0 + down)
        if two_down > allowance:
            c.feasible = False
            c.reasons.append(
                f"spot interruptions too frequent for one spare: {_plain(fleet)}/h over {c.count} instance(s) ({src}), "
                f"each missing for a {up.total_s:.0f} s spin-up: "
                f"two or more down {two_down:.1%} of the time, over the SLO's {allowance:.1%}"
            )
            continue
        c.notes.append(
            f"spot: {_plain(rate)} interruptions/h per instance ({src}), {_plain(fleet)}/h over its {c.count} "
            f"instance(s) (about {_plain(fleet * HOURS_PER_MONTH)} a month); the spare instance carries the load "
            "while one is replaced"
        )


def _plain(x: float) -> str:
    """A rate to two significant digits without an exponent: "about 110 a month", "0.000035/h" (``:.2g`` had
    written 1.1e+02 and 3.5e-05)."""
    if x >= 100:
        return f"{x:,.0f}"
    if x <= 0 or not math.isfinite(x):
        return f"{x:g}"
    text = f"{float(f'{x:.2g}'):.{max(0, 1 - math.floor(math.log10(x)))}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def _warm_floor(cs: ColdStart, per_instance: int, instances: int) -> tuple[int, str]:
    """Instances that stay warm whatever the traffic, and a note when the spec asks for more than the plan has.

    ``min_warm_replicas`` in whole instances when the spec sets it, or when ``scale_from_zero`` is off (then at
    least one); scaling from zero without it keeps none (its default of 1 would make scale_from_zero mean nothing).
    """
    asked = _warm_replicas(cs)
    need = math.ceil(asked / per_instance)
    if need > instances:
        return instances, (
            f"min_warm_replicas {asked} is more than the plan's {instances * per_instance} replica(s): every instance "
            "stays warm"
        )
    return need, ""


def _warm_replicas(cs: ColdStart) -> int:
    """The replicas the spec keeps warm (``_warm_floor``): its min_warm_replicas, at least 1 without scale_from_zero."""
    if not cs.scale_from_zero:
        return max(1, cs.min_warm_replicas)
    return cs.min_warm_replicas if "min_warm_replicas" in cs.model_fields_set else 0


def _cold_start_online(cands: list[Candidate], t: Targets) -> None:
    cs = t.cold_start
    o = t.online
    part_time = o is not None and cs.active_hours_per_day < 24.0
    for c in cands:
        up = spin_up(cs, c.device_class == "gpu")
        c.cold_start_s = up.total_s
        if not c.feasible:
            continue
        instances = max(1, c.count)
        per_instance = max(1, math.ceil(c.replicas / instances))
        floor, capped = _warm_floor(cs, per_instance, instances)
        why = ("" if cs.scale_from_zero else "scale_from_zero is off, ") + f"min_warm_replicas {_warm_replicas(cs)}"
        if part_time and o is not None:
            # Traffic part of the day: price the cheapest idle policy that keeps the SLO (scale to zero or
            # k warm instances) into the hourly cost the ranking uses; the note says which and why. The unit is
            # the instance, what the cloud bills: a CPU instance's k worker processes stay or go together. A spot
            # plan's spare instance serves nothing when traffic resumes.
            spare = 1 if c.spot_interruptions_per_hour is not None else 0
            policies = idle_policies(
                instances, c.cost_usd_per_hour / instances, o.rate_per_s, o.latency.percentile, cs,
                c.device_class == "gpu", replicas_per_instance=per_instance, min_warm=floor, spare=spare,
            )  # fmt: skip
            pick = choose_idle_policy(policies)
            c.notes.append(
                f"idle policy: {pick.describe()}; always-on would be ${pick.always_on_usd_per_day:.2f}/day"
                + ("" if pick.meets_slo else "; no idle policy keeps the SLO, every instance stays warm")
                + (f" (at least {floor} instance(s) stay warm: {why})" if floor else "")
                + (f"; {capped}" if capped else "")
            )
            c.cost_usd_per_hour = pick.usd_per_day / 24.0
            if c.cost_usd_per_1m_requests is not None:
                c.cost_usd_per_1m_requests = pick.usd_per_day / (o.rate_per_s * cs.active_hours_per_day * 3600) * 1e6
            c.idle_policy = pick.describe()
            c.idle = pick.to_dict()
            continue
        if cs.scale_from_zero:
            if floor == 0:
                c.notes.append(f"scale from zero: the first request after idle waits {up.describe()}")
            else:
                per = c.cost_usd_per_hour / instances
                c.notes.append(
                    f"{cs.min_warm_replicas} warm replica(s) keep {floor} instance(s) up: ${per * floor:.2f}/h when "
                    f"idle; scaling up takes {up.describe()}" + (f"; {capped}" if capped else "")
                )
