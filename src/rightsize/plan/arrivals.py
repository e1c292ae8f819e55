"""Arrival processes for the serving simulator: request arrival times in milliseconds, sorted.

poisson   exponential gaps at ``rate_per_s`` (MLPerf Server scenario, docs/sources.md `load-generation`)
bursty    on/off Markov-modulated Poisson: ON at ``burstiness`` x the mean rate for exponential
          periods of mean ``burst_s``, OFF (silent) in between, so the long-run mean is ``rate_per_s``
          and the peak-to-mean ratio is ``burstiness``
constant  evenly spaced (a closed-loop client's best case)
"""

from __future__ import annotations

import numpy as np

__all__ = ["arrival_times_ms"]


def arrival_times_ms(
    rng: np.random.Generator,
    n: int,
    rate_per_s: float,
    process: str = "poisson",
    burstiness: float = 4.0,
    burst_s: float = 1.0,
    lanes: int = 1,
) -> np.ndarray:
    """``(lanes, n)`` independent arrival-time rows in ms starting near 0 (``lanes == 1``: still 2-D)."""
    rate_per_ms = rate_per_s / 1000.0
    if process == "constant":
        row = np.arange(n, dtype=np.float64) / rate_per_ms
        return np.tile(row, (lanes, 1))
    if process == "poisson" or burstiness <= 1.0:
        gaps = rng.standard_exponential((lanes, n)) / rate_per_ms
        return np.cumsum(gaps, axis=1)
    if process != "bursty":
        raise ValueError(f"unknown arrival process {process!r}; use poisson, bursty or constant")
    # 1. Poisson at the peak rate on the "ON-time" axis.
    peak_per_ms = rate_per_ms * burstiness
    on_time = np.cumsum(rng.standard_exponential((lanes, n)) / peak_per_ms, axis=1)
    # 2. Cut ON-time into exponential ON periods and insert an OFF gap before each: mean OFF length is
    #    (burstiness - 1) x mean ON length, so ON is 1/burstiness of the time.
    on_ms, off_ms = burst_s * 1000.0, burst_s * 1000.0 * (burstiness - 1.0)
    out = np.empty_like(on_time)
    for lane in range(lanes):
        horizon = on_time[lane, -1]
        m = int(horizon / on_ms * 1.5) + 16
        ends = np.cumsum(rng.standard_exponential(m) * on_ms)
        while ends[-1] < horizon:  # rare: draw more periods
            ends = np.concatenate([ends, ends[-1] + np.cumsum(rng.standard_exponential(m) * on_ms)])
        gaps = rng.standard_exponential(len(ends)) * off_ms
        period = np.searchsorted(ends, on_time[lane], side="right")  # ON period of each arrival
        out[lane] = on_time[lane] + np.cumsum(gaps)[period]  # plus all OFF gaps before (and at) its period
    return out
