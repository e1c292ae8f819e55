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
Pure Python with a heap: ~0.2-0.5 M requests per second; use it for verification, not screening.
"""

from __future__ import annotations

import heapq
import math
from collections import deque

import numpy as np

__all__ = ["run_balanced"]

_COMPLETE, _TIMEOUT = 0, 1


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
) -> tuple[np.ndarray, float, int]:
    """Latency per request (ms), total busy ms over replicas, number of batches.

    arrival_ms  (N,) sorted arrival times; service_ms / sigma: (K+1,) per requests-in-batch k.
    """
    if balancer not in ("jsq", "p2c", "random"):
        raise ValueError(f"unknown balancer {balancer!r}; use jsq, p2c or random")
    arr = arrival_ms.tolist()
    n = len(arr)
    svc = service_ms.tolist()
    sig = sigma.tolist()
    # Pre-drawn randomness (one draw per possible batch; one or two replica picks per request).
    noise = rng.standard_exponential(n).tolist() if dist == "exponential" else rng.standard_normal(n).tolist()
    picks = rng.integers(0, replicas, size=(n, 2)).tolist() if balancer != "jsq" else []
    queues: list[deque[int]] = [deque() for _ in range(replicas)]
    in_service = [0] * replicas  # requests in the running batch (0 = idle)
    timer_at = [-1.0] * replicas  # pending window expiry per replica
    dep = [0.0] * n
    heap: list[tuple[float, int, int]] = []
    busy_total = 0.0
    n_batches = 0
    eps = 1e-9
    k_cap, wait = max_requests, max_wait_ms

    def dispatch(rep: int, now: float) -> None:
        nonlocal busy_total, n_batches
        q = queues[rep]
        if in_service[rep] or not q:
            return
        if len(q) >= k_cap or now + eps >= arr[q[0]] + wait:
            k = min(len(q), k_cap)
            base = svc[k]
            z = noise[n_batches]
            t = base * z if dist == "exponential" else base * math.exp(sig[k] * z) if sig[k] else base
            done = now + t
            for _ in range(k):
                dep[q.popleft()] = done
            in_service[rep] = k
            busy_total += t
            n_batches += 1
            heapq.heappush(heap, (done, _COMPLETE, rep))
        else:
            due = arr[q[0]] + wait
            if timer_at[rep] != due:
                timer_at[rep] = due
                heapq.heappush(heap, (due, _TIMEOUT, rep))

    # JSQ in O(log replicas): a heap of (queued + in service, replica) with lazy invalidation. A
    # replica's length changes only when a request joins it or its batch completes (dispatch moves
    # requests from queue to service); each change pushes its new length, stale entries are skipped.
    lens = [0] * replicas
    shortest: list[tuple[int, int]] = [(0, r) for r in range(replicas)]

    def complete(rep: int) -> None:
        if balancer == "jsq":
            lens[rep] -= in_service[rep]
            heapq.heappush(shortest, (lens[rep], rep))
        in_service[rep] = 0

    for j in range(n):
        now = arr[j]
        while heap and heap[0][0] <= now:
            when, kind, rep = heapq.heappop(heap)
            if kind == _COMPLETE:
                complete(rep)
            dispatch(rep, when)
        if balancer == "jsq":
            while shortest[0][0] != lens[shortest[0][1]]:
                heapq.heappop(shortest)
            best = shortest[0][1]  # shortest, ties to the lowest index
            lens[best] += 1
            heapq.heappush(shortest, (lens[best], best))
        elif balancer == "p2c":
            x, y = picks[j]
            best = x if len(queues[x]) + in_service[x] <= len(queues[y]) + in_service[y] else y
        else:
            best = picks[j][0]
        queues[best].append(j)
        dispatch(best, now)
    while heap:
        when, kind, rep = heapq.heappop(heap)
        if kind == _COMPLETE:
            complete(rep)
        dispatch(rep, when)
    latency = np.asarray(dep) - arrival_ms
    return latency, busy_total, n_batches
