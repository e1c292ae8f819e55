"""Event-driven simulator of replicas behind a load balancer, each with its own micro-batcher.

The vectorised lane simulator (``lanes.py``) models one queue shared by all replicas (Triton: one
queue per model, docs/sources.md `batching-designs`). Real deployments often put a balancer in front of independent
replicas (Ray Serve: power-of-two-choices; Kubernetes services: random or least-connections). This
module simulates that exactly, one event at a time, so the planner can check its pick under the
balancer the spec names:

    jsq     join the shortest queue (queued + in service, ties to the lowest index)
    p2c     power of two choices: the shorter of two random replicas (Mitzenmacher 2001)
    random  uniform

Each replica's batcher has Triton semantics: when free it runs min(queued, K) requests at once if
K are queued or the oldest has waited ``max_wait_ms``; otherwise it sleeps until one of those holds.
Pure Python: ~1.3-1.6 M requests per second, one thread of a 2-vCPU AMD EPYC VM (benchmarks/plan_speed.py); use it for
verification, not screening.
"""

from __future__ import annotations

import heapq
import math
from collections import deque

import numpy as np

__all__ = ["ratio_draws", "run_balanced"]

_COMPLETE, _TIMEOUT = 0, 1


def ratio_draws(rng: np.random.Generator, ratios: np.ndarray, n: int, in_order: bool = False) -> np.ndarray:
    """``n`` multipliers from ``ratios``: at random, or in their order from the first (cycling).

    In order, the k-th simulated batch takes the k-th measured ratio: replaying a run's own arrivals, a
    slow spell then meets the requests it met in the run (a burst it slowed, or a lull it fell in)."""
    if in_order:
        return np.resize(ratios, n)
    return rng.choice(ratios, n)


def run_balanced(
    arrival_ms: np.ndarray,
    replicas: int,
    max_requests: int,
    max_wait_ms: float,
    service_ms: np.ndarray,
    sigma: np.ndarray,
    rng: np.random.Generator,
    balancer: str = "jsq",
    dist: str = "lognormal",
    ratios: np.ndarray | None = None,
    ratios_in_order: bool = False,
) -> tuple[np.ndarray, float, int]:
    """Latency per request (ms), total busy ms over replicas, number of batches.

    arrival_ms  (N,) sorted arrival times; service_ms / sigma: (K+1,) per requests-in-batch k.
    dist "empirical": a batch takes service_ms[k] times a draw from ``ratios`` (sigma unused), in their order
    from the first with ``ratios_in_order`` (``ratio_draws``).
    """
    if balancer not in ("jsq", "p2c", "random"):
        raise ValueError(f"unknown balancer {balancer!r}; use jsq, p2c or random")
    arr = arrival_ms.tolist()
    n = len(arr)
    svc = service_ms.tolist()
    sig = sigma.tolist()
    # Pre-drawn randomness (one draw per possible batch; one or two replica picks per request).
    if dist == "empirical":
        if ratios is None:
            raise ValueError("dist 'empirical' needs ratios")
        noise = ratio_draws(rng, np.asarray(ratios, dtype=np.float64), n, ratios_in_order).tolist()
    else:
        noise = rng.standard_exponential(n).tolist() if dist == "exponential" else rng.standard_normal(n).tolist()
    picks = rng.integers(0, replicas, size=(n, 2)) if balancer != "jsq" else np.zeros((0, 2), dtype=np.int64)
    pick_a, pick_b = picks[:, 0].tolist(), picks[:, 1].tolist()  # flat lists: no (x, y) list per request
    queues: list[deque[int]] = [deque() for _ in range(replicas)]
    in_service = [0] * replicas  # requests in the running batch (0 = idle)
    timer_at = [-1.0] * replicas  # pending window expiry per replica
    dep = [0.0] * n
    heap: list[tuple[float, int, int]] = []
    busy_total = 0.0
    n_batches = 0
    eps = 1e-9
    k_cap, wait = max_requests, max_wait_ms
    scaled = dist in ("exponential", "empirical")  # the draw z multiplies t(k) itself
    jsq, p2c = balancer == "jsq", balancer == "p2c"
    few = replicas <= 32  # JSQ over a handful of replicas: min() over a list beats a heap's bookkeeping
    push, pop, exp = heapq.heappush, heapq.heappop, math.exp  # the loop below runs once per request

    def dispatch(rep: int, now: float) -> None:
        nonlocal busy_total, n_batches
        q = queues[rep]
        if in_service[rep] or not q:
            return
        if len(q) >= k_cap or now + eps >= arr[q[0]] + wait:
            k = min(len(q), k_cap)
            base = svc[k]
            z = noise[n_batches]
            t = base * z if scaled else base * exp(sig[k] * z) if sig[k] else base
            done = now + t
            if k == 1:
                dep[q.popleft()] = done
            else:
                popleft = q.popleft
                for _ in range(k):
                    dep[popleft()] = done
            in_service[rep] = k
            busy_total += t
            n_batches += 1
            push(heap, (done, _COMPLETE, rep))
        else:
            due = arr[q[0]] + wait
            if timer_at[rep] != due:
                timer_at[rep] = due
                push(heap, (due, _TIMEOUT, rep))

    # lens[r] = queued + in service at replica r: +1 when a request joins, -k when its batch of k completes
    # (dispatch only moves requests from queue to service). JSQ over many replicas keeps a heap of
    # (length, replica) with lazy invalidation: each change pushes the new length, stale entries are skipped.
    lens = [0] * replicas
    shortest: list[tuple[int, int]] = [(0, r) for r in range(replicas)]

    for j in range(n):
        now = arr[j]
        while heap and heap[0][0] <= now:
            when, kind, rep = pop(heap)
            if kind == _COMPLETE:  # the batch is done: the replica is free (and shorter)
                lens[rep] -= in_service[rep]
                if jsq and not few:
                    push(shortest, (lens[rep], rep))
                in_service[rep] = 0
            dispatch(rep, when)
        if jsq and few:
            best = lens.index(min(lens))  # shortest, ties to the lowest index
            lens[best] += 1
        elif jsq:
            while shortest[0][0] != lens[shortest[0][1]]:
                pop(shortest)
            best = shortest[0][1]  # shortest, ties to the lowest index
            lens[best] += 1
            push(shortest, (lens[best], best))
        elif p2c:
            x, y = pick_a[j], pick_b[j]
            best = x if lens[x] <= lens[y] else y
            lens[best] += 1
        else:
            best = pick_a[j]
            lens[best] += 1
        queues[best].append(j)
        if not in_service[best]:  # a busy replica picks the request up when its batch completes
            dispatch(best, now)
    while heap:
        when, kind, rep = pop(heap)
        if kind == _COMPLETE:
            lens[rep] -= in_service[rep]
            if jsq and not few:
                push(shortest, (lens[rep], rep))
            in_service[rep] = 0
        dispatch(rep, when)
    latency = np.asarray(dep) - arrival_ms
    return latency, busy_total, n_batches
