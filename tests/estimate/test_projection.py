"""Projection onto catalog devices: coverage, monotone sanity, measured wins, bands hold truth."""

from __future__ import annotations

import math
import random

import pytest

from rightsize.catalog import Catalog, load_catalog
from rightsize.estimate.calibration import (
    CalibrationSet,
    Fits,
    amdahl_scale,
    build_fits,
    gpu_prior_fit,
    gpu_time_ms,
    load_calibration,
)
from rightsize.estimate.projection import gpu_points_from_sets, match_accelerator, project_curves
from rightsize.profile import LatencyStats, Measurement, Profile, ServiceCurve

CAT = load_catalog("")
_, PRIORS = load_calibration()
SPR_ENV = {
    "id": "spr",
    "cpu_model": "Intel(R) Xeon(R) Platinum 8488C",
    "physical_cores": 2,
    "isa": ["avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "avx512_fp16", "amx_bf16", "amx_int8"],
    "gpus": [],
}
FLOPS = 2 * 85e6 * 128  # ~BERT-base forward per sample at seq 128
PRIOR_FITS = build_fits([], PRIORS)  # deterministic: the cited priors, whatever calibration files ship


def _m(model: str, b: int, t_ms: float, *, device: str = "cpu", prec: str = "fp32", threads: int | None = 2,
       flops: float = FLOPS, params: float = 1.1e8) -> Measurement:  # fmt: skip
    lat = LatencyStats(t_ms, t_ms * 1.1, t_ms * 1.2, t_ms, t_ms * 0.04, 20)
    threads = threads if device == "cpu" else None
    return Measurement(model, "inference", device, prec, b, threads, {"seq_len": 128}, "ok",
                       latency_ms=lat, flops_per_sample=flops, param_bytes=int(params * 4))  # fmt: skip


def _profile(env: dict, ms: list[Measurement], model: str = "bert-base") -> Profile:
    return Profile(model, "inference", {"seq_len": 128}, env, tuple(ms))


LOCAL = _profile(SPR_ENV, [_m("bert-base", 1, 80), _m("bert-base", 8, 550), _m("bert-base", 32, 2100),
                           _m("bert-base", 8, 200, prec="bf16")])  # fmt: skip


def _by(curves: list[ServiceCurve], device: str, prec: str) -> ServiceCurve:
    return next(c for c in curves if c.device == device and c.precision == prec)


def test_every_catalog_device_gets_a_banded_curve() -> None:
    curves = project_curves(LOCAL, CAT)
    for acc in CAT.accelerators:
        assert any(c.device == acc for c in curves), acc
    cpu_types = {i.instance_type for i in CAT.instances if i.device_class == "cpu"}
    for prec in ("fp32", "bf16"):
        assert cpu_types == {c.instance for c in curves if c.device.startswith("cpu:") and c.precision == prec}
    for c in curves:
        assert c.provenance == "projected" and c.band_lo < 1.0 < c.band_hi and c.source
        assert all(t > 0 for t in c.latency_ms) and all(0 <= v < 1 for v in c.cv)
    assert not any(c.device == "T4" and c.precision == "bf16" for c in curves)  # no native bf16 on T4
    assert not any(c.device == "T4" and c.precision == "tf32" for c in curves)  # no TF32 on Turing


def test_bigger_gpu_is_faster_when_compute_bound() -> None:
    curves = project_curves(LOCAL, CAT, precisions=["fp16"], calibration=PRIOR_FITS)
    t = {d: _by(curves, d, "fp16").t_ms(256) for d in ("T4", "L4", "A100-40GB", "H100", "H200")}
    assert t["T4"] > t["L4"] > t["A100-40GB"] > t["H100"] >= t["H200"]
    h100 = _by(curves, "H100", "fp16")
    assert h100.throughput_per_s(256) > h100.throughput_per_s(1)  # GPUs want batches


def test_more_cores_are_faster_and_amx_helps_bf16() -> None:
    curves = project_curves(LOCAL, CAT, calibration=PRIOR_FITS)
    t = [_by(curves, f"cpu:c7i.{s}", "fp32").t_ms(32) for s in ("2xlarge", "12xlarge", "48xlarge")]
    assert t[0] > t[1] > t[2]
    # local is Sapphire Rapids with 2 cores; c7i.2xlarge has 4 at a similar clock: ~2x faster at best
    assert 1.2 < LOCAL.ok("cpu", "fp32")[2].latency_ms.p50 / t[0] < 2.2  # type: ignore[union-attr]
    assert _by(curves, "cpu:c7i.2xlarge", "bf16").t_ms(8) < _by(curves, "cpu:c6i.2xlarge", "bf16").t_ms(8)


def test_measured_profile_wins_for_its_device() -> None:
    gpu_env = {"id": "a10g-box", "cpu_model": "AMD EPYC 7R32", "physical_cores": 2, "isa": ["avx2"],
               "gpus": [{"name": "NVIDIA A10G", "memory_bytes": 24 << 30}]}  # fmt: skip
    gpu_prof = _profile(gpu_env, [_m("bert-base", 1, 3.0, device="cuda", prec="bf16"),
                                  _m("bert-base", 32, 21.0, device="cuda", prec="bf16")])  # fmt: skip
    cloud_env = SPR_ENV | {"id": "c7i-box", "physical_cores": 4, "instance_type": "c7i.2xlarge"}
    cpu_prof = _profile(cloud_env, [_m("bert-base", 8, 260.0, threads=4)])
    other = _profile(gpu_env | {"id": "other"}, [_m("gpt2", 1, 1.0, device="cuda", prec="bf16")], model="gpt2")
    curves = project_curves(LOCAL, CAT, measured=[gpu_prof, cpu_prof, other])
    a10g = _by(curves, "A10G", "bf16")
    assert (a10g.provenance, a10g.band_lo, a10g.band_hi) == ("measured", 1.0, 1.0)
    assert a10g.latency_ms == (3.0, 21.0) and a10g.source == "a10g-box"
    assert _by(curves, "A10G", "fp32").provenance == "projected"  # fp32 was not measured there
    assert _by(curves, "L4", "bf16").provenance == "projected"
    c7i = _by(curves, "cpu:c7i.2xlarge", "fp32")
    assert c7i.provenance == "measured" and c7i.latency_ms == (260.0,) and c7i.instance == "c7i.2xlarge"


def test_match_accelerator_names() -> None:
    accs = CAT.accelerators
    cases = {
        "NVIDIA A100-SXM4-80GB": "A100-80GB",
        "NVIDIA A100-SXM4-40GB": "A100-40GB",
        "NVIDIA H100 80GB HBM3": "H100",
        "NVIDIA H100 PCIe": "H100-PCIe",
        "NVIDIA A10G": "A10G",
        "Tesla T4": "T4",
        "NVIDIA H200": "H200",
        "Tesla V100-SXM2-16GB": "V100-16GB",
    }
    for name, want in cases.items():
        got = match_accelerator(name, accs)
        assert got is not None and got.name == want, name
    assert match_accelerator("NVIDIA GeForce RTX 4090", accs) is None


WIDTH = gpu_prior_fit(PRIORS["gpu"]).width_for({"seq_len": 128})


def _true_h100_ms(flops: float, params: float, b: int, eff: float) -> float:
    """The hidden truth: the roofline with efficiency ``eff`` and a 0.7 ms overhead on an H100."""
    h100 = CAT.accelerators["H100"]
    moved = params * 2 + flops * b * 2 / WIDTH
    return gpu_time_ms(flops * b, moved, h100.peak_flops_per_s("bf16"), h100.bandwidth_gbps, eff, 0.05, 0.7, 0.7)


def _synthetic_gpu_fits(models: dict[str, tuple[float, float]], seed: int = 3) -> Fits:
    """Calibration sets "measured" on an H100: per model (size factor, efficiency), 3% noise."""
    rng = random.Random(seed)
    env = {"id": "h100", "cpu_model": "x", "gpus": [{"name": "NVIDIA H100 80GB HBM3"}]}
    sets = []
    for model, (size, eff) in models.items():
        flops, params = FLOPS * size, 1.1e8 * size
        ms = tuple(
            _m(model, b, _true_h100_ms(flops, params, b, eff) * math.exp(rng.gauss(0, 0.03)),
               device="cuda", prec="bf16", flops=flops, params=params)
            for b in (1, 8, 64, 256)
        )  # fmt: skip
        sets.append(CalibrationSet(model, env, ms))
    return build_fits(sets, PRIORS, gpu_points_from_sets(sets, PRIORS["gpu"]))


def test_gpu_band_contains_truth_for_held_out_model() -> None:
    models = {"m1": (1.0, 0.5), "m2": (0.5, 0.42), "m3": (2.0, 0.58), "m4": (1.5, 0.46), "m5": (0.8, 0.53)}
    fit = _synthetic_gpu_fits(models)
    assert fit.gpu.calibrated and fit.gpu.band_hi < 2.0
    size, eff = 1.2, 0.48  # held out: inside the calibration spread
    local = _profile(SPR_ENV, [_m("held", b, 100.0 * b, flops=FLOPS * size, params=1.1e8 * size) for b in (1, 8)],
                     model="held")  # fmt: skip
    curve = _by(project_curves(local, CAT, precisions=["bf16"], calibration=fit), "H100", "bf16")
    assert curve.provenance == "projected" and "calibrated" in curve.source
    for b, t in zip(curve.batch_sizes, curve.latency_ms, strict=True):
        truth = _true_h100_ms(FLOPS * size, 1.1e8 * size, b, eff)
        assert t * curve.band_lo <= truth <= t * curve.band_hi, (b, t, truth)


def test_cpu_band_contains_truth_for_held_out_model() -> None:
    """Calibration pairs (1→2 threads) from models with p in 0.8-0.9; held-out model p=0.86, 2→4 cores."""
    rng = random.Random(5)
    calib = []
    for model, p in {"a": 0.8, "b": 0.9, "c": 0.84, "d": 0.88}.items():
        for b in (1, 8):
            t1 = 50.0 * b
            calib += [
                _m(model, b, t1, threads=1),
                _m(model, b, t1 * amdahl_scale(p, 1, 2) * math.exp(rng.gauss(0, 0.02))),
            ]
    fit = build_fits([CalibrationSet("synthetic", SPR_ENV, tuple(calib))], PRIORS)
    assert fit.cpu.calibrated
    local = _profile(SPR_ENV, [_m("held", b, 40.0 * b, params=1e6) for b in (1, 8, 32)], model="held")
    curve = _by(project_curves(local, CAT, calibration=fit), "cpu:c7i.2xlarge", "fp32")  # same family, 4 cores
    for b, t in zip(curve.batch_sizes, curve.latency_ms, strict=True):
        truth = 40.0 * b * amdahl_scale(0.86, 2, 4)
        assert t * curve.band_lo <= truth <= t * curve.band_hi, (b, t, truth)


def test_projection_needs_no_gpu_flops_for_cpu_curves() -> None:
    local = _profile(SPR_ENV, [_m("x", 1, 10.0, flops=0.0)], model="x")
    curves = project_curves(local, Catalog(CAT.accelerators, CAT.cpus, CAT.instances))
    assert curves and all(c.device.startswith("cpu:") for c in curves)  # no FLOP count: no GPU roofline


@pytest.mark.parametrize("prec", ["fp32", "bf16"])
def test_local_cpu_family_unknown_widens_band(prec: str) -> None:
    odd = SPR_ENV | {"cpu_model": "Mystery CPU", "isa": []}
    known = _by(project_curves(LOCAL, CAT), "cpu:c6i.4xlarge", prec)
    unknown = _by(project_curves(_profile(odd, list(LOCAL.measurements)), CAT), "cpu:c6i.4xlarge", prec)
    assert unknown.band_hi > known.band_hi or unknown.band_lo < known.band_lo


def test_model_measured_on_one_gpu_projects_others_from_its_own_efficiency() -> None:
    """Measured on an A10G only (truth: eff 0.3, 0.4 ms): the A10G curve is measured, the H100 refitted."""

    def truth(acc_name: str, b: int) -> float:
        acc = CAT.accelerators[acc_name]
        moved = 1.1e8 * 2 + FLOPS * b * 2 / WIDTH
        return gpu_time_ms(FLOPS * b, moved, acc.peak_flops_per_s("bf16"), acc.bandwidth_gbps, 0.3, 0.05, 0.7, 0.4)

    env = {"id": "g5", "cpu_model": "AMD EPYC 7R32", "physical_cores": 2, "isa": ["avx2"],
           "gpus": [{"name": "NVIDIA A10G"}]}  # fmt: skip
    prof = _profile(env, [_m("bert-base", b, truth("A10G", b), device="cuda", prec="bf16") for b in (1, 8, 64)])
    curves = project_curves(prof, CAT, precisions=["bf16"])
    assert _by(curves, "A10G", "bf16").provenance == "measured"
    h = _by(curves, "H100", "bf16")
    assert h.provenance == "projected" and "refitted" in h.source
    for b, t in zip(h.batch_sizes, h.latency_ms, strict=True):
        assert t == pytest.approx(truth("H100", b), rel=0.05), b
