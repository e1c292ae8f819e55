"""Routing decisions and the online t(n) fit, on made-up pool states (no CUDA, no server)."""

from __future__ import annotations

import math

import pytest

from rightsize.serve.router import LinearFit, PoolState, choose_pool, crossover_n, expected_completion_ms, fit_linear


def fit_of(a: float, b: float, sizes: tuple[int, ...] = (1, 4, 8)) -> LinearFit:
    fit = LinearFit()
    for n in sizes:
        fit.observe(n, a * n + b)
    return fit


def pool(name: str, fit: LinearFit, queued: int = 0, busy: tuple[float, ...] = (), workers: int = 1) -> PoolState:
    return PoolState(name, queued, busy, workers, max_batch=8, max_wait_ms=2.0, fit=fit)


def test_fit_linear_recovers_exact_line_and_clamps() -> None:
    a, b = fit_linear([(1, 3.0), (2, 5.0), (8, 17.0)])  # t = 2n + 1
    assert (a, b) == (pytest.approx(2.0), pytest.approx(1.0))
    assert fit_linear([(4, 8.0), (4, 12.0)]) == (pytest.approx(2.5), 0.0)  # one size: proportional
    assert fit_linear([(1, 10.0), (8, 2.0)]) == (0.0, pytest.approx(6.0))  # falling: flat mean
    a, b = fit_linear([(1, 0.5), (8, 24.0)])  # negative intercept -> through the origin
    assert b == 0.0 and a == pytest.approx((0.5 + 8 * 24.0) / 65)


def test_fit_uses_anchors_until_recent_sizes_differ() -> None:
    fit = LinearFit(window=4)
    fit.anchor(1, 2.0)
    fit.anchor(8, 9.0)  # t = n + 1
    fit.observe(1, 2.0)
    assert fit.predict_ms(8) == pytest.approx(9.0)  # anchors supply the slope
    for n, t in [(2, 10.0), (4, 20.0), (2, 10.0), (4, 20.0)]:  # t = 5n; window drops the n=1 point
        fit.observe(n, t)
    assert fit.coef == (pytest.approx(5.0), pytest.approx(0.0))


def test_ect_idle_busy_and_backlog() -> None:
    fit = fit_of(1.0, 2.0)  # t(n) = n + 2 ms; t(8) = 10
    # idle, partial batch: waits max_wait 2 ms to fill, then t(1) = 3
    assert expected_completion_ms(pool("p", fit), 1) == pytest.approx(5.0)
    # full batch by itself: no wait
    assert expected_completion_ms(pool("p", fit), 8) == pytest.approx(10.0)
    # the only worker busy for 4 more ms, 3 queued: joins their batch (4 samples) after the busy one
    assert expected_completion_ms(pool("p", fit, queued=3, busy=(4.0,)), 1) == pytest.approx(4.0 + 6.0)
    # 20 queued, 2 workers idle: 2 full batches ahead go one per worker; own batch (5) after the first
    assert expected_completion_ms(pool("p", fit, queued=20, workers=2), 1) == pytest.approx(10.0 + 7.0)
    # 2000 queued: the fluid limit, 250 batches × 10 ms / 1 worker
    assert expected_completion_ms(pool("p", fit, queued=2000), 8) == pytest.approx(2500.0 + 10.0)


def test_crossover() -> None:
    cpu, gpu = fit_of(2.0, 1.0), fit_of(0.25, 8.0)  # equal at n = 7/1.75 = 4
    assert crossover_n(cpu, gpu) == pytest.approx(4.0)
    assert crossover_n(gpu, cpu) == math.inf  # swapped: the "small" pool is never the slower one
    assert crossover_n(fit_of(1.0, 1.0), fit_of(2.0, 2.0)) == math.inf  # small pool always faster
    assert crossover_n(fit_of(2.0, 2.0), fit_of(1.0, 1.0)) == 0.0  # large pool always faster


def test_fixed_and_size_routers() -> None:
    cpu, gpu = pool("cpu", fit_of(2.0, 1.0)), pool("gpu", fit_of(0.25, 8.0))
    assert choose_pool(8, [cpu, gpu], "cpu").pool == 0
    assert choose_pool(1, [cpu, gpu], "gpu").pool == 1
    assert choose_pool(3, [cpu, gpu], "size").pool == 0  # below the fitted crossover of 4
    assert choose_pool(4, [cpu, gpu], "size").pool == 1
    assert choose_pool(3, [cpu, gpu], "size", crossover=2).pool == 1  # a profile's crossover wins
    assert choose_pool(1, [cpu], "hybrid").reason == "fixed"  # one pool: nothing to choose


def test_hybrid_goes_home_when_idle_and_spills_under_backlog() -> None:
    cpu_fit, gpu_fit = fit_of(2.0, 1.0), fit_of(0.25, 8.0)
    idle = [pool("cpu", cpu_fit), pool("gpu", gpu_fit)]
    r = choose_pool(1, idle, "hybrid")
    assert (r.pool, r.reason) == (0, "home") and r.ect_ms == pytest.approx(2.0 + 3.0)
    assert choose_pool(8, idle, "hybrid").pool == 1  # big request: the GPU is faster
    # the CPU has a 50 ms backlog: a 1-sample request spills to the GPU (ECT 2 + 8.25)
    backed_up = [pool("cpu", cpu_fit, queued=40, busy=(10.0,)), pool("gpu", gpu_fit)]
    r = choose_pool(1, backed_up, "hybrid", slo_ms=50.0)
    assert (r.pool, r.reason, r.misses_slo) == (1, "spill", False)
    assert r.ect_ms == pytest.approx(2.0 + 8.25)


def test_slo_miss_is_flagged_when_every_pool_is_late() -> None:
    fit = fit_of(1.0, 2.0)
    late = [pool("a", fit, queued=80, busy=(5.0,)), pool("b", fit, queued=80, busy=(5.0,))]
    r = choose_pool(1, late, "hybrid", slo_ms=50.0)
    assert r.misses_slo and r.ect_ms > 50.0
    assert not choose_pool(1, late, "hybrid", slo_ms=None).misses_slo
