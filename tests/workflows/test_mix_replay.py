"""A request mix replayed lane by lane: the served batch times and each class on its own lane."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rightsize.profile import ServiceCurve
from rightsize.workflows.mix_replay import Lane, replay_mix, served_table

CURVE = ServiceCurve("cpu", "fp32", (1, 8), (10.0, 24.0), (0.0, 0.0), "measured")  # t(b) = 8 + 2b


def test_served_table_keeps_each_sizes_logged_mean_and_scales_the_curve_elsewhere() -> None:
    log = [(1, 12.0), (1, 12.0), (1, 12.0), (8, 30.0), (8, 36.0), (8, 33.0), (4, 99.0)]  # size 4 seen once
    t, sigma = served_table(log, CURVE, 8)
    assert t.shape == sigma.shape == (9,) and sigma[0] == sigma[8] > 0  # size 8 scatters: 30-36 ms
    keep = math.exp(-0.5 * sigma[0] ** 2)  # lognormal median / mean: the draws keep the logged mean
    assert t[1] == pytest.approx(12.0 * keep) and t[8] == pytest.approx(33.0 * keep)
    # Size 4 (seen once) and 2 (never): the curve times the mean served/curve ratio of every batch.
    ratios = [12 / 10] * 3 + [30 / 24, 36 / 24, 33 / 24, 99 / 16]
    assert t[4] == pytest.approx(16.0 * np.mean(ratios) * keep) and t[2] == pytest.approx(12.0 * np.mean(ratios) * keep)
    flat, s0 = served_table([], CURVE, 8)  # nothing logged: the curve itself, no spread
    assert flat[8] == pytest.approx(24.0) and s0[0] == 0.0


def test_each_class_is_replayed_on_its_own_lane() -> None:
    """Light load, deterministic times: a small request waits max_wait then runs t(1); a large one fills
    a batch and runs at once. The large class never queues behind the small (its own lane)."""
    small = Lane("small", (1,), "fp32", CURVE, None)
    large = Lane("large", (8,), "fp32", CURVE, None)
    tables = {"small": (np.array([10.0] * 9), np.zeros(9)), "large": (np.array([50.0] * 9), np.zeros(9))}
    schedules = {1: np.arange(0.0, 10_000.0, 200.0), 8: np.arange(50.0, 10_000.0, 400.0)}
    out = replay_mix(schedules, [small, large], tables, 8, 5.0, warmup_ms=1000.0, overhead_ms=2.0, draws=3)
    assert len(out[1]) == len(out[8]) == 3
    assert np.allclose(out[1][0], 5.0 + 10.0 + 2.0) and len(out[1][0]) == 45  # sent from 1 s on
    assert np.allclose(out[8][0], 50.0 + 2.0)
    # A generator that started 1 s later: its schedule shifted onto the shared clock, its warm-up ending later.
    later = {1: schedules[1], 8: schedules[8] + 1000.0}
    shifted = replay_mix(later, [small, large], tables, 8, 5.0, warmup_ms={1: 1000.0, 8: 2000.0}, draws=1)
    assert len(shifted[8][0]) == len(out[8][0]) and np.allclose(shifted[8][0], 50.0)
    one = replay_mix(schedules, [Lane("all", (1, 8), "fp32", CURVE, None)], {"all": tables["large"]}, 8, 5.0, 0.0)
    assert set(one) == {1, 8} and float(np.median(one[1][0])) >= 50.0  # one lane: every request at its speed
