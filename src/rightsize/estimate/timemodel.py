"""Time of one batch from a model's traced ops (WorkProfile) and a device's datasheet: the projection.

GPU, eager PyTorch (ops launched asynchronously, so the slower of host and device sets the pace):

    t_dev  = Σ_ops max(F / (peak · eff[class, prec] · (peak / 100 TFLOP/s)^-α), B · e / (bw · eff_mem))
             + kernel_us                                                                  per kernel
    t_host = n_ops · host_us (+ backward ops · host_us_backward)                      Python + dispatcher
    t      = max(t_dev, t_host)

CPU, eager PyTorch on n intra-op threads (one process; ``threads`` physical cores):

    t_op   = max(F / (n · core_peak[prec] · eff_cpu[class] · I / (I + I_half)), B · e / bw(n))
             + (op_us + sync_us · (n − 1)^sync_exponent) · clock_ref / clock   dispatch + fork/join
    bw(n)  = min(n · core_bw_gbps, socket bandwidth)

``e`` is bytes per element relative to fp32 (the trace is fp32). On a CPU a GEMM with few rows (batch 1,
short sequences: intensity I = F / B FLOP per byte is about rows / 2) runs far below peak; I_half
(``intensity_half``) is the intensity at which it reaches half its efficiency. ``α`` (``peak_exponent``) says how
much harder a bigger peak is to fill: the same eager model reaches a smaller share of an H100's
tensor-core peak than of a V100's (kernel tails, less work per SM). Every parameter of GpuParams and
CpuParams is fitted to published results (``catalog/data/reference/published.csv``) by
``estimate/reference.py``; the CPU projection is then anchored to this machine's own measurement of the
model (see ``cpu_time_ms``'s callers in projection.py), so only the ratio local → target is modelled.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace

from rightsize.catalog.model import Accelerator, CpuFamily
from rightsize.profile import WorkProfile

__all__ = [
    "CpuParams",
    "GpuParams",
    "cpu_kernel_path",
    "cpu_kernel_peak",
    "cpu_time_ms",
    "gpu_time_ms",
    "gpu_time_parts_ms",
    "gpu_time_split_ms",
    "precision_bytes",
    "same_kernel_path",
    "shared_socket",
]

# Storage bytes per element relative to fp32 for compute ops and for element-wise/normalisation ops.
# Mixed precision keeps some element-wise work (softmax, layer norm, loss) in fp32: 0.6, not 0.5.
_COMPUTE_BYTES = {"fp32": 1.0, "tf32": 1.0, "fp16": 0.5, "bf16": 0.5, "int8": 0.25}
_MEMORY_BYTES = {"fp32": 1.0, "tf32": 1.0, "fp16": 0.6, "bf16": 0.6, "int8": 1.0}
CLOCK_REF_GHZ = 3.0  # host times are stated for a 3 GHz core
# at::internal::GRAIN_SIZE (ATen/Parallel.h): the fewest elements an element-wise op hands one thread.
ATEN_GRAIN_SIZE = 32768


def precision_bytes(precision: str, op_class: str) -> float:
    table = _MEMORY_BYTES if op_class == "memory" else _COMPUTE_BYTES
    return table.get(precision, 1.0)


def _prec_group(precision: str) -> str:
    return {"fp16": "half", "bf16": "half"}.get(precision, precision)


@dataclass(frozen=True)
class GpuParams:
    """Fitted GPU model parameters (efficiencies are shares of the datasheet peak)."""

    gemm_fp32: float = 0.6
    gemm_tf32: float = 0.45
    gemm_half: float = 0.45
    conv_fp32: float = 0.5
    conv_tf32: float = 0.4
    conv_half: float = 0.35
    attention: float = 0.3  # fused attention, share of the tensor-core peak of its precision
    eff_memory: float = 0.7
    kernel_us: float = 3.0  # device time floor of one kernel (launch latency, tail of a small grid)
    host_us: float = 12.0  # host time per dispatched op, eager PyTorch at CLOCK_REF_GHZ
    host_us_training: float = 20.0  # per op when training (autograd records and replays every op)
    # A convolution costs the host more than other ops: cuDNN picks an algorithm and a workspace per
    # call (eager ResNet-50 on an A10 is host-bound at ~6 ms up to batch 4 with ~1/3 of its ops conv).
    host_conv: float = 2.0  # host time of a conv op, in host_us units
    peak_exponent: float = 0.2  # α: efficiency falls as (peak / 100 TFLOP/s)^-α

    def eff(self, op_class: str, precision: str) -> float:
        if op_class == "attention":
            return self.attention
        g = _prec_group(precision)
        if g == "int8":
            g = "half"
        return float(getattr(self, f"{op_class}_{g}", self.gemm_fp32))

    def to_dict(self) -> dict[str, float]:
        return {f.name: float(getattr(self, f.name)) for f in fields(self)}

    def with_vector(self, names: tuple[str, ...], values: list[float]) -> GpuParams:
        return replace(self, **dict(zip(names, values, strict=True)))


@dataclass(frozen=True)
class CpuParams:
    """Fitted CPU model parameters."""

    gemm: float = 0.6  # share of the FMA/VNNI/AMX peak a GEMM reaches (oneDNN / MKL)
    conv: float = 0.5
    attention: float = 0.3
    low_precision: float = 0.5  # extra discount on bf16/int8 peaks (AMX / VNNI paths: packing, quantisation)
    core_bw_gbps: float = 12.0  # DRAM bandwidth one core can pull
    eff_memory: float = 0.6
    op_us: float = 6.0  # dispatcher + kernel entry per op at CLOCK_REF_GHZ, one thread
    sync_us: float = 4.0  # OpenMP fork/join per parallel op, scaled by (threads − 1)^sync_exponent
    intensity_half: float = 8.0  # FLOP/byte at which a CPU GEMM/conv reaches half its efficiency
    # fork/join cost grows as (threads − 1)^this: pip wheels of PyTorch use GNU libgomp, whose barrier is
    # centralised (every thread checks in with one counter), so about linear in the thread count
    sync_exponent: float = 1.0
    # Share of the AVX-512 doubling (64 vs AVX2's 32 FP32 FLOP/cycle) eager PyTorch realises: the wider
    # FMAs run at a lower licence clock and most ops are not long dense loops. 1.0 = the datasheet.
    wide_vector: float = 0.6
    # AMX (bf16 / fp16 on Sapphire Rapids and later): the share of the tile peak an eager op reaches, in place of
    # ``low_precision``; and the bytes each call moves to get its weights into tiles, in units of the weights' fp32
    # bytes: autocast casts every fp32 weight to bf16 on every call (read 4 B, write 2 B) and oneDNN repacks it into
    # the tile layout (read 2 B, write 2 B), 10 B per weight = 2.5x: a cost of the weights, not of the batch.
    # Priors: a quarter of the tile peak and those 2.5 passes; both are fitted to the reference set's AMX rows.
    amx: float = 0.25
    amx_repack: float = 2.5

    def eff(self, op_class: str, precision: str, amx: bool = False) -> float:
        """Share of the kernel path's peak an op of ``op_class`` reaches (``amx``: it runs on AMX tiles)."""
        base = float(getattr(self, op_class, self.gemm))
        if amx:
            return base * self.amx
        return base * (self.low_precision if precision in ("bf16", "fp16", "int8") else 1.0)

    def to_dict(self) -> dict[str, float]:
        return {f.name: float(getattr(self, f.name)) for f in fields(self)}

    def with_vector(self, names: tuple[str, ...], values: list[float]) -> CpuParams:
        return replace(self, **dict(zip(names, values, strict=True)))


def _optimizer_ops(work: WorkProfile) -> tuple[float, int]:
    """(bytes, kernels) of one AdamW step over fp32 master weights: read p, g, m, v and write p, m, v
    (28 B/param, the accounting in docs/catalog.md); foreach kernels over lists of ~100
    tensors, ~12 foreach ops per step."""
    return 28.0 * work.n_params, 12 * max(1, math.ceil(work.param_tensors / 100))


HOST_BOUND, DEVICE_BOUND = "host", "device"


def regime_of(device_ms: float, host_ms: float) -> str:
    """A projected GPU batch's regime: host-bound when dispatching its eager ops takes the host at least as long
    as the GPU's kernels take (the batch then takes the host's time), else device-bound."""
    return HOST_BOUND if host_ms >= device_ms else DEVICE_BOUND


def gpu_time_ms(
    work: WorkProfile, batch: float, acc: Accelerator, precision: str, params: GpuParams, host_ghz: float = 3.0
) -> float:
    """Median time of one batch (training: one optimizer step) on one GPU, milliseconds."""
    return max(gpu_time_parts_ms(work, batch, acc, precision, params, host_ghz))


def gpu_time_parts_ms(
    work: WorkProfile, batch: float, acc: Accelerator, precision: str, params: GpuParams, host_ghz: float = 3.0
) -> tuple[float, float]:
    """(device, host) milliseconds of one batch on one GPU: the batch takes the larger, and the GPU is busy for
    the device part only (the share the energy model's utilization stands for)."""
    device, host, _ = gpu_time_split_ms(work, batch, acc, precision, params, host_ghz)
    return device, host


def gpu_time_split_ms(
    work: WorkProfile, batch: float, acc: Accelerator, precision: str, params: GpuParams, host_ghz: float = 3.0
) -> tuple[float, float, float]:
    """(device, host, math part of device) milliseconds of one batch on one GPU (module docstring). The math part is
    the time each kernel's FLOPs take at the attainable rate: all of a compute-bound kernel (its FLOP term the
    larger), the FLOP term's share of a memory-bound one. Math draws more power than streaming memory does
    (plan/energy.py)."""
    peak = acc.peak_flops_per_s(precision)
    if peak <= 0:
        return math.inf, math.inf, 0.0
    size = (peak / 100e12) ** -params.peak_exponent
    bw = acc.bandwidth_gbps * 1e9 * params.eff_memory
    kernel_s = params.kernel_us * 1e-6
    t_dev = t_compute = 0.0
    # FP32 math on a dual-issue part (GA10x, Ada) issues at half the datasheet rate: one of its two FP32
    # lanes per partition is shared with INT32 (NVIDIA GA102 whitepaper); tensor-core precisions are unaffected.
    math_peak = peak / 2 if precision == "fp32" and acc.fp32_dual_issue else peak
    # The efficiency fall with peak is a tensor-core effect (their rate outgrew the operand paths that feed them):
    # an FP32 matmul on the CUDA cores is not scaled by it. (FP32 convolutions keep it: cuDNN's Winograd and FFT
    # algorithms do fewer multiplies than the direct FLOP count on the smaller CUDA-core parts.)
    math_size = 1.0 if precision == "fp32" else size
    conv_prec, conv_peak, conv_size = precision, math_peak, size
    if precision == "fp32" and acc.peak_flops_per_s("tf32") > peak:
        # PyTorch's defaults: torch.backends.cudnn.allow_tf32 = True, cuda.matmul.allow_tf32 = False. An fp32 model
        # runs its convolutions on TF32 tensor cores (Ampere and later), its matmuls in fp32 (seen on an H100 and
        # an H200: ResNet-50 batch 256 ran 2.0-2.2x faster than the fp32 rate allows; benchmarks/gpu_vs_device.py).
        conv_prec, conv_peak = "tf32", acc.peak_flops_per_s("tf32")
        conv_size = (conv_peak / 100e12) ** -params.peak_exponent
    for cls, n, f, b in work.at(batch):
        if cls == "host":
            continue
        t_mem = b * precision_bytes(precision, cls) / bw
        t_cmp = 0.0
        if f > 0 and cls == "conv":
            t_cmp = f / (conv_peak * min(1.0, params.eff(cls, conv_prec) * conv_size))
        elif f > 0 and cls != "memory":
            t_cmp = f / (math_peak * min(1.0, params.eff(cls, precision) * math_size))
        t_dev += n * (max(t_cmp, t_mem) + kernel_s)
        t_compute += n * t_cmp
    host_us = params.host_us_training if work.mode == "training" else params.host_us
    n_ops = work.n_ops() + (params.host_conv - 1.0) * work.n_ops("conv")
    if work.mode == "training":
        opt_bytes, opt_kernels = _optimizer_ops(work)
        t_dev += opt_bytes / bw + opt_kernels * kernel_s
        n_ops += opt_kernels
        if precision in ("fp16", "bf16"):  # autocast casts each weight once per forward
            casts = work.n_ops("gemm") // 3 + work.n_ops("conv") // 3
            t_dev += work.n_params * 6.0 / bw + casts * kernel_s
            n_ops += casts
    t_host = n_ops * host_us * 1e-6 * CLOCK_REF_GHZ / host_ghz
    return t_dev * 1e3, t_host * 1e3, t_compute * 1e3


# The op classes CPU int8 runs in int8: Linear layers always (dynamic or static quantization); convolutions
# when the model was quantized statically (``int8_convs``: measure.precision quantizes a model with
# convolutions statically when FX can trace it); attention and element-wise ops stay fp32.
INT8_CLASSES = frozenset({"gemm"})
STATIC_INT8_CLASSES = frozenset({"gemm", "conv"})

# VNNI's vpdpbusd does 4 int8 multiply-adds per 32-bit lane: 4x the fp32 FMA rate of the same width.
VNNI_OVER_FP32 = 4.0


def cpu_kernel_peak(family: CpuFamily, precision: str, conv: bool = False) -> float:
    """Per-core peak (FLOP/s; int8: op/s) of the kernel path eager PyTorch takes for ``precision``.

    The catalog lists each family's best ISA path. An int8 Linear runs FBGEMM, which has AVX2 and AVX-512
    VNNI kernels but no AMX ones: on an AMX part (Sapphire Rapids) it runs at the VNNI rate, not the AMX
    tile rate. A statically quantized int8 convolution (``conv``) on a VNNI core runs oneDNN (PyTorch's
    x86 engine, ``should_use_onednn_quant``), which does use AMX; so does bf16.
    """
    peak = family.peak_flops_per_s(precision, 1)
    if precision == "int8" and not conv and "amx_int8" in family.isa and "avx512_vnni" in family.isa:
        peak = min(peak, VNNI_OVER_FP32 * family.peak_flops_per_s("fp32", 1))
    return peak


def cpu_kernel_path(family: CpuFamily, precision: str, conv: bool = False) -> str:
    """The ISA path eager PyTorch runs ``precision`` on (see ``cpu_kernel_peak``); ``conv``: the path of a
    model whose convolutions are quantized too."""
    isa = set(family.isa)
    if precision in ("bf16", "fp16"):
        return "AMX" if "amx_bf16" in isa else "AVX-512 BF16" if "avx512_bf16" in isa else "fp32 path"
    if precision == "int8":
        if conv and "amx_int8" in isa and "avx512_vnni" in isa:
            return "AMX int8 convolutions"
        return "VNNI" if "avx512_vnni" in isa else "AVX2 int8"
    return "fp32"


def same_kernel_path(local: CpuFamily, target: CpuFamily, precision: str, conv: bool = False) -> bool:
    """True when eager PyTorch runs ``precision`` on the same ISA path on both CPUs (VNNI int8 on both,
    AMX bf16 on both): then a local measurement of ``precision`` anchors the target, else fp32 does."""
    return cpu_kernel_path(local, precision, conv) == cpu_kernel_path(target, precision, conv)


def wide_vector_share(family: CpuFamily, precision: str, params: CpuParams, conv: bool = False) -> float:
    """The realised share of a 512-bit-FMA core's peak (1.0 for AVX2 cores, for AMD cores, whose fp32
    peak is counted at the AVX2 rate MKL runs there, and for AMX paths, whose peaks count no doubled
    FMA width)."""
    if family.flop_per_cycle_per_core.get("fp32", 0.0) < 64:
        return 1.0
    if cpu_kernel_path(family, precision, conv).startswith("AMX"):
        return 1.0
    return (1.0 + params.wide_vector) / 2.0


def shared_socket(family: CpuFamily, workers_per_socket: int) -> CpuFamily:
    """``family`` as each of ``workers_per_socket`` processes side by side on one socket sees it: its share of the
    socket's memory bandwidth (the reference rows' multi-instance runs and the planner's k-worker layouts alike)."""
    if workers_per_socket <= 1:
        return family
    return replace(family, memory_bandwidth_gbps=family.memory_bandwidth_gbps / workers_per_socket)


def weight_bytes(op: tuple[str, int, float, float, float, float]) -> float:
    """An op's bytes that do not grow with the batch (its weights), from its traced bytes at batch 1 and 2."""
    b1, b2 = op[4], op[5]
    return max(0.0, 2.0 * b1 - b2)


def cpu_time_ms(
    work: WorkProfile,
    batch: float,
    family: CpuFamily,
    threads: int,
    precision: str,
    params: CpuParams,
    int8_convs: bool = False,
) -> float:
    """Median time of one batch on ``threads`` physical cores of ``family``, milliseconds (model only;
    projection.py anchors it to this machine's measurement). ``int8_convs``: int8 quantized the
    convolutions too (static quantization), not only the Linear layers."""
    n = max(1, threads)

    # the realised per-core peak of each (precision, conv) kernel path an op can take, computed once per call
    core_peak = {(p, c): cpu_kernel_peak(family, p, c) * wide_vector_share(family, p, params, c)
                 for p in {precision, "fp32"} for c in (False, True)}  # fmt: skip
    if core_peak[(precision, False)] <= 0:
        return math.inf
    int8_classes = STATIC_INT8_CLASSES if int8_convs else INT8_CLASSES
    amx = precision in ("bf16", "fp16") and cpu_kernel_path(family, precision) == "AMX"
    bw = min(n * params.core_bw_gbps, family.memory_bandwidth_gbps) * 1e9 * params.eff_memory
    clock = CLOCK_REF_GHZ / max(family.sustained_ghz, 0.5)
    per_op_s = params.op_us * 1e-6 * clock
    sync_s = params.sync_us * 1e-6 * (n - 1) ** params.sync_exponent * clock
    t = 0.0
    for (cls, k, f, b), op in zip(work.at(batch), work.ops, strict=True):
        if cls == "host":
            t += k * per_op_s * 0.3  # a view or an allocation: dispatcher work only
            continue
        if cls == "memory":
            # ATen splits an element-wise op over threads only in chunks of GRAIN_SIZE elements; below
            # that it runs on one thread (and pays no fork/join): short sequences do not scale.
            used = min(n, max(1, math.ceil(b / (8.0 * ATEN_GRAIN_SIZE))))
            bw_used = min(used * params.core_bw_gbps, family.memory_bandwidth_gbps) * 1e9 * params.eff_memory
            sync_used = params.sync_us * 1e-6 * (used - 1) ** params.sync_exponent * clock
            t += k * (b * precision_bytes(precision, cls) / bw_used + per_op_s + sync_used)
            continue
        op_prec = "fp32" if precision == "int8" and cls not in int8_classes else precision
        # An eager bf16 convolution (NCHW) gained nothing from AMX at batch 1 on a real AMX host (ResNet-50, 1-16
        # cores: 0.97-1.4x fp32's time; benchmarks/gpu/results/h200-host-2026-11-27): it runs at the fp32 rate.
        tiles = amx and cls != "conv"
        if amx and not tiles:
            op_prec = "fp32"
        t_mem = b * precision_bytes(op_prec, cls) / bw
        t_cmp = 0.0
        if f > 0:
            intensity = f / max(b, 1.0)
            eff = params.eff(cls, op_prec, tiles) * intensity / (intensity + params.intensity_half)
            t_cmp = f / (n * core_peak[(op_prec, cls == "conv")] * eff)
        # on AMX every call casts and repacks the op's weights (its bytes that do not grow with the batch)
        t_pack = params.amx_repack * weight_bytes(op) / bw if tiles else 0.0
        t += k * (max(t_cmp, t_mem) + t_pack + per_op_s + sync_s)
    if work.mode == "training":
        opt_bytes, opt_kernels = _optimizer_ops(work)
        t += opt_bytes / bw + opt_kernels * (per_op_s + sync_s)
    return t * 1e3
