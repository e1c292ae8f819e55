"""Serving a mix of request sizes: one pool for every request, or two pools split by size.

A spec's ``request_mix`` says what share of requests carries how many samples (say 90% of 1 sample,
10% of 64). Two ways to serve it are compared, each at the fewest replicas that meet the SLO:

    single  one pool of one option: every request, whatever its size, joins the same replicas
    split   the size router (``rightsize serve --router size``): requests of fewer samples than the
            crossover go to the small pool, the rest to the large pool, each pool of its own option,
            so small requests can stay on CPUs while large ones go to a GPU (the seeds' hybrid
            fleet), or both pools can be of one type (the large requests then stop delaying the small)

Each pool sees a Poisson stream (a random split of one is Poisson) of its classes' requests. Its
replicas sit behind join-the-shortest-queue, each with a Triton-style batcher over *samples*: a batch
starts when ``max_batch`` samples are queued or the oldest request has waited ``max_wait_ms``, and takes
whole requests in arrival order while they fit. A batch of n samples takes t(n) with the curve's
lognormal spread (``run_sized``, one event at a time). Each pool meets the SLO percentile for its own
requests, so the whole mix meets it too (a mixture's tail is the share-weighted tail of its parts).

Options are screened by a capacity bound on cost (a full batch's throughput under the headroom) and
simulated cheapest bound first; an option whose bound already costs more than the best found is not
simulated (branch and bound), so only a handful of options per pool are simulated. Options whose curves
simulate alike (``sim.sim_key``) at one batch size share one simulation: every run is seeded, so a shared run
reads as the one it replaces.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from rightsize.plan.arrivals import arrival_times_ms
from rightsize.plan.options import Option
from rightsize.plan.result import Batching, Candidate, LatencyPrediction
from rightsize.plan.sim import service_tables, sim_key
from rightsize.plan.verify import NO_SPOT_OFFER, SPOT_SPARE, mark_over_budget, serving_buy, spot_spare, unit_price
from rightsize.spec.targets import OnlineTarget

__all__ = ["FleetPlan", "Pool", "plan_fleet", "plan_mixed_single", "replicas_on", "run_sized"]

_COMPLETE, _TIMEOUT = 0, 1
_R_STEPS = (0, 1, 2, 3, 5, 8, 12, 18, 27, 40, 60, 90)  # replicas above the capacity bound tried, in order

# A pool's simulated sizing, keyed by what it depends on: replicas that met the SLO with their prediction (None:
# none did) and the runs it took. Scoped to one pool, target, seed and length of run.
_Runs = dict[tuple[object, ...], tuple[tuple[int, LatencyPrediction] | None, int]]
_Bands = dict[tuple[object, ...], float]  # the fast edge's SLO percentile (ms) per run, for one pool and seed


def run_sized(
    arrival_ms: np.ndarray,
    samples: np.ndarray,
    replicas: int,
    max_batch: int,
    max_wait_ms: float,
    service_ms: np.ndarray,
    sigma: np.ndarray,
    rng: np.random.Generator,
) -> tuple[np.ndarray, float, int]:
    """Latency per request (ms), busy ms over all replicas, batches run: requests of different sizes.

    arrival_ms (N,) sorted; samples (N,) samples per request, each <= max_batch; service_ms / sigma
    (max_batch + 1,) median time and lognormal sigma of a batch of n samples. Join-the-shortest-queue
    (queued + in service requests, ties to the lowest index)."""
    arr = arrival_ms.tolist()
    size = samples.tolist()
    n = len(arr)
    # Lists index fastest; a table for huge requests (1,000,000 samples) stays an array: listing it costs more
    # than the few entries a run reads.
    svc, sig = (service_ms.tolist(), sigma.tolist()) if len(service_ms) <= 65_536 else (service_ms, sigma)
    noise = rng.standard_normal(n).tolist()
    queues: list[deque[int]] = [deque() for _ in range(replicas)]
    queued = [0] * replicas  # samples waiting per replica
    in_service = [0] * replicas  # requests in the running batch
    timer_at = [-1.0] * replicas
    lens = [0] * replicas
    dep = [0.0] * n
    heap: list[tuple[float, int, int]] = []
    busy, batches, eps = 0.0, 0, 1e-9

    def dispatch(rep: int, now: float) -> None:
        nonlocal busy, batches
        q = queues[rep]
        if in_service[rep] or not q:
            return
        if queued[rep] >= max_batch or now + eps >= arr[q[0]] + max_wait_ms:
            total, k = 0, 0
            for j in q:  # whole requests in order while they fit
                if total + size[j] > max_batch and k:
                    break
                total += size[j]
                k += 1
            t = float(svc[total] * math.exp(sig[total] * noise[batches]) if sig[total] else svc[total])
            done = now + t
            for _ in range(k):
                dep[q.popleft()] = done
            queued[rep] -= total
            in_service[rep] = k
            busy += t
            batches += 1
            heapq.heappush(heap, (done, _COMPLETE, rep))
        else:
            due = arr[q[0]] + max_wait_ms
            if timer_at[rep] != due:
                timer_at[rep] = due
                heapq.heappush(heap, (due, _TIMEOUT, rep))

    def settle(until: float) -> None:
        while heap and heap[0][0] <= until:
            when, kind, rep = heapq.heappop(heap)
            if kind == _COMPLETE:
                lens[rep] -= in_service[rep]
                in_service[rep] = 0
            dispatch(rep, when)

    for j in range(n):
        now = arr[j]
        settle(now)
        best = lens.index(min(lens))
        lens[best] += 1
        queues[best].append(j)
        queued[best] += size[j]
        dispatch(best, now)
    settle(math.inf)
    return np.asarray(dep) - arrival_ms, busy, batches


@dataclass(frozen=True)
class Pool:
    """The requests one pool serves: sizes (samples) with their shares of the whole stream."""

    sizes: tuple[int, ...]
    shares: tuple[float, ...]

    @property
    def share(self) -> float:
        return sum(self.shares)

    def mean_samples(self) -> float:
        return sum(s * p for s, p in zip(self.sizes, self.shares, strict=True)) / self.share


@dataclass
class FleetPlan:
    """The cheapest single pool and the cheapest size split for a request mix; ``choice`` is the cheaper."""

    mix: list[tuple[int, float]]  # (samples, share), by size
    single: Candidate | None
    split: tuple[int, Candidate, Candidate] | None  # (crossover: large pool from this many samples, small, large)
    choice: str  # "single" | "split" | "none"
    simulated: int  # pool plans simulated
    notes: list[str] = field(default_factory=list)

    @property
    def split_cost(self) -> float:
        return math.inf if self.split is None else self.split[1].cost_usd_per_hour + self.split[2].cost_usd_per_hour

    @property
    def single_cost(self) -> float:
        return math.inf if self.single is None else self.single.cost_usd_per_hour

    def pools(self) -> list[tuple[Candidate, float]]:
        """Each planned pool with the share of the requests it serves (the single pool: all of them)."""
        out = [(self.single, 1.0)] if self.single is not None else []
        if self.split is not None:
            c, small, large = self.split
            share = sum(p for s, p in self.mix if s < c)
            out += [(small, share), (large, 1.0 - share)]
        return out

    def to_dict(self) -> dict[str, object]:
        """JSON shape; each pool is ``Candidate.to_dict()``, as in the plan's candidates."""
        out: dict[str, object] = {
            "mix": [{"samples": s, "share": p} for s, p in self.mix], "choice": self.choice,
            "single": self.single.to_dict() if self.single else None, "simulated_pool_plans": self.simulated,
            "notes": list(self.notes),
        }  # fmt: skip
        if self.split is not None:
            c, small, large = self.split
            out["split"] = {"crossover_samples": c, "small": small.to_dict(), "large": large.to_dict(),
                            "cost_usd_per_hour": self.split_cost}  # fmt: skip
        else:
            out["split"] = None
        return out


def _batch_for(opt: Option, pool: Pool, bound_ms: float) -> int | None:
    """Samples per batch: the smallest power of two that holds the pool's largest request, doubled while a
    full batch still fits memory and runs well inside the SLO (half of it: queueing needs the rest)."""
    b = 1 << max(0, math.ceil(math.log2(max(pool.sizes))))
    if not opt.fits(b) or opt.curve.t_ms(b) >= bound_ms:
        return None
    while b < 256 and opt.fits(2 * b) and opt.curve.t_ms(2 * b) < bound_ms / 2:
        b *= 2
    return b


def _draw(pool: Pool, target: OnlineTarget, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``n`` arrivals of the pool's share of the target's stream, and each one's samples."""
    rate = target.rate_per_s * pool.share
    arrivals = arrival_times_ms(rng, n, rate, target.arrival, target.burstiness, target.burst_s)[0]
    probs = np.array(pool.shares) / pool.share
    return arrivals, rng.choice(np.array(pool.sizes), size=n, p=probs)


def _sizings(opt: Option, pool: Pool, target: OnlineTarget) -> list[tuple[int, int]]:
    """The batch sizes a pool is sized at, each with its capacity bound on replicas (a full batch's throughput under
    the headroom): ``_batch_for``'s first, then every smaller one that holds the pool's largest request (the smallest
    power of two that does, and the curve's measured sizes). A full batch under half the SLO is no promise that
    batching pays: a batch-1 pool of c7a.large met a 250 ms p95 on 1 replica where batch 8 needed 2."""
    top = _batch_for(opt, pool, target.latency.bound_ms)
    if top is None:
        return []
    need = max(pool.sizes)
    low = {1 << max(0, math.ceil(math.log2(need))), *(b for b in opt.curve.batch_sizes if need <= b)}
    lam = target.rate_per_s * pool.share * pool.mean_samples() / 1000.0  # samples per ms
    return [(b, max(1, math.ceil(lam * opt.curve.t_ms(b) / b / target.headroom - 1e-9)))
            for b in [top, *sorted(b for b in low if b < top and opt.fits(b))]]  # fmt: skip


def _plan_pool(
    opt: Option, pool: Pool, target: OnlineTarget, buy: str, n: int, seed: int, runs: _Runs
) -> tuple[Candidate, int]:
    """The fewest replicas of ``opt`` that meet the SLO percentile for ``pool``'s requests (feasible or not), and the
    runs simulated for it: none when ``runs`` already holds an option that simulates alike. A catalog of 100 rows of
    one size and price had simulated each row on its own: 100 equal runs per pool."""
    cand = opt.candidate(purchase=buy, kind_hint="online")
    bound, q = target.latency.bound_ms, float(target.latency.percentile)
    sizings = _sizings(opt, pool, target)
    if not sizings:
        cand.reasons.append(f"a batch holding {max(pool.sizes)} samples does not fit memory or the SLO")
        return cand, 0
    sims = 0
    best: tuple[int, tuple[int, LatencyPrediction]] | None = None  # (batch, (replicas, prediction)): fewest replicas
    for b, r_min in sizings:  # _batch_for's first: a smaller batch replaces it only on fewer replicas
        if best is not None and r_min >= best[1][0]:
            continue  # its capacity bound alone needs as many replicas: it cannot be cheaper
        key = (sim_key(opt.curve), b, r_min, opt.per_instance)
        if key not in runs:
            runs[key] = _size_pool(opt, b, r_min, pool, target, n, seed)
            sims += runs[key][1]
        if (got := runs[key][0]) is not None and (best is None or got[0] < best[1][0]):
            best = (b, got)
    if best is None:
        r_min = sizings[0][1]
        cand.reasons.append(
            f"p{q:g} above {bound:g} ms up to {min(target.max_replicas, r_min + _R_STEPS[-1])} replicas"
        )
        return cand, sims
    b, found = best
    r, pred = found
    wait = 2.0 if bound < 50 else 5.0
    spare = spot_spare(opt, buy)  # as the online planner: one instance more than serving needs
    instances = math.ceil((r + spare) / opt.per_instance)
    cand.batching, cand.latency, cand.replicas, cand.count = Batching(b, wait), pred, r + spare, instances
    if spare:
        cand.notes.append(SPOT_SPARE)
    cand.cost_usd_per_hour = instances * unit_price(opt, buy)
    cand.cost_usd_per_1m_requests = cand.cost_usd_per_hour / (target.rate_per_s * pool.share * 3600.0) * 1e6
    cand.gpus = instances * opt.per_instance if opt.instance.accelerator else 0
    cand.throughput_per_s = (r + spare) * opt.curve.throughput_per_s(b)
    opt.size_memory(cand, b)
    cand.feasible = True
    return cand, sims


def _size_pool(
    opt: Option, b: int, r_min: int, pool: Pool, target: OnlineTarget, n: int, seed: int
) -> tuple[tuple[int, LatencyPrediction] | None, int]:
    """The fewest serving replicas of ``opt`` at batch ``b`` that meet the SLO percentile, with their prediction
    (None when none up to the last step does), and the runs it took. Every replica count sees the same requests
    and the same service-time draws (common random numbers)."""
    bound, q = target.latency.bound_ms, float(target.latency.percentile)
    t, s = service_tables(opt.curve, b, 1)  # index = samples in the batch
    wait = 2.0 if bound < 50 else 5.0
    arrivals, sizes = _draw(pool, target, n, np.random.default_rng(seed))
    sims, tried = 0, 0
    for step in _R_STEPS:
        r = r_min + step
        if r > target.max_replicas:
            break
        # every instance bought serves, as the online planner fills them: one replica on an 8-GPU instance had
        # read "9 on 2" with a spot spare
        r = min(target.max_replicas, math.ceil(r / opt.per_instance) * opt.per_instance)
        if r <= tried:
            continue
        tried = r
        lat, busy, batches = run_sized(arrivals, sizes, r, b, wait, t, s, np.random.default_rng(seed + 1))
        sims += 1
        kept = lat[n // 10 :]
        p50, p95, p99, pq = np.percentile(kept, [50.0, 95.0, 99.0, q])
        if pq <= bound:
            span = float(arrivals[-1] - arrivals[0]) or 1.0
            pred = LatencyPrediction(
                p50=float(p50), p95=float(p95), p99=float(p99), mean=float(kept.mean()), n=n,
                utilization=min(1.0, busy / (r * span)), mean_batch=float(sizes.sum() / max(1, batches)),
                method=f"event simulation of the pool's request sizes ({n} requests, jsq)", p_target_ms=float(pq),
            )  # fmt: skip
            return (r, pred), sims
    return None, sims


def _cost_bound(opt: Option, pool: Pool, target: OnlineTarget, buy: str) -> float:
    if buy == "spot" and opt.instance.price_usd_per_hour("spot") is None:
        return math.inf  # no spot offer (plan_mixed_single gives such rows NO_SPOT_OFFER)
    r_min = min((r for _, r in _sizings(opt, pool, target)), default=None)
    spare = spot_spare(opt, buy)
    return math.inf if r_min is None else math.ceil((r_min + spare) / opt.per_instance) * unit_price(opt, buy)


def _better(a: Candidate, b: Candidate, listed: Sequence[str] = ()) -> bool:
    """``a`` ranks before ``b`` in the planner's table (``explain.rank``: cheaper; at one price a verified price, a
    precision the spec lists (``listed``), the narrower band, faster). A tie-break of its own (faster alone) had
    put an unlisted fp16 T4 in the Request mix section beside the recommended fp32 one, at the same price."""
    from rightsize.plan.explain import rank

    # b listed first: on a full tie b stays, as the table keeps the earlier row (a later tied row had replaced it,
    # and the Request mix section named bf16 beside the recommended fp16 g5.xlarge)
    return rank([b, a], "online", listed)[0] is a


def _cheapest(
    options: Sequence[Option], pool: Pool, target: OnlineTarget, buy: str, n: int, seed: int, listed: Sequence[str] = ()
) -> tuple[Candidate | None, int]:
    """Branch and bound over options: simulate in order of cost bound until the bound exceeds the best found."""
    bounds = sorted(((_cost_bound(o, pool, target, buy), i) for i, o in enumerate(options)), key=lambda x: x[0])
    best: Candidate | None = None
    sims = 0
    runs: _Runs = {}
    for bound, i in bounds:
        if math.isinf(bound) or (best is not None and bound > best.cost_usd_per_hour):
            break
        cand, k = _plan_pool(options[i], pool, target, buy, n, seed, runs)
        sims += k
        if cand.feasible and (best is None or _better(cand, best, listed)):
            best = cand
    return best, sims


def plan_mixed_single(
    options: Sequence[Option],
    target: OnlineTarget,
    purchase: Sequence[str] = ("on_demand",),
    n: int = 3000,
    seed: int = 0,
) -> list[Candidate]:
    """One candidate per option serving the whole mix on one pool (feasible, or infeasible with reasons):
    the planner's table for a ``request_mix``. Same requests and seed as ``plan_fleet``'s single pool, so
    the cheapest row here is the fleet's "one pool"."""
    from rightsize.plan.online import at_pessimistic_edge

    buy = serving_buy(purchase)
    sizes = target.sizes()
    everything = Pool(tuple(s for s, _ in sizes), tuple(p for _, p in sizes))
    out = []
    runs: _Runs = {}
    bands: _Bands = {}
    for opt in options:
        if buy == "spot" and opt.instance.price_usd_per_hour("spot") is None:
            cand = opt.candidate(purchase=buy, kind_hint="online")
            cand.reasons.append(NO_SPOT_OFFER)
        else:
            cand, _ = _plan_pool(at_pessimistic_edge(opt), everything, target, buy, n, seed, runs)
        mark_over_budget(cand, target.budget_usd_per_hour)
        out.append(cand)
    feasible = [(c, o) for c, o in zip(out, options, strict=True) if c.feasible]
    cheapest = min((c.cost_usd_per_hour for c, _ in feasible), default=0.0)
    for c, opt in feasible:  # as the online planner: every candidate at the lowest price (the ranking breaks ties)
        if c.cost_usd_per_hour <= cheapest * (1 + 1e-9):
            _add_mix_band(c, opt, everything, target, buy, n, seed, bands)
    return out


def _add_mix_band(
    c: Candidate, opt: Option, pool: Pool, target: OnlineTarget, buy: str, n: int, seed: int, bands: _Bands
) -> None:
    """The band on a pool sized at its curve's slow edge (``at_pessimistic_edge``): the prediction is its slow end,
    the same requests on the curve's fast edge its fast end. A request-mix plan had printed no band at all.
    Options that simulate alike (``sim_key``) on as many replicas share the fast edge's run in ``bands``."""
    pred, curve = c.latency, opt.curve
    if pred is None or c.batching is None or curve.provenance != "projected" or curve.band_lo >= 1.0:
        return
    b, wait = c.batching.max_batch, c.batching.max_wait_ms
    r = c.replicas - spot_spare(opt, buy)
    key = (sim_key(curve), b, wait, r)
    if key not in bands:
        t, s = service_tables(curve.at_band_edge("lo"), b, 1)
        arrivals, sizes = _draw(pool, target, n, np.random.default_rng(seed))  # the draws _plan_pool sized on
        lat = run_sized(arrivals, sizes, r, b, wait, t, s, np.random.default_rng(seed + 1))[0]
        bands[key] = float(np.percentile(lat[n // 10 :], float(target.latency.percentile)))
    at, fast = pred.p_target_ms or pred.p95, bands[key]
    c.latency = replace(pred, band_ms=(min(at, fast), at))


def plan_fleet(
    options: Sequence[Option],
    target: OnlineTarget,
    mix: Sequence[tuple[int, float]],
    purchase: Sequence[str] = ("on_demand",),
    n: int = 3000,
    seed: int = 0,
    singles: Sequence[Candidate] | None = None,
    listed: Sequence[str] = (),
) -> FleetPlan:
    """The cheapest single pool and the cheapest two-pool size split for ``mix`` ((samples, share) pairs).
    ``singles``: ``plan_mixed_single``'s rows for the same mix, when already planned (the single pool is then
    the best of them, not simulated again)."""
    from rightsize.plan.online import at_pessimistic_edge

    buy = serving_buy(purchase)
    options = [at_pessimistic_edge(o) for o in options]  # projected curves at the slow edge of their band
    mixed = sorted((int(s), float(p)) for s, p in mix)
    everything = Pool(tuple(s for s, _ in mixed), tuple(p for _, p in mixed))
    if singles is None:
        single, sims = _cheapest(options, everything, target, buy, n, seed, listed)
    else:
        single, sims = None, 0
        for row in singles:
            if row.feasible and (single is None or _better(row, single, listed)):
                single = row
    split: tuple[int, Candidate, Candidate] | None = None
    for cut in range(1, len(mixed)):
        small = Pool(everything.sizes[:cut], everything.shares[:cut])
        large = Pool(everything.sizes[cut:], everything.shares[cut:])
        a, k1 = _cheapest(options, small, target, buy, n, seed, listed)
        b, k2 = _cheapest(options, large, target, buy, n, seed + 1, listed)
        sims += k1 + k2
        if a is not None and b is not None:
            cost = a.cost_usd_per_hour + b.cost_usd_per_hour
            if split is None or cost < split[1].cost_usd_per_hour + split[2].cost_usd_per_hour:
                split = (large.sizes[0], a, b)
    plan = FleetPlan(mixed, single, split, "none", sims)
    budget = target.budget_usd_per_hour
    over: list[str] = []
    if budget is not None:
        # the table's rows over the budget were marked so before they reached here: the cheapest of them is the
        # single pool the budget refuses
        priced = [r.cost_usd_per_hour for r in singles or () if r.reasons and all(
            x.startswith("over budget") for x in r.reasons)]  # fmt: skip
        if single is None and priced:
            over.append(f"the cheapest single pool costs ${min(priced):.2f}/h")
        for name, cost in (("single pool", plan.single_cost), ("size split", plan.split_cost)):
            if math.isfinite(cost) and cost > budget:
                over.append(f"the cheapest {name} costs ${cost:.2f}/h")
                plan.notes.append(f"{over[-1]}, over the ${budget:g}/h budget")
        plan.single = single = single if plan.single_cost <= budget else None
        plan.split = split = split if plan.split_cost <= budget else None
    if single is None and split is None:
        # a pool that meets the SLO over the budget is not "no pool meets the SLO" (the last note is the one shown)
        plan.notes.append(f"nothing meets the SLO within the ${budget:g}/h budget: {' and '.join(over)}" if over
                          else "no single pool and no size split meets the SLO for this mix")  # fmt: skip
        return plan
    plan.choice = "split" if plan.split_cost < plan.single_cost else "single"
    if split is not None:
        c, a, b = split
        kinds = "CPU + GPU (hybrid)" if {a.device_class, b.device_class} == {"cpu", "gpu"} else "two pools"
        clouds = "" if a.provider == b.provider else f" (two clouds: {a.provider} and {b.provider} behind one router)"
        plan.notes.append(
            f"split at {c} samples: {_pool_words(a)} for smaller requests, {_pool_words(b)} for the rest, "
            f"{kinds}{clouds}: ${plan.split_cost:.2f}/h"
        )
    if single is not None:
        plan.notes.append(f"single pool: {_pool_words(single)}, ${single.cost_usd_per_hour:.2f}/h")
    if single is not None and split is not None:
        lo, hi = sorted((plan.single_cost, plan.split_cost))
        plan.notes.append(f"{plan.choice} is {100.0 * (1.0 - lo / hi):.0f}% cheaper")
    return plan


def replicas_on(replicas: object, count: object, instance: object) -> str:
    """Replicas and the instances they run on: "4 replicas on 1 x c7i.2xlarge", or "2 x g5.xlarge" when each runs
    one (or the count is unknown). "4 x c7i.2xlarge" read as four VMs where one ran four worker processes."""
    if count is None or count == replicas:
        return f"{replicas} x {instance}"
    return f"{replicas} replica{'s' if replicas != 1 else ''} on {count} x {instance}"


def _pool_words(c: Candidate) -> str:
    return f"{replicas_on(c.replicas, c.count, c.instance)} ({c.device})"
