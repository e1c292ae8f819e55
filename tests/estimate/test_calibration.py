"""Calibration fits recover known parameters from synthetic data and bound held-out models."""

from __future__ import annotations

import math
import random

import pytest

from rightsize.estimate.calibration import (
    GpuPoint,
    ThreadPair,
    amdahl_parallel_fraction,
    amdahl_scale,
    batch_bytes,
    fit_cpu,
    fit_gpu,
    fits,
    gpu_prior_fit,
    gpu_time_ms,
    load_calibration,
)

_, PRIORS = load_calibration()


def test_amdahl_round_trip() -> None:
    for p in (0.0, 0.5, 0.8, 0.95):
        t1 = 100.0
        t2 = t1 * amdahl_scale(p, 1, 2)
        assert amdahl_parallel_fraction(1, t1, 2, t2) == pytest.approx(p, abs=1e-9)
        t8 = t1 * amdahl_scale(p, 1, 8)
        assert amdahl_parallel_fraction(2, t2, 8, t8) == pytest.approx(p, abs=1e-9)
    assert amdahl_parallel_fraction(1, 10.0, 2, 20.0) == 0.0  # slower with more threads: clamp


def _pairs(p_by_model: dict[str, float], noise: float, seed: int = 0) -> list[ThreadPair]:
    rng = random.Random(seed)
    out = []
    for model, p in p_by_model.items():
        for b in (1, 8, 32):
            t1 = 10.0 * b
            t2 = t1 * amdahl_scale(p, 1, 2) * math.exp(rng.gauss(0, noise))
            out.append(ThreadPair(model, "fp32", b, 1, 2, t1, t2))
    return out


def test_fit_cpu_recovers_p_and_band_covers_held_out() -> None:
    truth = {"a": 0.80, "b": 0.85, "c": 0.90, "d": 0.88, "e": 0.83}
    fit = fit_cpu(_pairs(truth, noise=0.01), PRIORS["cpu"])
    assert fit.calibrated and fit.n_pairs == 15
    assert fit.p("fp32") == pytest.approx(0.85, abs=0.03)
    # A held-out model with p inside the calibration spread, projected from 2 to 16 cores (3 doublings).
    p_new = 0.87
    t2 = 100.0
    truth16 = t2 * amdahl_scale(p_new, 2, 16)
    pred = t2 * amdahl_scale(fit.p("fp32"), 2, 16)
    lo, hi = math.exp(-3 * fit.log_band_lo_per_doubling), math.exp(3 * fit.log_band_hi_per_doubling)
    assert pred * lo <= truth16 <= pred * hi


def test_fit_cpu_without_pairs_is_the_prior() -> None:
    fit = fit_cpu([], PRIORS["cpu"])
    assert not fit.calibrated and fit.p("bf16") == PRIORS["cpu"]["parallel_fraction"]


def test_gpu_roofline_shape() -> None:
    kw = {"t_half_ms": 0.05, "eff_memory": 0.7, "overhead_ms": 1.0}
    big = 1e13  # 10 TFLOP: compute-bound
    t_a100 = gpu_time_ms(big, 1e9, 312e12, 2039, 0.45, **kw)
    t_h100 = gpu_time_ms(big, 1e9, 989e12, 3350, 0.45, **kw)
    assert t_h100 < t_a100
    assert t_a100 == pytest.approx(big / (312e12 * 0.45 * big / (big + 312e12 * 5e-5)) * 1e3 + 1.0, rel=1e-9)
    # memory-bound: only bandwidth matters
    t_mem = gpu_time_ms(1e6, 2e9, 989e12, 4800, 0.45, **kw)
    assert t_mem == pytest.approx(2e9 / (4800e9 * 0.7) * 1e3 + 1.0, rel=1e-9)
    # efficiency grows with work: per-sample time falls with batch
    per = [gpu_time_ms(b * 1e10, 1e8, 312e12, 2039, 0.45, 0.05, 0.7, 0.0) / b for b in (1, 4, 16, 64)]
    assert per == sorted(per, reverse=True)


def test_batch_bytes() -> None:
    inf32 = batch_bytes(1e9, 1e8, 8, "fp32", "inference", 256)
    inf16 = batch_bytes(1e9, 1e8, 8, "bf16", "inference", 256)
    train = batch_bytes(1e9, 1e8, 8, "fp32", "training", 256)
    assert inf16 == pytest.approx(inf32 / 2)
    assert inf32 == pytest.approx(1e8 * 4 + 1e9 * 8 * 4 / 256)
    # training: weights read twice, fp32 grads written, AdamW 28 B/param; activations 3x (F already fwd+bwd)
    assert train == pytest.approx(1e8 * (2 * 4 + 4 + 28) + 1e9 * 8 * 4 / 256)


def _gpu_points(eff: dict[str, float], overhead: float, models: dict[str, float], seed: int = 1) -> list[GpuPoint]:
    """Synthetic CUDA points from the roofline with a per-model efficiency factor (the truth)."""
    rng = random.Random(seed)
    prior = gpu_prior_fit(PRIORS["gpu"])
    out = []
    for model, f_model in models.items():
        for prec in eff:
            for b in (1, 8, 64):
                flops, moved = 2e10 * b, 4e8 + 1e6 * b
                t = gpu_time_ms(
                    flops, moved, 312e12, 2039, eff[prec] * f_model, prior.t_half_ms, prior.eff_memory, overhead
                )
                out.append(
                    GpuPoint(model, "inference", prec, flops, moved, 312e12, 2039, t * math.exp(rng.gauss(0, 0.02)))
                )
    return out


def test_fit_gpu_recovers_efficiency_and_band_covers_held_out() -> None:
    models = {"m1": 1.0, "m2": 0.9, "m3": 1.1, "m4": 0.95, "m5": 1.05}
    pts = _gpu_points({"bf16": 0.5, "fp32": 0.7}, 0.8, models)
    fit = fit_gpu(pts, PRIORS["gpu"])
    assert fit.calibrated and fit.n_points == len(pts)
    assert fit.eff_compute_max["bf16"] == pytest.approx(0.5, rel=0.15)
    assert fit.overhead_ms["inference"] == pytest.approx(0.8, rel=0.25)
    assert fit.band_lo < 1 < fit.band_hi < PRIORS["gpu"]["band"][1]  # calibrated band is tighter than the prior
    held = _gpu_points({"bf16": 0.5}, 0.8, {"new": 1.02}, seed=7)
    for p in held:
        pred = gpu_time_ms(p.flops, p.bytes_moved, p.peak_flops_per_s, p.bandwidth_gbps, fit.eff_compute_max["bf16"],
                           fit.t_half_ms, fit.eff_memory, fit.overhead_ms["inference"])  # fmt: skip
        assert pred * fit.band_lo <= p.latency_ms <= pred * fit.band_hi


def test_fit_gpu_needs_two_models() -> None:
    pts = _gpu_points({"bf16": 0.5}, 0.8, {"only": 1.0})
    assert not fit_gpu(pts, PRIORS["gpu"]).calibrated


def test_shipped_fits_load() -> None:
    f = fits()
    assert 0.0 <= f.cpu.p("fp32") < 1.0
    assert f.gpu.band_lo < 1 < f.gpu.band_hi
    if not f.gpu.calibrated:  # no GPU calibration data yet: the cited prior with its wide band
        assert (f.gpu.band_lo, f.gpu.band_hi) == tuple(PRIORS["gpu"]["band"])
