"""Verify the online planner's cheapest picks: re-simulate them with more requests under the spec's
balancer (per-replica batchers behind jsq / p2c / random, ``events.py``), add replicas until the long
run meets the SLO, and simulate projected curves at both ends of their band.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

from rightsize.plan.options import Option
from rightsize.plan.result import Batching, Candidate, LatencyPrediction
from rightsize.plan.sim import SimConfig, sim_key, simulate
from rightsize.profile import ServiceCurve
from rightsize.spec.targets import OnlineTarget

__all__ = [
    "NO_SPOT_OFFER",
    "NO_SPOT_RATE",
    "SPOT_SPARE",
    "Policy",
    "apply_plan",
    "mark_over_budget",
    "serving_buy",
    "simulate_policy",
    "spare_instances",
    "spot_spare",
    "unit_price",
    "verify_best",
]

NO_SPOT_OFFER = "no spot offer: the catalog has no spot price below on-demand for this instance"
SPOT_SPARE = "spot only: one spare instance absorbs an interruption (notice: 2 min on AWS, about 30 s on Azure and GCP)"
NO_SPOT_RATE = (
    "no interruption estimate for this instance (no Spot Advisor bucket in the catalog): excluded from spot "
    "plans; set targets.interruptions_per_hour to plan it"
)


def serving_buy(purchase: Sequence[str]) -> str:
    """What serving buys: on-demand unless the spec allows only spot (then spot, with ``spot_spare``)."""
    return "on-demand" if "on_demand" in purchase else "spot"


def spare_instances(c: Candidate) -> int:
    """The instances of an online candidate that stand by, serving nothing: one in a spot-only plan
    (``spot_spare``), none otherwise."""
    return 1 if c.purchase == "spot" and c.count > 1 else 0


def spot_spare(opt: Option, buy: str) -> int:
    """Replicas a spot-only online plan adds to what serving needs: one instance's worth, since an interruption
    takes the whole instance (every worker process of a CPU instance, every GPU of a multi-GPU one)."""
    return opt.per_instance if buy == "spot" else 0


@dataclass(frozen=True)
class Policy:
    max_batch: int  # samples
    max_wait_ms: float


def mark_over_budget(c: Candidate, budget: float | None) -> None:
    """A feasible candidate above the hourly budget becomes infeasible, saying so."""
    if c.feasible and budget is not None and c.cost_usd_per_hour > budget:
        c.feasible = False
        digits = 2 if f"{c.cost_usd_per_hour:.2f}" != f"{budget:.2f}" else 4  # not "$0.10/h > $0.1/h"
        c.reasons.append(
            f"over budget: {c.replicas} replicas cost ${c.cost_usd_per_hour:.{digits}f}/h > ${budget:.{digits}f}/h"
        )


def unit_price(opt: Option, buy: str) -> float:
    return opt.instance.price_usd_per_hour(buy) or opt.instance.on_demand_usd_per_hour


def apply_plan(
    c: Candidate, opt: Option, policy: Policy, replicas: int, pred: LatencyPrediction, target: OnlineTarget, buy: str
) -> None:
    instances = math.ceil(replicas / opt.per_instance)
    c.batching = Batching(policy.max_batch, policy.max_wait_ms)
    c.band = opt.curve.band_at(policy.max_batch)  # a GPU curve's band differs by batch size: the one it runs at
    c.latency = pred
    c.count = instances
    c.replicas = replicas
    c.gpus = instances * opt.per_instance if opt.instance.accelerator else 0
    c.cost_usd_per_hour = instances * unit_price(opt, buy)
    c.cost_usd_per_1m_requests = c.cost_usd_per_hour / (target.rate_per_s * 3600.0) * 1e6
    c.throughput_per_s = replicas * opt.curve.throughput_per_s(policy.max_batch)
    if opt.memory is not None:
        opt.size_memory(c, policy.max_batch)
    c.feasible = True


def simulate_policy(
    curve: ServiceCurve, policy: Policy, replicas: int, target: OnlineTarget, n: int, seed: int
) -> LatencyPrediction:
    q = float(target.latency.percentile)
    cfg = SimConfig(
        rate_per_s=target.rate_per_s,
        replicas=replicas,
        max_batch=policy.max_batch,
        max_wait_ms=policy.max_wait_ms,
        request_samples=target.request_samples,
        arrival=target.arrival,
        burstiness=target.burstiness,
        burst_s=target.burst_s,
        balancer=target.balancer,
    )
    res = simulate(curve, cfg, n_requests=n, seed=seed, percentiles=(q,))
    how = (
        f"simulation ({target.balancer}, {res.n_requests} requests)"
        if replicas > 1
        else f"simulation ({res.n_requests} requests)"
    )
    lat = res.latency
    return LatencyPrediction(
        p50=lat.p50, p95=lat.p95, p99=lat.p99, mean=lat.mean, n=lat.n, utilization=res.utilization,
        mean_batch=res.mean_batch, method=how, p_target_ms=lat.at(q),
    )  # fmt: skip


def verify_best(
    cands: list[Candidate],
    opt_of: dict[int, Option],
    target: OnlineTarget,
    n: int,
    top: int,
    seed: int,
    buy: str,
    budget_s: float = 1.0,
    alternatives: dict[int, list[Policy]] | None = None,
) -> None:
    """Re-simulate the cheapest few (and the best of each device class) under the spec's balancer, until
    the cheapest feasible candidate is a verified one (adding replicas can make another one cheaper). Candidates
    whose curves simulate alike (``sim.sim_key``) share their long runs: every run is seeded, so each would read
    the same, and 1,000 catalog rows of one size and price had each been verified on its own."""
    done: dict[tuple[object, ...], tuple[int, LatencyPrediction]] = {}
    edges: dict[tuple[object, ...], float] = {}
    verified: set[int] = set()
    started = time.perf_counter()
    for _ in range(top + 6):
        feas = sorted((c for c in cands if c.feasible), key=lambda c: c.cost_usd_per_hour)
        # every candidate at the lowest price is verified: the recommendation is among them (the ranking breaks a
        # price tie on other keys), and a screening run had been recommended beside verified ones at its price
        # (4 T4 rows at $0.526/h, verify_top 2: the third, unverified, ranked first)
        low = feas[0].cost_usd_per_hour * (1 + 1e-9) if feas else 0.0
        picks = [c for c in feas if c.cost_usd_per_hour <= low and id(c) not in verified]
        if time.perf_counter() - started <= budget_s:  # past it the rest keep their screening numbers, labelled so
            picks += [c for c in feas[:top] if id(c) not in verified and c not in picks]
            for dc in ("cpu", "gpu"):
                best = next((c for c in feas if c.device_class == dc), None)
                if best is not None and id(best) not in verified and best not in picks:
                    picks.append(best)
        if not picks:
            break
        for c in picks:
            _verify_one(c, opt_of[id(c)], target, n, seed, done, buy, (alternatives or {}).get(id(c), ()))
            verified.add(id(c))
    # The band goes on every feasible candidate at the lowest price: the ranking breaks a price tie on other keys
    # (explain.rank), and the band had gone on the first by price alone, which then was not the one recommended.
    feas = [c for c in cands if c.feasible]
    cheapest = min((c.cost_usd_per_hour for c in feas), default=0.0)
    for c in feas:
        if c.cost_usd_per_hour <= cheapest * (1 + 1e-9) and id(c) in verified:
            _add_band(c, opt_of[id(c)], target, n, seed, buy, edges)


def _long_run(curve: ServiceCurve, pol: Policy, replicas: int, target: OnlineTarget, n: int, seed: int
              ) -> LatencyPrediction:  # fmt: skip
    """The long simulation that judges the SLO, run on two arrival draws and the worse one kept. Near saturation
    one draw's percentile moves ~10% with the seed, and a plan that met its SLO on seed 0 and missed it on seeds
    1-3 was recommended (then a dearer one) by --seed alone."""
    runs = [simulate_policy(curve, pol, replicas, target, n, seed + k) for k in (1, 5)]
    return max(runs, key=lambda p: p.p_target_ms or p.p95)


def _verify_one(
    c: Candidate,
    opt: Option,
    target: OnlineTarget,
    n: int,
    seed: int,
    done: dict[tuple[object, ...], tuple[int, LatencyPrediction]],
    buy: str,
    alternatives: Sequence[Policy] = (),
) -> None:
    """Verify ``c`` with long runs, adding replicas until they meet the SLO. ``alternatives``: the policies its
    screening could not tell from its pick (within 5%); each gets the same long runs, and one replaces the pick
    only with fewer replicas or a percentile 3% lower (the pick is the simplest of them)."""
    bound, q = target.latency.bound_ms, float(target.latency.percentile)
    assert c.batching is not None
    spare = spot_spare(opt, buy)
    chosen: tuple[Policy, int, LatencyPrediction] | None = None
    first = Policy(c.batching.max_batch, c.batching.max_wait_ms)
    for pol in [first, *(p for p in alternatives if p != first)]:
        # per serving-replica count too: options of one curve fill instances of different sizes (1 GPU, 4 GPUs),
        # and grow by whole ones of them
        key = (sim_key(opt.curve), pol.max_batch, pol.max_wait_ms, c.replicas - spare, opt.per_instance)
        if key not in done:
            r = c.replicas - spare  # serving replicas: the spare is not counted on to meet the SLO
            pred = _long_run(opt.curve, pol, r, target, n, seed)
            step = opt.per_instance if r % opt.per_instance == 0 else 1  # a filled instance grows by a whole one
            for _ in range(3):  # the screening run was short; add replicas until the long run agrees
                if (pred.p_target_ms or 0.0) <= bound or r + step > target.max_replicas:
                    break
                r += step
                pred = _long_run(opt.curve, pol, r, target, n, seed)
            done[key] = (r, pred)
        r, pred = done[key]
        if (
            chosen is None
            or r < chosen[1]
            or (r == chosen[1] and (pred.p_target_ms or 0.0) < 0.97 * (chosen[2].p_target_ms or 0.0))
        ):
            chosen = (pol, r, pred)
    assert chosen is not None
    pol, r, pred = chosen
    apply_plan(c, opt, pol, r + spare, pred, target, buy)
    c.notes = [x for x in c.notes if not x.startswith("not simulated")]
    if (pred.p_target_ms or 0.0) > bound:
        c.feasible = False
        c.reasons.append(
            f"latency SLO not met in the long simulation: p{q:g} {pred.p_target_ms:.0f} ms > {bound:g} ms "
            f"with {r} replicas"
        )


def _add_band(
    c: Candidate, opt: Option, target: OnlineTarget, n: int, seed: int, buy: str, edges: dict[tuple[object, ...], float]
) -> None:
    """The verified candidate's percentile at both ends of its curve's band (``LatencyPrediction.band_ms``). A curve
    already sized at its slow edge (``at_pessimistic_edge``: band up to 1) is its own slow end; simulating it again
    had put the run-to-run noise above the prediction, "30 ms > 27 ms at the pessimistic end", beside "meets"."""
    curve, pred = opt.curve, c.latency
    if pred is None or pred.band_ms is not None or c.batching is None or (curve.band_lo == 1.0 == curve.band_hi):
        return
    pol = Policy(c.batching.max_batch, c.batching.max_wait_ms)
    r = c.replicas - spot_spare(opt, buy)

    def edge(which: str) -> float:  # seeded: alike curves (sim_key) read alike, so ``edges`` keeps each once
        key = (sim_key(curve), which, pol.max_batch, pol.max_wait_ms, r)
        if key not in edges:
            run = simulate_policy(curve.at_band_edge(which), pol, r, target, n // 2, seed + 2)
            edges[key] = run.p_target_ms or run.p95
        return edges[key]

    at = pred.p_target_ms or pred.p95
    hi = at if curve.band_hi <= 1.0 else edge("hi")
    c.latency = replace(pred, band_ms=(min(at, edge("lo")), max(at, hi)))
