"""Open-loop arrival schedules: intended send times, fixed before the run starts.

Fixing the schedule up front is what makes the generator coordinated-omission free: a request's
latency is measured from its intended time, so a server stall delays every request scheduled
during it (wrk2, vegeta; docs/sources.md `load-generation`).
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np

from rightsize.errors import SpecError


def check_run_bounds(duration_s: float | None, requests: int | None, timeout_s: float) -> None:
    """Checks shared by open- and closed-loop configs: a run is always bounded, timeouts positive."""
    if duration_s is None and requests is None:
        raise ValueError("give duration_s or requests (a run is always bounded)")
    if timeout_s <= 0:
        raise ValueError(f"timeout_s must be > 0, got {timeout_s}")


__all__ = ["MAX_SCHEDULE", "Arrival", "arrival_offsets_s", "schedule_size"]

Arrival = Literal["poisson", "constant"]
MAX_SCHEDULE = 10_000_000  # requests in one run: 80 MB of send times (1e6/s x 86400 s asked for 691 GB)


def arrival_offsets_s(
    rate_per_s: float,
    *,
    duration_s: float | None = None,
    requests: int | None = None,
    arrival: Arrival = "poisson",
    seed: int | None = 0,
) -> np.ndarray:
    """Intended send times in seconds from the start, shape (n,), sorted, all in [0, n / rate).

    n = ``requests``, or round(rate × ``duration_s``), whichever is smaller (at least one bound must
    be given; n >= 1). The window is exactly n / rate, so the schedule's rate *is* the offered rate.
    Constant: gaps of exactly 1/rate from 0. Poisson: n sorted uniform times in the window, which is
    a Poisson process conditioned on n arrivals (exponential gaps, mean 1/rate), without the
    ±1/sqrt(n) count noise of drawing gaps until the window ends (MLPerf LoadGen "Server" scenario).
    """
    n = schedule_size(rate_per_s, duration_s=duration_s, requests=requests)
    if arrival == "constant":
        return np.arange(n, dtype=np.float64) / rate_per_s
    if arrival != "poisson":
        raise ValueError(f"arrival must be 'poisson' or 'constant', got {arrival!r}")
    rng = np.random.default_rng(seed)
    return np.sort(rng.uniform(0.0, n / rate_per_s, size=n))


def schedule_size(rate_per_s: float, *, duration_s: float | None = None, requests: int | None = None) -> int:
    """How many requests a schedule holds: ``requests`` or round(rate × duration), the smaller, >= 1."""
    if rate_per_s <= 0 or not math.isfinite(rate_per_s):
        raise ValueError(f"rate_per_s must be > 0, got {rate_per_s}")
    if duration_s is None and requests is None:
        raise ValueError("give duration_s or requests (a run is always bounded)")
    if duration_s is not None and duration_s <= 0:
        raise ValueError(f"duration_s must be > 0, got {duration_s}")
    if requests is not None and requests < 1:
        raise ValueError(f"requests must be >= 1, got {requests}")
    n = requests if requests is not None else math.inf
    if duration_s is not None:
        n = min(n, max(1, round(duration_s * rate_per_s)))
    if n > MAX_SCHEDULE:  # the options' fault wherever it is reached (a knee search's doubled rate too)
        raise SpecError("--rate", f"{rate_per_s:g}/s schedules {n:,.0f} requests; at most {MAX_SCHEDULE:,} in one "
                        "run: lower --rate, --duration or --requests")  # fmt: skip
    return int(n)
