"""The GPU and CPU time models on hand-built op lists: floors, scaling, ISA paths."""

from __future__ import annotations

import pytest

from rightsize.catalog import load_catalog
from rightsize.estimate.timemodel import (
    CpuParams,
    GpuParams,
    cpu_kernel_path,
    cpu_kernel_peak,
    cpu_time_ms,
    gpu_time_ms,
    gpu_time_parts_ms,
    same_kernel_path,
)
from rightsize.profile import WorkProfile

CAT = load_catalog("")
GP, CP = GpuParams(), CpuParams()


def _encoder(layers: int = 12, flops_per_gemm: float = 2 * 128 * 768 * 768) -> WorkProfile:
    """A BERT-base-like op list at seq 128: per layer 6 GEMMs, 1 attention, 8 element-wise ops, 6 views."""
    weights = 768 * 768 * 4.0
    acts = 128 * 768 * 4.0
    ops = (
        ("gemm", 6 * layers, flops_per_gemm, 2 * flops_per_gemm, weights + 2 * acts, weights + 4 * acts),
        ("attention", layers, 4 * 12 * 128 * 128 * 64, 8 * 12 * 128 * 128 * 64, 4 * acts, 8 * acts),
        ("memory", 8 * layers, 0.0, 0.0, 2 * acts, 4 * acts),
        ("host", 6 * layers, 0.0, 0.0, 0.0, 0.0),
    )
    return WorkProfile("enc", "inference", {"seq_len": 128}, False, ops, 85_000_000, 200)


def test_gpu_batch_one_is_bound_by_dispatch_not_flops() -> None:
    work = _encoder()
    h100 = CAT.accelerators["H100"]
    t1 = gpu_time_ms(work, 1, h100, "fp16", GP)
    host_floor = work.n_ops() * GP.host_us / 1e3
    assert t1 >= host_floor * 0.99  # an H100 cannot run eager batch 1 faster than Python dispatches it
    assert gpu_time_ms(work, 2, h100, "fp16", GP) == pytest.approx(t1, rel=0.05)  # flat while host-bound
    big = gpu_time_ms(work, 256, h100, "fp16", GP)
    assert big > 3 * t1  # compute-bound at large batches


def test_bigger_gpu_is_faster_when_compute_bound() -> None:
    work = _encoder()
    t = {d: gpu_time_ms(work, 256, CAT.accelerators[d], "fp16", GP) for d in ("T4", "L4", "A100-40GB", "H100")}
    assert t["T4"] > t["L4"] > t["A100-40GB"] > t["H100"]


def test_precision_without_native_support_is_not_projected() -> None:
    assert gpu_time_ms(_encoder(), 8, CAT.accelerators["T4"], "bf16", GP) == float("inf")


def test_cpu_threads_help_sublinearly() -> None:
    work = _encoder()
    icl = CAT.cpus["intel-icelake"]
    t = {n: cpu_time_ms(work, 1, icl, n, "fp32", CP) for n in (1, 2, 4, 8, 16)}
    assert t[1] > t[2] > t[4] > t[8]
    assert 2.0 < t[1] / t[8] < 8.0  # per-op dispatch and fork/join do not shrink with threads
    assert t[16] / t[8] > 0.6  # diminishing returns at batch 1


def test_cpu_isa_paths() -> None:
    work = _encoder()
    spr, icl = CAT.cpus["intel-sapphire-rapids"], CAT.cpus["intel-icelake"]
    assert cpu_time_ms(work, 8, spr, 4, "bf16", CP) < cpu_time_ms(work, 8, icl, 4, "bf16", CP)  # AMX
    assert cpu_time_ms(work, 8, icl, 4, "int8", CP) < cpu_time_ms(work, 8, icl, 4, "fp32", CP)  # VNNI
    assert cpu_time_ms(work, 8, icl, 4, "bf16", CP) > cpu_time_ms(work, 8, icl, 4, "fp32", CP)  # no native bf16


def test_eager_int8_runs_vnni_not_amx_and_only_on_linear_layers() -> None:
    spr, icl, turin = CAT.cpus["intel-sapphire-rapids"], CAT.cpus["intel-icelake"], CAT.cpus["amd-turin"]
    # FBGEMM (dynamic int8) has no AMX kernels: Sapphire Rapids int8 = 4x its fp32 FMA rate, not the AMX tile rate
    assert cpu_kernel_peak(spr, "int8") == pytest.approx(4 * cpu_kernel_peak(spr, "fp32"))
    assert cpu_kernel_peak(spr, "int8") < spr.peak_flops_per_s("int8", 1) / 4
    assert cpu_kernel_peak(spr, "bf16") == spr.peak_flops_per_s("bf16", 1)  # oneDNN bf16 does use AMX
    assert cpu_kernel_path(spr, "int8") == cpu_kernel_path(turin, "int8") == "VNNI"
    assert same_kernel_path(turin, icl, "int8") and not same_kernel_path(turin, spr, "bf16")
    # a convolution net: dynamic quantization leaves convolutions fp32, so int8 is no faster than fp32
    conv = WorkProfile(
        "cnn", "inference", {"image_size": 224}, False, (("conv", 50, 2e8, 4e8, 2e6, 4e6),), 25_000_000, 160
    )
    assert cpu_time_ms(conv, 1, icl, 4, "int8", CP) == pytest.approx(cpu_time_ms(conv, 1, icl, 4, "fp32", CP))
    assert cpu_time_ms(_encoder(), 1, icl, 4, "int8", CP) < cpu_time_ms(_encoder(), 1, icl, 4, "fp32", CP)


def test_static_int8_runs_convolutions_int8_and_on_amx_where_onednn_has_it() -> None:
    spr, icl, turin = CAT.cpus["intel-sapphire-rapids"], CAT.cpus["intel-icelake"], CAT.cpus["amd-turin"]
    conv = WorkProfile(
        "cnn", "inference", {"image_size": 224}, False, (("conv", 50, 2e8, 4e8, 2e6, 4e6),), 25_000_000, 160
    )
    fp32, static = (cpu_time_ms(conv, 8, icl, 4, p, CP, int8_convs=True) for p in ("fp32", "int8"))
    assert static < 0.6 * fp32  # VNNI: 4 int8 multiply-adds per fp32 lane (dynamic: no faster, above)
    # oneDNN's int8 convolution uses AMX tiles (x86 engine, should_use_onednn_quant); FBGEMM's Linear does not
    assert cpu_kernel_peak(spr, "int8", conv=True) == spr.peak_flops_per_s("int8", 1)
    assert cpu_kernel_peak(spr, "int8", conv=True) > 4 * cpu_kernel_peak(spr, "int8")
    assert cpu_kernel_path(spr, "int8", conv=True) == "AMX int8 convolutions"
    # a VNNI machine's static-int8 measurement anchors an Ice Lake, not a Sapphire Rapids (fp32 does, wider band)
    assert same_kernel_path(turin, icl, "int8", conv=True) and not same_kernel_path(turin, spr, "int8", conv=True)
    assert cpu_time_ms(conv, 8, spr, 4, "int8", CP, int8_convs=True) < cpu_time_ms(conv, 8, spr, 4, "int8", CP)


def test_training_costs_more_than_inference() -> None:
    inf = _encoder()
    train = WorkProfile("enc", "training", inf.input, False, inf.ops, inf.n_params, inf.param_tensors)
    a100 = CAT.accelerators["A100-80GB"]
    assert gpu_time_ms(train, 32, a100, "fp16", GP) > gpu_time_ms(inf, 32, a100, "fp16", GP)


def test_fp32_on_a_dual_issue_gpu_runs_at_half_its_datasheet_rate() -> None:
    from dataclasses import replace

    work = _encoder()
    a10 = CAT.accelerators["A10"]
    assert a10.fp32_dual_issue and not CAT.accelerators["A100-40GB"].fp32_dual_issue
    single = replace(a10, fp32_dual_issue=False)
    t_dual, t_single = gpu_time_ms(work, 64, a10, "fp32", GP), gpu_time_ms(work, 64, single, "fp32", GP)
    assert t_dual == pytest.approx(2 * t_single, rel=0.2)  # compute-bound: the FP32 math halves
    assert gpu_time_ms(work, 64, a10, "fp16", GP) == gpu_time_ms(work, 64, single, "fp16", GP)  # tensor cores


def test_small_element_wise_ops_stay_on_one_thread() -> None:
    icl = CAT.cpus["intel-icelake"]
    small = WorkProfile("m", "inference", {}, False, (("memory", 100, 0.0, 0.0, 64e3, 128e3),), 0, 0)
    big = WorkProfile("m", "inference", {}, False, (("memory", 100, 0.0, 0.0, 64e6, 128e6),), 0, 0)
    # below ATen's grain size more threads change nothing (no split, no fork/join) ...
    assert cpu_time_ms(small, 1, icl, 16, "fp32", CP) == pytest.approx(cpu_time_ms(small, 1, icl, 1, "fp32", CP))
    # ... above it the op splits and pulls more bandwidth
    assert cpu_time_ms(big, 1, icl, 16, "fp32", CP) < 0.5 * cpu_time_ms(big, 1, icl, 1, "fp32", CP)


def _convnet() -> WorkProfile:
    """Convolutions only (a ResNet-like batch: compute-bound at large batches)."""
    ops = (("conv", 50, 80e6, 160e6, 1e5, 2e5), ("memory", 50, 0.0, 0.0, 1e5, 2e5))
    return WorkProfile("cnn", "inference", {"image_size": 224}, False, ops, 25_000_000, 160)


def test_fp32_convolutions_run_on_tf32_tensor_cores_as_pytorch_defaults_do() -> None:
    # torch.backends.cudnn.allow_tf32 is True by default, cuda.matmul.allow_tf32 False: on an A100 an fp32 conv net
    # runs at the TF32 rate, an fp32 transformer's matmuls at the fp32 rate.
    a100 = CAT.accelerators["A100-40GB"]
    cnn, enc = _convnet(), _encoder()
    assert gpu_time_ms(cnn, 256, a100, "fp32", GP) == pytest.approx(gpu_time_ms(cnn, 256, a100, "tf32", GP))
    assert gpu_time_ms(enc, 256, a100, "fp32", GP) > 2 * gpu_time_ms(enc, 256, a100, "tf32", GP)


def test_device_and_host_parts_make_the_batch_time() -> None:
    work, h100 = _encoder(), CAT.accelerators["H100"]
    for batch in (1, 256):
        dev, host = gpu_time_parts_ms(work, batch, h100, "fp16", GP)
        assert max(dev, host) == gpu_time_ms(work, batch, h100, "fp16", GP)
    dev1, host1 = gpu_time_parts_ms(work, 1, h100, "fp16", GP)
    assert dev1 < host1  # batch 1: the GPU waits for the host (the energy model's busy share is dev / host)


def test_amx_bf16_pays_a_weight_repack_per_call_and_leaves_nchw_convolutions_at_the_fp32_rate() -> None:
    from dataclasses import replace

    from rightsize.estimate.timemodel import weight_bytes

    spr, icl = CAT.cpus["intel-sapphire-rapids"], CAT.cpus["intel-icelake"]
    enc = _encoder()
    assert weight_bytes(enc.ops[0]) == pytest.approx(768 * 768 * 4.0)  # the bytes that do not grow with the batch
    assert weight_bytes(enc.ops[2]) == 0.0  # element-wise: activations only
    # the repack is a cost of the weights, not of the batch: it adds the same time at batch 1 and at batch 16
    no_pack = replace(CP, amx_repack=0.0)
    extra = [cpu_time_ms(enc, b, spr, 1, "bf16", CP) - cpu_time_ms(enc, b, spr, 1, "bf16", no_pack) for b in (1, 16)]
    bw = min(CP.core_bw_gbps, spr.memory_bandwidth_gbps) * 1e9 * CP.eff_memory
    assert extra[0] == pytest.approx(extra[1]) == pytest.approx(CP.amx_repack * 72 * 768 * 768 * 4.0 / bw * 1e3)
    # a real AMX host ran DistilBERT bf16 at batch 1 on one core only 1.4x faster than fp32, not the tile peak's 16x
    assert cpu_time_ms(enc, 1, spr, 1, "fp32", CP) / cpu_time_ms(enc, 1, spr, 1, "bf16", CP) < 3
    # the AMX share replaces low_precision on AMX only: Ice Lake's bf16 (the fp32 path) is unchanged by it
    assert cpu_time_ms(enc, 1, icl, 1, "bf16", replace(CP, amx=0.9)) == cpu_time_ms(enc, 1, icl, 1, "bf16", CP)
    assert cpu_time_ms(enc, 8, spr, 1, "bf16", replace(CP, amx=0.9)) < cpu_time_ms(enc, 8, spr, 1, "bf16", CP)
    # an eager NCHW bf16 convolution gained nothing from AMX on that host: it runs at the fp32 rate
    conv = WorkProfile(
        "cnn", "inference", {"image_size": 224}, False, (("conv", 50, 2e8, 4e8, 2e6, 4e6),), 25_000_000, 160
    )
    assert cpu_time_ms(conv, 8, spr, 4, "bf16", CP) == pytest.approx(cpu_time_ms(conv, 8, spr, 4, "fp32", CP), rel=0.05)
