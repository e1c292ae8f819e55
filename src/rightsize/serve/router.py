"""Which pool runs a request: fixed (cpu|gpu), by size, or by expected completion time (hybrid).

Pools are ordered: ``pools[0]`` is the small-request pool (CPU), ``pools[-1]`` the large-batch pool (GPU).

* ``size``   — requests of fewer samples than the crossover batch go to pools[0], the rest to pools[-1].
  The crossover is given (from the profile) or, if not, where the two online fits cross.
* ``hybrid`` — each request goes to the pool with the lowest expected completion time (ECT): time until
  a worker is free for its batch (backlog) + t(its batch). t(n) = a·n + b is fitted online per pool by
  least squares over recent batches (BentoML's adaptive batching does the same — docs/sources.md `batching-designs`).
  The size rule names the request's *home* pool; a request sent elsewhere is counted as a *spill*
  (its home pool would have finished it later, e.g. past the SLO under a backlog).

With an SLO, a request whose best ECT exceeds it is refused at once (503) instead of queued to miss.
Pure functions and a small fit class: no asyncio, no torch, testable with made-up pool states.
"""

from __future__ import annotations

import heapq
import math
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Literal

RouteReason = Literal["fixed", "home", "spill"]

_MAX_SIMULATED_BATCHES = 256  # beyond this many batches ahead, ECT uses the fluid approximation


Sums = tuple[float, float, float, float, float]  # k, Σn, Σt, Σn², Σn·t


def sums_of(points: list[tuple[int, float]]) -> Sums:
    return (
        float(len(points)),
        float(sum(n for n, _ in points)),
        sum(t for _, t in points),
        float(sum(n * n for n, _ in points)),
        sum(n * t for n, t in points),
    )


@dataclass
class LinearFit:
    """t(n) = a·n + b in milliseconds, least squares over the last ``window`` batches.

    ``anchors`` (e.g. warm-up timings at n=1 and n=max_batch) join the fit while recent batches span
    fewer than two distinct sizes, so a pool that only ever ran n=1 still extrapolates sensibly.
    Running sums make ``observe`` and ``coef`` O(1) (they run once per batch and per routed request).
    """

    window: int = 64
    anchors: list[tuple[int, float]] = field(default_factory=list)
    _recent: deque[tuple[int, float]] = field(init=False)
    _sums: list[float] = field(init=False)
    _sizes: Counter[int] = field(init=False)
    _anchor_sums: Sums = field(init=False, default=(0.0, 0.0, 0.0, 0.0, 0.0))
    _coef: tuple[float, float] | None = field(init=False, default=None)
    _since_exact: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        self._recent = deque(maxlen=self.window)
        self._sums = [0.0] * 5
        self._sizes = Counter()

    def observe(self, n: int, ms: float) -> None:
        if len(self._recent) == self.window:
            old_n, old_t = self._recent[0]
            self._add(old_n, old_t, -1.0)
            self._sizes[old_n] -= 1
            if not self._sizes[old_n]:
                del self._sizes[old_n]
        self._recent.append((n, ms))
        self._add(n, ms, 1.0)
        self._sizes[n] += 1
        self._since_exact += 1
        if self._since_exact >= 16 * self.window:  # re-sum now and then: no floating-point drift
            self._sums = list(sums_of(list(self._recent)))
            self._since_exact = 0
        self._coef = None

    def _add(self, n: int, t: float, sign: float) -> None:
        s = self._sums
        s[0] += sign
        s[1] += sign * n
        s[2] += sign * t
        s[3] += sign * n * n
        s[4] += sign * n * t

    def anchor(self, n: int, ms: float) -> None:
        self.anchors.append((n, ms))
        self._anchor_sums = sums_of(self.anchors)
        self._coef = None

    @property
    def coef(self) -> tuple[float, float]:
        """(a ms per sample, b ms per batch)."""
        if self._coef is None:
            k, sx, sy, sxx, sxy = self._sums
            if len(self._sizes) < 2 and self.anchors:
                ak, ax, ay, axx, axy = self._anchor_sums
                k, sx, sy, sxx, sxy = k + ak, sx + ax, sy + ay, sxx + axx, sxy + axy
            self._coef = fit_sums(k, sx, sy, sxx, sxy)
        return self._coef

    def predict_ms(self, n: float) -> float:
        a, b = self.coef
        return a * n + b

    @property
    def n_anchors(self) -> int:
        return len(self.anchors)

    @property
    def n_observed(self) -> int:
        return len(self._recent)


def fit_linear(points: list[tuple[int, float]]) -> tuple[float, float]:
    """Least-squares (a, b) of t = a·n + b with a, b ≥ 0; one size only: t ∝ n through the origin."""
    return fit_sums(*sums_of(points))


def fit_sums(k: float, sx: float, sy: float, sxx: float, sxy: float) -> tuple[float, float]:
    """``fit_linear`` from the sums k, Σn, Σt, Σn², Σn·t (normal equations of least squares)."""
    if k <= 0:
        return 0.0, 0.0
    det = k * sxx - sx * sx
    if det <= 1e-9 * max(1.0, k * sxx):  # a single distinct n: no slope information
        return (sy / sx, 0.0) if sx > 0 else (0.0, sy / k)
    a = (k * sxy - sx * sy) / det
    b = (sy - a * sx) / k
    if a < 0:  # time falling with n is noise: flat
        return 0.0, sy / k
    if b < 0:  # through the origin
        return sxy / sxx, 0.0
    return a, b


@dataclass(frozen=True)
class PoolState:
    """A snapshot of one pool for routing."""

    name: str
    queued_samples: int
    busy_ms: tuple[float, ...]  # remaining compute of each busy worker
    workers: int
    max_batch: int
    max_wait_ms: float
    fit: LinearFit

    def expected_completion_ms(self, n: int) -> float:
        return expected_completion_ms(self, n)


def expected_completion_ms(pool: PoolState, n: int) -> float:
    """ECT of a new n-sample request: wait for a worker for its batch, a partial batch's wait, t(batch).

    1. Queued samples ahead of it form ``ahead // max_batch`` full batches before its own.
    2. Workers free up at 0 (idle) or their remaining time; each batch ahead goes to the first free one
       and keeps it for t(max_batch) (simulated; the fluid limit work/workers past 256 batches).
    3. Its own batch holds the rest; if partial and a worker is idle it waits up to max_wait_ms to fill.
    """
    t_full = pool.fit.predict_ms(pool.max_batch)
    ahead = pool.queued_samples
    before = ahead // pool.max_batch
    my_size = min(pool.max_batch, ahead + n - before * pool.max_batch)
    free = sorted([0.0] * max(0, pool.workers - len(pool.busy_ms)) + list(pool.busy_ms))[: max(1, pool.workers)]
    if before > _MAX_SIMULATED_BATCHES:
        start = min(free) + before * t_full / max(1, pool.workers)
    else:
        heapq.heapify(free)
        for _ in range(before):
            heapq.heappush(free, heapq.heappop(free) + t_full)
        start = free[0]
    fill = pool.max_wait_ms if my_size < pool.max_batch and start <= 0 else 0.0
    return start + fill + pool.fit.predict_ms(my_size)


def crossover_n(small: LinearFit, large: LinearFit) -> float:
    """Batch size above which the large pool is faster: a_s·n + b_s = a_l·n + b_l (inf: never, 0: always)."""
    a_s, b_s = small.coef
    a_l, b_l = large.coef
    if b_l <= b_s and a_l <= a_s:
        return 0.0
    if a_s <= a_l:
        return math.inf
    return (b_l - b_s) / (a_s - a_l)


@dataclass(frozen=True)
class Route:
    pool: int  # index into the pools
    reason: RouteReason
    ect_ms: float
    misses_slo: bool  # the chosen pool's ECT exceeds the SLO: refuse with 503


def choose_pool(
    n: int, pools: list[PoolState], router: str, slo_ms: float | None = None, crossover: float | None = None
) -> Route:
    """Route an n-sample request. ``router``: cpu (pools[0]) | gpu (pools[-1]) | size | hybrid."""
    last = len(pools) - 1
    if router in ("cpu", "gpu") or last == 0:
        i = 0 if router == "cpu" or last == 0 else last
        ect = expected_completion_ms(pools[i], n)
        return Route(i, "fixed", ect, slo_ms is not None and ect > slo_ms)
    cross = crossover if crossover is not None else crossover_n(pools[0].fit, pools[last].fit)
    home = 0 if n < cross else last
    if router == "size":
        ect = expected_completion_ms(pools[home], n)
        return Route(home, "home", ect, slo_ms is not None and ect > slo_ms)
    if router != "hybrid":
        raise ValueError(f"unknown router {router!r}")
    ects = [expected_completion_ms(p, n) for p in pools]
    best = min(range(len(pools)), key=lambda i: (ects[i], i != home))  # ties stay home
    return Route(best, "home" if best == home else "spill", ects[best], slo_ms is not None and ects[best] > slo_ms)
