"""Vectorised micro-batching simulator: many independent queues ("lanes") advanced one batch per step.

Each lane is one deployment: ``servers`` replicas sharing one FIFO queue with a Triton-style dynamic
batcher (docs/sources.md `batching-designs`): when a server is free it takes up to ``max_requests`` queued requests; it
holds a partial batch while the oldest request has waited less than ``max_wait_ms`` (measured from
that request's arrival). One step of every lane, in numpy over all lanes at once:

    F = earliest free server time
    S = max(F, min(a[i] + W, a[i + K - 1]))     batch start: window expiry or batch full, not before F
    k = #arrivals in [a[i], S], clipped to 1..K   requests in the batch
    D = S + t(k) x noise                          departure of all k requests; server busy until D

The loop runs over batch index, not over requests, so its cost is (#batches of the longest lane) x
(~20 numpy calls) whatever the number of lanes: with hundreds of lanes that is millions of requests
per second. Lanes may share one arrival row (common random numbers: candidate comparisons are then
less noisy, and the row stays in cache) or each have their own (independent replications).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["LaneOutput", "run_lanes"]

_NOISE_CHUNK = 64  # steps of service-time noise drawn at once


@dataclass(frozen=True)
class LaneOutput:
    """Per-request latencies and per-lane totals."""

    latency_ms: np.ndarray  # (L, N) sojourn of each request (departure - arrival)
    busy_ms: np.ndarray  # (L,) total service time over all servers
    batches: np.ndarray  # (L,) batches run
    span_ms: np.ndarray  # (L,) first arrival to last departure


def run_lanes(
    arrival_ms: np.ndarray,
    servers: np.ndarray,
    max_requests: np.ndarray,
    max_wait_ms: np.ndarray,
    service_ms: np.ndarray,
    sigma: np.ndarray,
    rng: np.random.Generator,
    dist: str = "lognormal",
) -> LaneOutput:
    """Simulate L lanes.

    arrival_ms    (N,) one sorted arrival row shared by every lane, or (L, N) one row per lane
    servers       (L,) replicas sharing the lane's queue
    max_requests  (L,) requests per batch (max_batch // request_samples, >= 1)
    max_wait_ms   (L,) batching window from the oldest request's arrival
    service_ms    (L, K+1) median (lognormal) or mean (exponential) time of a batch of k requests
    sigma         (L, K+1) lognormal sigma of that time (0: deterministic); each lane uses the value at
                  its max batch; ignored for "exponential"
    dist          "lognormal" | "exponential"
    """
    servers = np.asarray(servers, dtype=np.int64)
    n_lanes = servers.size
    kmax = np.asarray(max_requests, dtype=np.int64)
    if np.any(kmax < 1) or np.any(servers < 1):
        raise ValueError("servers and max_requests must be >= 1")
    shared = arrival_ms.ndim == 1
    n = arrival_ms.shape[-1]
    # 1. Time axis. Shared: the row itself. Own rows: flattened with lane l in [l H, (l + 1) H), so one
    #    searchsorted serves all lanes; departures may run past a lane's window (overload), but k is
    #    clipped to the lane's end, so that stays correct.
    if shared:
        local = arrival_ms - arrival_ms[0]
        flat = local
        offset = np.zeros(n_lanes)
        row_base = np.zeros(n_lanes, dtype=np.int64)
    else:
        local = arrival_ms - arrival_ms[:, :1]
        width = float(local[:, -1].max()) + 1.0
        offset = np.arange(n_lanes, dtype=np.float64) * width
        flat = (local + offset[:, None]).ravel()
        row_base = np.arange(n_lanes, dtype=np.int64) * n
    # 2. Per-request outputs, indexed lane * n + request: departure and service time stored at each
    #    batch's first request.
    dep_start = np.zeros(n_lanes * n)
    t_start = np.zeros(n_lanes * n)
    is_start = np.zeros(n_lanes * n, dtype=bool)
    width_k = service_ms.shape[1]
    svc = np.asarray(service_ms, dtype=np.float64).ravel()
    sig = np.asarray(sigma, dtype=np.float64).ravel()
    noisy = dist == "exponential" or bool(np.any(sig > 0))
    # 3. Active-lane state, compacted as lanes finish. Free times are (R, L) so reductions run along
    #    the long axis; padded servers are never free (inf). ``g`` is the next request's index into
    #    ``flat``; ``g + a_out`` its index into the outputs.
    r_max = int(servers.max())
    free = np.where(np.arange(r_max)[:, None] < servers[None, :], offset[None, :], np.inf)
    a_g = row_base.copy()
    a_end = row_base + n
    a_out = np.arange(n_lanes, dtype=np.int64) * n - row_base
    a_svc = np.arange(n_lanes, dtype=np.int64) * width_k
    a_k = kmax
    a_w = np.asarray(max_wait_ms, dtype=np.float64)
    # Service spread per lane: the lognormal sigma at the lane's largest batch (cv barely moves with b).
    a_sig = sig[a_svc + kmax]
    cols = np.arange(n_lanes)
    step = 0
    noise = np.empty((0, 0))
    log_o: list[np.ndarray] = []  # per step: output index of each batch's first request,
    log_d: list[np.ndarray] = []  # its departure
    log_t: list[np.ndarray] = []  # and its service time
    while a_g.size:
        # earliest free server (for a few server rows a Python loop beats argmin along the short axis)
        if free.shape[0] <= 3:
            f = free[0].copy()
            r = np.zeros(a_g.size, dtype=np.int64)
            for j in range(1, free.shape[0]):
                sooner = free[j] < f
                f[sooner] = free[j][sooner]
                r[sooner] = j
        else:
            r = free.argmin(axis=0)
            f = free[r, cols]
        room = np.minimum(a_k, a_end - a_g)
        full = a_g + room - 1
        a_fill = np.where(room == a_k, flat[full], np.inf)  # the K-th request exists: the batch can fill
        s = np.maximum(f, np.minimum(flat[a_g] + a_w, a_fill))
        k = np.searchsorted(flat, s, side="right") - a_g
        k = np.minimum(np.maximum(k, 1), room)  # (np.clip with array bounds is several times slower)
        t = svc[a_svc + k]
        if noisy:
            if step % _NOISE_CHUNK == 0:
                if dist == "exponential":
                    noise = rng.standard_exponential((_NOISE_CHUNK, a_g.size))
                else:
                    noise = np.exp(a_sig * rng.standard_normal((_NOISE_CHUNK, a_g.size)))
                step = 0
            t *= noise[step]
            step += 1
        d = s + t
        free[r, cols] = d
        log_o.append(a_g + a_out)
        log_d.append(d)
        log_t.append(t)
        a_g = a_g + k
        live = a_g < a_end
        if not np.all(live):
            a_g, a_end, a_out, a_svc, a_k, a_w, a_sig = (
                a_g[live],
                a_end[live],
                a_out[live],
                a_svc[live],
                a_k[live],
                a_w[live],
                a_sig[live],
            )
            free = free[:, live]
            cols = np.arange(a_g.size)
            step = 0  # redraw noise for the new lane set
    # 4. Scatter the batch log once (cheaper than three random writes per step), then forward-fill
    #    each batch's departure onto its requests (every lane starts with a batch).
    o_all = np.concatenate(log_o)
    dep_start[o_all] = np.concatenate(log_d)
    t_start[o_all] = np.concatenate(log_t)
    is_start[o_all] = True
    idx = np.where(is_start, np.arange(n_lanes * n), 0)
    np.maximum.accumulate(idx, out=idx)
    dep = dep_start[idx].reshape(n_lanes, n) - offset[:, None]
    latency = dep - local
    busy = t_start.reshape(n_lanes, n).sum(axis=1)
    batches = is_start.reshape(n_lanes, n).sum(axis=1)
    return LaneOutput(latency_ms=latency, busy_ms=busy, batches=batches, span_ms=dep.max(axis=1))
