"""Projection onto catalog devices: coverage, layouts, anchors, ISA extrapolation, measured wins."""

from __future__ import annotations

import pytest

from rightsize.catalog import load_catalog
from rightsize.estimate.bands import Band
from rightsize.estimate.projection import ProjectionModel, cpu_layouts, fallback_work, project_curves
from rightsize.estimate.timemodel import CpuParams, GpuParams, cpu_time_ms, gpu_time_ms
from rightsize.profile import Latency, Measurement, Profile, ServiceCurve, WorkProfile

CAT = load_catalog("")
BANDS = {"gpu": Band(0.7, 1.4, 0.9, 40, 0.15, "test"), "cpu": Band(0.75, 1.3, 0.9, 20, 0.1, "test")}
MODEL = ProjectionModel(GpuParams(), CpuParams(), BANDS, "test fit")
ICX_ENV = {  # an Ice Lake box with 2 cores, no AMX, VNNI
    "id": "icx", "cpu_model": "Intel(R) Xeon(R) Platinum 8375C CPU", "physical_cores": 2,
    "isa": ["avx2", "fma", "avx512f", "avx512_vnni"], "gpus": [],
}  # fmt: skip


def _work(mode: str = "inference") -> WorkProfile:
    gemm = 2 * 128 * 768 * 768
    ops = (("gemm", 72, gemm, 2 * gemm, 2.8e6, 3.5e6), ("memory", 96, 0.0, 0.0, 8e5, 1.6e6), ("host", 72, 0, 0, 0, 0))
    return WorkProfile("bert-base", mode, {"seq_len": 128}, False, ops, 85_000_000, 200)


def _m(b: int, t_ms: float, *, device: str = "cpu", prec: str = "fp32", threads: int | None = 2,
       extra: dict | None = None) -> Measurement:  # fmt: skip
    lat = Latency(t_ms, t_ms * 1.1, t_ms * 1.2, t_ms, t_ms * 0.04, 20)
    return Measurement("bert-base", "inference", device, prec, b, threads if device == "cpu" else None,
                       {"seq_len": 128}, "ok", latency_ms=lat, flops_per_sample=2.2e10, param_bytes=int(3.4e8),
                       extra=extra or {})  # fmt: skip


def _local(ms: list[Measurement], env: dict | None = None) -> Profile:
    return Profile("bert-base", "inference", {"seq_len": 128}, env or ICX_ENV, tuple(ms))


def _by(curves: list[ServiceCurve], device: str, prec: str, threads: int | None = None) -> ServiceCurve:
    return next(
        c for c in curves if c.device == device and c.precision == prec and (threads is None or c.threads == threads)
    )


ICL = CAT.cpus["intel-icelake"]
TRUE_K = 1.7  # the hidden truth: this model runs 1.7x slower than the CPU model says, on any Ice Lake


def _truth_local(b: int, threads: int) -> float:
    return TRUE_K * cpu_time_ms(_work(), b, ICL, threads, "fp32", MODEL.cpu)


LOCAL = _local([_m(b, _truth_local(b, 2)) for b in (1, 8)] + [_m(b, _truth_local(b, 1), threads=1) for b in (1, 8)])


def test_every_catalog_device_gets_a_banded_curve() -> None:
    curves = project_curves(LOCAL, CAT, MODEL, _work())
    for acc in CAT.accelerators:
        assert any(c.device == acc for c in curves), acc
    cpu_types = {i.instance_type for i in CAT.instances if i.device_class == "cpu"}
    for prec in ("fp32", "bf16", "int8"):  # int8 and bf16 are projected even though only fp32 was measured
        assert cpu_types == {c.instance for c in curves if c.device.startswith("cpu:") and c.precision == prec}
    # The local box (Ice Lake, 2 cores) is a c6i.xlarge or a D4s_v5 in all but name: there its measured fp32 curve
    # wins; every other device and precision is projected, with a band.
    local = {i.instance_type for i in CAT.instances if i.cpu_family == "intel-icelake" and i.cores == 2}
    assert local == {"c6i.xlarge", "Standard_D4s_v5"}
    icelake = {i.instance_type for i in CAT.instances if i.cpu_family == "intel-icelake"}
    for c in curves:
        if c.instance in local and c.precision == "fp32":
            assert c.provenance == "measured" and c.band_lo == c.band_hi == 1.0
        elif c.instance in icelake and c.precision == "fp32" and c.threads in (1, 2):
            # k workers of a thread count measured here on this very CPU: each runs as measured (no band), slowed
            # only by sharing the socket's memory bandwidth with the other workers
            assert c.provenance == "projected" and c.band_lo == c.band_hi == 1.0 and "as measured here" in c.source
            for b, t in zip(c.batch_sizes, c.latency_ms, strict=True):
                assert _truth_local(b, c.threads) <= t * (1 + 1e-9) < 1.5 * _truth_local(b, c.threads)
        else:
            assert c.provenance == "projected" and c.band_lo < 1.0 < c.band_hi and c.source
        assert all(t > 0 for t in c.latency_ms)
    assert not any(c.device == "T4" and c.precision in ("bf16", "tf32") for c in curves)  # Turing


def test_cpu_layouts_cover_every_core_once() -> None:
    assert cpu_layouts(4) == [(4, 1), (2, 2), (1, 4)]
    assert (1, 96) in cpu_layouts(96) and (96, 1) in cpu_layouts(96)


def test_no_cpu_worker_spans_two_sockets() -> None:
    assert cpu_layouts(96, socket_cores=48) == [(96, 1), (48, 2), (24, 4), (12, 8), (6, 16), (2, 48)]
    assert max(t for _, t in cpu_layouts(32, socket_cores=24)) == 16  # 2 sockets of 16 used cores
    assert cpu_layouts(8, socket_cores=24) == cpu_layouts(8)  # one socket: every layout, all cores included
    curves = project_curves(LOCAL, CAT, MODEL, _work())
    c6i = [c for c in curves if c.instance == "c6i.4xlarge" and c.precision == "fp32"]  # 8 cores
    assert {(c.workers, c.threads) for c in c6i} == {(8, 1), (4, 2), (2, 4), (1, 8)}
    one, eight = _by(c6i, "cpu:c6i.4xlarge", "fp32", 1), _by(c6i, "cpu:c6i.4xlarge", "fp32", 8)
    assert eight.t_ms(1) < one.t_ms(1)  # more threads per worker: lower latency ...
    assert 8 * one.throughput_per_s(8) > eight.throughput_per_s(8)  # ... but k workers serve more


def test_anchor_carries_the_models_own_speed_to_other_cpus() -> None:
    """Same CPU family, more cores: the projection equals the hidden truth (the anchor's k) exactly."""
    curves = project_curves(LOCAL, CAT, MODEL, _work())
    c = _by(curves, "cpu:c6i.2xlarge", "fp32", 4)  # Ice Lake, 4 cores
    for b in (1, 8):
        assert c.t_ms(b) == pytest.approx(TRUE_K * cpu_time_ms(_work(), b, ICL, 4, "fp32", MODEL.cpu), rel=1e-6)
    assert "x1.70" in c.source


def test_contended_local_points_do_not_anchor() -> None:
    slow = [_m(b, 10 * _truth_local(b, 2), extra={"contended": True}) for b in (1, 8)]
    mixed = _local([*slow, *(m for m in LOCAL.measurements if m.threads == 1)])
    c = _by(project_curves(mixed, CAT, MODEL, _work()), "cpu:c6i.2xlarge", "fp32", 4)
    assert "x1.70" in c.source  # the 10x-slow contended points were left out
    assert "busy" not in c.source


def test_only_contended_local_points_still_anchor_and_say_so() -> None:
    """Every local point timed while the machine was busy: projected from them (slow, by their own k), and the
    curve's source says so, rather than no CPU curve at all (plan would stop with 'no service curve')."""
    busy = _local([_m(b, 2 * _truth_local(b, 2), extra={"contended": True}) for b in (1, 8)])
    c = _by(project_curves(busy, CAT, MODEL, _work()), "cpu:c6i.2xlarge", "fp32", 4)
    assert "x3.40" in c.source and "timed while this machine was busy" in c.source  # 2 x the true k of 1.70
    amx = _by(project_curves(busy, CAT, MODEL, _work()), "cpu:c7i.2xlarge", "bf16", 4)
    # contended and extrapolated: both said (the second had overwritten the first), and carried to the plan's rows
    assert [c.split(" ")[0] for c in amx.caveats] == ["anchored", "bf16"], amx.caveats
    assert all(c in amx.source for c in amx.caveats)


def test_isa_path_missing_here_is_extrapolated_with_a_wider_band() -> None:
    curves = project_curves(LOCAL, CAT, MODEL, _work())
    amx = _by(curves, "cpu:c7i.2xlarge", "bf16", 4)  # Sapphire Rapids AMX; this box has no bf16 path
    assert "extrapolated" in amx.source and "AMX" in amx.source and amx.extrapolated
    assert amx.band_hi > MODEL.band("cpu").hi and amx.band_lo < MODEL.band("cpu").lo
    assert amx.t_ms(8) < _by(curves, "cpu:c7i.2xlarge", "fp32", 4).t_ms(8)
    measured_int8 = _local([*LOCAL.measurements, _m(8, 0.4 * _truth_local(8, 2), prec="int8")])
    vnni = _by(project_curves(measured_int8, CAT, MODEL, _work()), "cpu:c6i.2xlarge", "int8", 4)
    assert "extrapolated" not in vnni.source and not vnni.extrapolated  # same VNNI path: anchored on the int8 one


def test_a_fit_with_regime_bands_gives_each_cpu_curve_the_error_of_its_own_kind() -> None:
    """The extra 1.5x on each side was a fixed constant; a fit whose reference rows include extrapolated ones (AMX
    bf16 anchored on fp32) carries their measured band, never narrower than an anchored curve's, and an anchored
    curve carries the anchored rows' band."""

    def curves(extrapolated: Band) -> tuple[ServiceCurve, ServiceCurve]:
        bands = {**BANDS, "cpu:anchored": Band(0.8, 1.2, 0.9, 40, 0.1, "t"), "cpu:extrapolated": extrapolated}
        cs = project_curves(LOCAL, CAT, ProjectionModel(GpuParams(), CpuParams(), bands, "test fit"), _work())
        return _by(cs, "cpu:c7i.2xlarge", "bf16", 4), _by(cs, "cpu:c7i.2xlarge", "fp32", 4)

    amx, fp32 = curves(Band(0.7, 2.0, 0.9, 20, 0.3, "t"))
    assert (amx.band_lo, amx.band_hi) == (0.7, 2.0) and (fp32.band_lo, fp32.band_hi) == (0.8, 1.2)
    amx, _ = curves(Band(0.9, 1.1, 0.9, 20, 0.05, "t"))  # a narrow extrapolated band: the anchored one bounds it
    assert (amx.band_lo, amx.band_hi) == (0.8, 1.2)


def test_training_gets_one_process_per_instance_and_no_int8() -> None:
    ms = tuple(Measurement.from_dict(m.to_dict() | {"mode": "training"}) for m in LOCAL.measurements)
    prof = Profile("bert-base", "training", {"seq_len": 128}, ICX_ENV, ms)
    curves = project_curves(prof, CAT, MODEL, _work("training"))
    cpu = [c for c in curves if c.device.startswith("cpu:")]
    assert cpu and all(c.workers == 1 for c in cpu) and not any(c.precision == "int8" for c in cpu)


def test_gpu_batch_one_has_a_dispatch_floor() -> None:
    a100 = _by(project_curves(LOCAL, CAT, MODEL, _work()), "A100-80GB", "fp16")
    assert a100.t_ms(1) >= _work().n_ops() * MODEL.gpu.host_us / 1e3 * 0.99


def test_gpu_curves_say_how_much_of_each_batch_the_device_computes() -> None:
    a100 = _by(project_curves(LOCAL, CAT, MODEL, _work()), "A100-80GB", "fp16")
    assert a100.device_share is not None and len(a100.device_share) == len(a100.batch_sizes)
    assert all(0.0 < s <= 1.0 for s in a100.device_share)
    assert a100.device_share_at(1) < a100.device_share_at(a100.max_batch)  # batch 1 waits on the host
    assert a100.device_share_at(a100.max_batch) == 1.0
    cpu = _by(project_curves(LOCAL, CAT, MODEL, _work()), "cpu:c6i.2xlarge", "fp32")
    assert cpu.device_share is None and cpu.device_share_at(4) == 1.0


def test_measured_profile_wins_and_anchors_the_other_gpus() -> None:
    acc = CAT.accelerators["A10G"]
    true_k = 1.3
    env = {"id": "g5", "cpu_model": "AMD EPYC 7R32", "physical_cores": 2, "isa": ["avx2", "fma"],
           "gpus": [{"name": "NVIDIA A10G", "memory_bytes": 24 << 30}]}  # fmt: skip
    ms = [_m(b, true_k * gpu_time_ms(_work(), b, acc, "fp16", MODEL.gpu), device="cuda", prec="fp16") for b in (1, 32)]
    gpu_prof = _local(ms, env)
    curves = project_curves(LOCAL, CAT, MODEL, _work(), measured=[gpu_prof])
    a10g = _by(curves, "A10G", "fp16")
    assert (a10g.provenance, a10g.band_lo, a10g.band_hi, a10g.batch_sizes) == ("measured", 1.0, 1.0, (1, 32))
    h100 = _by(curves, "H100", "fp16")
    want = true_k * gpu_time_ms(_work(), 64, CAT.accelerators["H100"], "fp16", MODEL.gpu)
    assert h100.provenance == "projected" and h100.t_ms(64) == pytest.approx(want, rel=1e-6)
    assert "anchored" in h100.source


def test_measured_cpu_instance_wins() -> None:
    cloud = {**ICX_ENV, "id": "c6i-box", "physical_cores": 4, "instance_type": "c6i.2xlarge"}
    cpu_prof = _local([_m(8, 260.0, threads=4)], cloud)
    c = _by(project_curves(LOCAL, CAT, MODEL, _work(), measured=[cpu_prof]), "cpu:c6i.2xlarge", "fp32")
    assert c.provenance == "measured" and c.latency_ms == (260.0,) and c.threads == 4


def test_fallback_work_from_measured_flops() -> None:
    w = fallback_work(LOCAL)
    assert w is not None and w.flops(2) == pytest.approx(2 * 2.2e10)
    curves = project_curves(LOCAL, CAT, MODEL)  # no trace: still every device, from the coarse profile
    assert any(c.device == "H100" for c in curves)


def test_static_int8_of_a_conv_net_projects_int8_convolutions_and_says_so() -> None:
    conv = WorkProfile("bert-base", "inference", {"seq_len": 128}, False,
                       (("conv", 50, 2e8, 4e8, 2e6, 4e6), ("host", 50, 0, 0, 0, 0)), 25_000_000, 160)  # fmt: skip
    fp32 = [_m(b, TRUE_K * cpu_time_ms(conv, b, ICL, 2, "fp32", MODEL.cpu)) for b in (1, 8)]

    def local(scheme: str) -> Profile:
        int8 = [_m(b, TRUE_K * cpu_time_ms(conv, b, ICL, 2, "int8", MODEL.cpu, scheme == "static"), prec="int8",
                   extra={"int8_scheme": scheme}) for b in (1, 8)]  # fmt: skip
        return _local(fp32 + int8)

    static, dynamic = (project_curves(local(s), CAT, MODEL, conv) for s in ("static", "dynamic"))
    s, d = _by(static, "cpu:c6i.2xlarge", "int8", 4), _by(dynamic, "cpu:c6i.2xlarge", "int8", 4)  # Ice Lake
    assert s.t_ms(8) < 0.6 * d.t_ms(8)  # the convolutions run int8 (VNNI) only under static quantization
    assert "int8 = static quantization (convolutions too)" in s.source and "dynamic" in d.source
    assert "extrapolated" not in s.source  # a VNNI machine's static int8 anchors a VNNI target directly
    spr = _by(static, "cpu:c7i.2xlarge", "int8", 4)  # Sapphire Rapids: oneDNN runs int8 convolutions on AMX
    assert "extrapolated from fp32" in spr.source and "AMX int8 convolutions" in spr.source


def test_a_point_timed_on_all_cores_anchors_as_the_cores_it_ran_on() -> None:
    """A default sweep stores ``threads=None`` (all cores). The anchor modelled such a point as one thread, so k came
    out about half and every CPU target projected ~2x too fast; threads=None on a 2-core box is 2 threads."""
    explicit = _local([_m(b, _truth_local(b, 2), threads=2) for b in (1, 8)])
    default = _local([_m(b, _truth_local(b, 2), threads=None) for b in (1, 8)])
    recorded = _local(
        [_m(b, _truth_local(b, 2), threads=None, extra={"threads": 2}) for b in (1, 8)],
        env={**ICX_ENV, "physical_cores": 6},
    )  # the sweep's record wins over the core count
    want = _by(project_curves(explicit, CAT, MODEL, _work()), "cpu:c6i.4xlarge", "fp32", 8)
    for profile in (default, recorded):
        got = _by(project_curves(profile, CAT, MODEL, _work()), "cpu:c6i.4xlarge", "fp32", 8)
        assert got.latency_ms == pytest.approx(want.latency_ms, rel=1e-9)
    truth = [TRUE_K * cpu_time_ms(_work(), b, ICL, 8, "fp32", MODEL.cpu) for b in want.batch_sizes]
    assert want.latency_ms == pytest.approx(truth, rel=1e-6)  # the hidden truth, recovered


def test_workers_filling_a_socket_share_its_memory_bandwidth() -> None:
    """32 one-thread workers on a 32-core Ice Lake socket ask 32 x 12 GB/s of its 205: each runs slower than the
    lone worker measured here; 8 on an 8-core slice do not reach the socket's limit and run as measured."""
    curves = project_curves(LOCAL, CAT, MODEL, _work())
    full = next(c for c in curves if c.instance == "c6i.16xlarge" and c.precision == "fp32" and c.threads == 1)
    slice_ = next(c for c in curves if c.instance == "c6i.4xlarge" and c.precision == "fp32" and c.threads == 1)
    assert full.workers == 32 and slice_.workers == 8
    assert full.latency_ms[0] > 1.03 * _truth_local(1, 1)
    assert slice_.latency_ms[0] == pytest.approx(_truth_local(1, 1))


def test_a_measured_curve_built_on_busy_timings_says_which_batches() -> None:
    """A batch timed only while the machine was busy stays in the measured curve (nothing quieter exists), and the
    curve says so, so a row it makes infeasible carries the reason in its notes; a quiet timing of the same batch
    wins over it and leaves no caveat."""
    busy = {"contended": True, "contention": 0.75}
    local = _local([_m(1, 12.0), _m(8, 311.0, extra=busy)])
    (c,) = [
        c for c in project_curves(local, CAT, MODEL, _work()) if c.instance == "c6i.xlarge" and c.precision == "fp32"
    ]
    assert c.provenance == "measured" and c.latency_ms == (12.0, 311.0)
    assert len(c.caveats) == 1 and c.caveats[0].startswith("batch 8 timed only while this machine was busy")
    quiet = _local([_m(1, 12.0), _m(8, 311.0, extra=busy), _m(8, 60.0)])
    (q,) = [
        c for c in project_curves(quiet, CAT, MODEL, _work()) if c.instance == "c6i.xlarge" and c.precision == "fp32"
    ]
    assert q.latency_ms == (12.0, 60.0) and q.caveats == ()


def test_a_zen4_vm_hiding_avx512_measures_c7a_here_on_its_own_avx2_kernels() -> None:
    """A Genoa VM showing avx2 and fma only (matched by its cpu family/model numbers): the c7a instance of its cores
    is measured here; k workers on a bigger c7a run as measured, slowed only by the shared bandwidth (the target's
    VNNI rate had sped the measured int8 times up ~1.7x with no band: 51 -> 31 ms on the dev VM); a thread count not
    measured here extrapolates int8 from fp32, since this machine's AVX2 int8 says nothing of VNNI."""
    vm = {"id": "zen4-vm", "cpu_model": "AMD EPYC", "cpu_signature": "25/17", "physical_cores": 2,
          "isa": ["avx2", "fma"], "gpus": []}  # fmt: skip
    genoa = CAT.cpus["amd-genoa"]
    fp32 = [_m(b, TRUE_K * cpu_time_ms(_work(), b, genoa, 2, "fp32", MODEL.cpu)) for b in (1, 8)]
    int8 = [_m(b, 0.6 * f.latency_ms.p50, prec="int8") for b, f in zip((1, 8), fp32, strict=True)]  # type: ignore[union-attr]
    curves = project_curves(_local(fp32 + int8, vm), CAT, MODEL, _work())
    assert _by(curves, "cpu:c7a.large", "int8").provenance == "measured"
    two_by_two = _by(curves, "cpu:c7a.xlarge", "int8", 2)
    assert two_by_two.workers == 2 and "as measured here" in two_by_two.source
    measured = {m.batch_size: m.latency_ms.p50 for m in int8}  # type: ignore[union-attr]
    for b, t in zip(two_by_two.batch_sizes, two_by_two.latency_ms, strict=True):
        if b in measured:
            assert t >= measured[b] * (1 - 1e-9)
    four = _by(curves, "cpu:c7a.xlarge", "int8", 4)
    assert four.extrapolated and "VNNI" in four.source
