"""Arrival schedules: exact counts and windows, Poisson statistics, bounds."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from rightsize.loadgen.schedule import arrival_offsets_s, schedule_size


def test_constant_schedule_is_evenly_spaced() -> None:
    t = arrival_offsets_s(200.0, duration_s=2.0, arrival="constant")
    assert len(t) == 400
    assert t[0] == 0.0
    np.testing.assert_allclose(np.diff(t), 0.005)


def test_poisson_schedule_has_the_offered_rate_and_exponential_gaps() -> None:
    rate = 500.0
    t = arrival_offsets_s(rate, duration_s=20.0, arrival="poisson", seed=1)
    assert len(t) == 10_000  # the count is exact: the schedule's rate is the offered rate
    assert np.all(np.diff(t) >= 0) and t[0] >= 0 and t[-1] < 20.0
    gaps = np.diff(t)
    assert gaps.mean() == pytest.approx(1 / rate, rel=0.03)
    assert gaps.std() / gaps.mean() == pytest.approx(1.0, abs=0.05)  # exponential: CV 1
    # Counts per 100 ms window are Poisson: variance ≈ mean (= 50).
    counts = np.histogram(t, bins=200, range=(0, 20))[0]
    assert counts.var() / counts.mean() == pytest.approx(1.0, abs=0.3)


def test_seed_makes_the_schedule_reproducible() -> None:
    a = arrival_offsets_s(100.0, requests=50, seed=7)
    b = arrival_offsets_s(100.0, requests=50, seed=7)
    c = arrival_offsets_s(100.0, requests=50, seed=8)
    assert np.array_equal(a, b) and not np.array_equal(a, c)


def test_size_is_the_smaller_bound() -> None:
    assert schedule_size(100.0, duration_s=10.0, requests=50) == 50
    assert schedule_size(100.0, duration_s=0.2, requests=50) == 20
    assert schedule_size(100.0, duration_s=0.001) == 1
    assert len(arrival_offsets_s(100.0, requests=50)) == 50


@pytest.mark.parametrize(
    ("rate", "kwargs"),
    [(0.0, {"duration_s": 1.0}), (10.0, {}), (10.0, {"duration_s": -1.0}), (10.0, {"requests": 0})],
)
def test_bad_bounds_raise(rate: float, kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        arrival_offsets_s(rate, **kwargs)


def test_a_schedule_past_the_cap_is_refused_before_its_allocation() -> None:
    from rightsize.errors import SpecError

    with pytest.raises(SpecError, match="schedules 86,400,000,000 requests; at most 10,000,000"):
        schedule_size(1e6, duration_s=86_400)
