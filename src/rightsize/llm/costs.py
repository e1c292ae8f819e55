"""Iteration cost of one decoder-LLM replica: prefill and decode step times, fitted or projected.

    costs = fit_step_costs(records)                              # measured iterations of a real engine
    costs = project_step_costs(shape, accelerators_row, "fp16")  # roofline for a device we do not have
    costs.prefill_ms(512), costs.decode_ms(seqs=32, context_tokens=32 * 600)

Model (ms):
    prefill_ms(T)    = max(p0 + p1·T + p2·T²,  floor polynomial)     one sequence of T prompt tokens
    decode_ms(B, C)  = max(d0 + d1·B + d2·C,   floor line)           one step of B sequences, C = Σ contexts

A fit leaves the floors at zero (plain polynomials). The roofline projection sets them so that the knee
between the compute and the memory bound is a max, not a sum: prefill is compute-bound above its floor
(the weights read once), decode is memory-bound above its floor (the GEMMs' FLOPs at large B).

Engines. The roofline is that of an engine that replays a captured CUDA graph per step (vLLM since PR #1926,
merged 2023-12-17; TGI by default since PR #1703, 2024-04-04; TensorRT-LLM; gpt-fast): a step costs what the
GPU does. An eager engine (``engine="eager"``: rightsize's own generation server on a GPU, HF ``generate``, vLLM
and TGI before those PRs) dispatches every operator from Python each step, and the GPU waits on the host when
the host is slower: every iteration takes at least ``host_floor_ms`` = ops per step x the host time of one
eagerly dispatched op (``host_us`` of the fitted GPU time model, calibration/projection_fit.json: fitted to
published eager CNN and encoder results, none of them LLM rows).
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, get_args

import numpy as np
from scipy.optimize import nnls

from rightsize.catalog.model import Accelerator, CpuFamily
from rightsize.errors import SpecError
from rightsize.estimate.timemodel import cpu_kernel_path, cpu_kernel_peak
from rightsize.llm.shape import WEIGHT_BYTES, DecoderShape
from rightsize.plan.comm import PCIE_GBYTES_PER_S
from rightsize.spec.targets import ServingEngine

__all__ = [
    "EAGER_OPS",
    "EFFICIENCIES",
    "ENGINES",
    "DeviceNumbers",
    "Efficiencies",
    "StepCosts",
    "device_numbers",
    "eager_host_floor_ms",
    "fit_step_costs",
    "project_step_costs",
]

Poly3 = tuple[float, float, float]


@dataclass(frozen=True)
class StepCosts:
    """Step times of one replica in ms (module docstring). ``*_residual``: median |relative error| of a fit
    on its own records (None for a projection); ``source`` says where the numbers come from."""

    p0: float
    p1: float  # ms per prompt token
    p2: float  # ms per prompt token² (causal attention)
    d0: float
    d1: float  # ms per running sequence
    d2: float  # ms per context token (KV read)
    prefill_floor: Poly3 = (0.0, 0.0, 0.0)  # (a0, a1, a2): prefill_ms >= a0 + a1·T + a2·T²
    decode_floor: Poly3 = (0.0, 0.0, 0.0)  # (b0, b1, b2): decode_ms >= b0 + b1·B + b2·C
    host_floor_ms: float = 0.0  # eager engines: no iteration is faster than the host dispatching it
    ar_ms: float = 0.0  # of p1, d1 and the decode floor's b1: all-reduce ms per token or sequence (link, not math)
    prefill_residual: float | None = None
    decode_residual: float | None = None
    source: str = ""
    # A fit only: ms added to a decode step of B = 1, 2, ... sequences (index B - 1), the measured steps' median
    # departure from the line at that B (``fit_step_costs``). A CPU engine's GEMMs over 1 row and over 2-3 rows take
    # different BLAS paths: on a 2-vCPU VM a small GPT-2's step went 4.7 ms at B = 1, 8.2 at B = 2, 9.2 at B = 8.
    decode_by_seqs: tuple[float, ...] = ()

    def prefill_ms(self, tokens: float) -> float:
        """Prefill of one sequence of ``tokens`` prompt tokens, ms."""
        return float(self.prefill_split(tokens)[0])

    def decode_ms(self, seqs: float, context_tokens: float) -> float:
        """One decode step of ``seqs`` sequences whose context lengths sum to ``context_tokens``, ms."""
        return float(self.decode_split(seqs, context_tokens)[0])

    def prefill_split(self, tokens: float) -> tuple[float, float, float]:
        """(step, device, arithmetic) ms of a prefill of ``tokens``: the device works max(FLOP polynomial, memory
        floor) of the step (the rest it waits on an eager host), and its math units work the FLOP terms that grow
        with the prompt (not the fixed launches, not the all-reduces) of that: all of it when compute-bound, less
        under a memory floor. A fit (zero floors) counts its per-token terms as arithmetic."""
        t = float(tokens)
        a0, a1, a2 = self.prefill_floor
        flops, memory = self.p0 + t * (self.p1 + t * self.p2), a0 + t * (a1 + t * a2)
        device = max(flops, memory)
        return max(device, self.host_floor_ms), device, max(0.0, min(t * (self.p1 - self.ar_ms + t * self.p2), device))

    def decode_split(self, seqs: float, context_tokens: Any) -> tuple[Any, Any, Any]:
        """(step, device, arithmetic) ms of a decode step (as ``prefill_split``). The GEMMs' math is the FLOP floor's
        per-sequence term: a small share of a memory-bound step at a small batch, all of it once their FLOPs beat
        the weight read; the attention (the context term) streams KV and is counted as memory. A fit (zero floors)
        counts no decode arithmetic. ``context_tokens`` may be an array (steps of one batch): the three come back
        as arrays."""
        b0, b1, b2 = self.decode_floor
        gemm_flops, weights, math_ms = b0 + b1 * seqs, self.d0 + self.d1 * seqs, (b1 - self.ar_ms) * seqs
        if self.decode_by_seqs and 0 < (k := round(float(seqs))) <= len(self.decode_by_seqs):
            weights += self.decode_by_seqs[k - 1]
        # one step: plain floats (the simulator's hot path: isinstance first, np.ndim costs a call per step)
        if isinstance(context_tokens, (int, float)) or np.ndim(context_tokens) == 0:
            c = float(context_tokens)
            dev = max(weights + self.d2 * c, gemm_flops + b2 * c)
            return max(dev, self.host_floor_ms), dev, max(0.0, min(math_ms, dev))
        cs = np.asarray(context_tokens, dtype=np.float64)
        device = np.maximum(weights + self.d2 * cs, gemm_flops + b2 * cs)
        return np.maximum(device, self.host_floor_ms), device, np.clip(math_ms, 0.0, device)


# --- fitting measured iterations -----------------------------------------------------------------


def _field(record: Any, name: str) -> Any:
    return record[name] if isinstance(record, Mapping) else getattr(record, name)


def _nnls_relative(rows: np.ndarray, ms: np.ndarray) -> tuple[np.ndarray, float]:
    """Non-negative coefficients minimising the squared *relative* error; (coefficients, median |rel err|)."""
    scale = 1.0 / np.maximum(ms, 1e-9)
    coef, _ = nnls(rows * scale[:, None], np.ones_like(ms))
    rel = np.abs(rows @ coef - ms) * scale
    return coef, float(np.median(rel))


BY_SEQS_MIN = 5  # decode steps at one batch size needed for its own correction (StepCosts.decode_by_seqs)


def fit_step_costs(records: Iterable[Any]) -> StepCosts:
    """Fit StepCosts to measured iterations: mappings or objects with ``kind`` ("prefill" | "decode"),
    ``seqs``, ``tokens`` (prompt tokens prefilled, summed over the iteration's sequences), ``context_tokens``
    (decode: Σ context lengths) and ``ms`` (the iteration's time).

    Prefill uses only single-sequence iterations when there are any (exact); otherwise every prefill
    iteration, as seqs × p0 + p1 × tokens + p2 × tokens²/seqs, which assumes the sequences of one
    iteration were of equal length (warned). Non-negative least squares on the relative error.
    """
    pre: list[tuple[int, float, float]] = []
    dec: list[tuple[float, float, float]] = []
    for r in records:
        kind, seqs, ms = str(_field(r, "kind")), int(_field(r, "seqs")), float(_field(r, "ms"))
        if kind == "prefill":
            pre.append((seqs, float(_field(r, "tokens")), ms))
        elif kind == "decode":
            dec.append((seqs, float(_field(r, "context_tokens")), ms))
        else:
            raise SpecError("records[].kind", f"must be 'prefill' or 'decode', got {kind!r}")
    if not pre or not dec:
        missing = "prefill" if not pre else "decode"
        raise SpecError("records", f"no {missing} iterations to fit. To fix: measure a run that has both kinds.")
    single = [p for p in pre if p[0] == 1]
    if not single:
        warnings.warn(
            "no single-sequence prefill iterations: fitting prefill on batched iterations as if the prompts "
            "of one iteration were of equal length",
            stacklevel=2,
        )
    use = np.array(single or pre, dtype=np.float64)  # (n, 3): seqs, tokens, ms
    s, t = use[:, 0], use[:, 1]
    p, p_res = _nnls_relative(np.stack([s, t, t * t / s], axis=1), use[:, 2])
    d_arr = np.array(dec, dtype=np.float64)  # (m, 3): seqs, context tokens, ms
    d_rows = np.stack([np.ones(len(d_arr)), d_arr[:, 0], d_arr[:, 1]], axis=1)
    d, _ = _nnls_relative(d_rows, d_arr[:, 2])
    # per batch size, the measured steps' median departure from the line (StepCosts.decode_by_seqs); a size with
    # fewer than BY_SEQS_MIN steps keeps the line
    line = d_rows @ d
    sizes = d_arr[:, 0].astype(int)
    by_seqs = [float(np.median((d_arr[:, 2] - line)[sizes == b])) if (sizes == b).sum() >= BY_SEQS_MIN else 0.0
               for b in range(1, int(sizes.max()) + 1)]  # fmt: skip
    fitted = line + np.array([by_seqs[b - 1] for b in sizes])
    d_res = float(np.median(np.abs(fitted - d_arr[:, 2]) / np.maximum(d_arr[:, 2], 1e-9)))
    return StepCosts(
        p0=float(p[0]), p1=float(p[1]), p2=float(p[2]), d0=float(d[0]), d1=float(d[1]), d2=float(d[2]),
        prefill_residual=p_res, decode_residual=d_res, decode_by_seqs=tuple(by_seqs),
        source=f"fit: {len(use)} prefill + {len(dec)} decode iterations",
    )  # fmt: skip


# --- roofline projection -------------------------------------------------------------------------


@dataclass(frozen=True)
class Efficiencies:
    """Achieved share of the datasheet peaks, and the fixed costs of a step."""

    compute: float  # achieved / peak FLOP/s of prefill GEMMs and attention
    bandwidth: float  # achieved / peak memory bandwidth streaming weights and KV
    link: float  # achieved / nominal GPU-to-GPU bandwidth in an all-reduce
    launch_us: float  # per kernel launch (GPU) or per operator dispatch (CPU)
    kernels_per_layer: int  # launches per transformer block
    allreduce_latency_us: float  # fixed latency of one small all-reduce


# Starting values, to be checked against published figures (another helper collects them); as remembered,
# not yet checked: prefill at ~50-60% of dense peak and decode at ~70-80% of HBM bandwidth on A100/H100
# (vLLM / TensorRT-LLM reports); ~4-5 µs per eager CUDA launch (CUDA graphs cut it); ~12 kernels per Llama
# block (2 norms, QKV, RoPE, attention, o-proj, 2 residual adds, gate/up, act, down); links at 0.8 as
# plan/comm.py's LINK_EFFICIENCY. CPU: per-operator eager dispatch instead of launches.
EFFICIENCIES: dict[str, Efficiencies] = {
    "gpu": Efficiencies(compute=0.55, bandwidth=0.75, link=0.8, launch_us=4.0, kernels_per_layer=12,
                        allreduce_latency_us=10.0),
    "cpu": Efficiencies(compute=0.5, bandwidth=0.6, link=0.8, launch_us=8.0, kernels_per_layer=12,
                        allreduce_latency_us=0.0),
}  # fmt: skip


ENGINES = get_args(ServingEngine)
# Operators one decode step dispatches in rightsize's own engine (rightsize.llm.decoder.Decoder.decode, B slots
# in a run), (fixed, per block): RoPE + gated-MLP blocks (Llama) and GPT-2 blocks. Counted with a
# TorchDispatchMode, views left out; tests/llm/test_costs.py re-counts them on 2- and 4-block models.
EAGER_OPS = {"rope": (9, 25), "gpt2": (11, 12)}
EAGER_ALLREDUCES_PER_BLOCK = 2  # tensor parallel: one more dispatched op per Megatron all-reduce


def eager_host_floor_ms(shape: DecoderShape, tp: int = 1) -> float:
    """Host time of one eager decode step of ``shape`` (module docstring) on a host at the time model's reference
    clock (``host_us`` is stated for it), ms."""
    fixed, per_block = EAGER_OPS["gpt2" if shape.learned_positions else "rope"]
    ops = fixed + shape.layers * (per_block + (EAGER_ALLREDUCES_PER_BLOCK if tp > 1 else 0))
    return ops * _fitted("gpu", "host_us") * 1e-3


@dataclass(frozen=True)
class DeviceNumbers:
    """One device's peaks for one precision, in SI units."""

    name: str
    kind: str  # gpu | cpu
    peak_flops_per_s: float  # dense, at the precision the matmuls run in
    mem_bytes_per_s: float
    link_bytes_per_s: float  # GPU to GPU (tensor parallel); PCIe when the catalog has no NVLink figure
    amx: bool = False  # a CPU whose matmuls run on AMX tiles (the bf16 path of Sapphire Rapids and later)


def _compute_key(kind: str, precision: str) -> str:
    """Precision the matmuls run in: int8/int4 weights are weight-only (W8A16/W4A16) kernels, dequantised to the
    16-bit path: fp16 on GPUs; on CPUs the bf16 path (AMX, AVX-512 BF16, or the fp32 rate where the family has
    neither: the catalog's bf16 peak says which), as CPU LLM engines run weight-only int8 (IPEX's default
    ``lowp_mode``), so int8 weights never compute slower than fp16 ones. CPUs run fp16 on their bf16 path."""
    if kind == "gpu":
        return "fp16" if precision in ("int8", "int4") else precision
    return {"int8": "bf16", "int4": "bf16", "fp16": "bf16"}.get(precision, precision)


@functools.cache
def _fitted(device_class: str, name: str) -> float:
    """One parameter of the shipped projection fit (calibration/projection_fit.json): ``gpu`` or ``cpu``."""
    from rightsize.estimate.projection import load_projection_model

    return float(getattr(getattr(load_projection_model(), device_class), name))


def device_numbers(
    device: Mapping[str, Any] | Accelerator | CpuFamily, precision: str = "fp16", cores: int | None = None
) -> DeviceNumbers:
    """Adapter from the catalog: an ``Accelerator`` or ``CpuFamily``, or a row of catalog/data/accelerators.csv
    (``bandwidth_gbps``, ``fp16_tflops``, ... optionally with interconnect.csv's ``gpu_link_gbytes_per_s``) or
    of cpus.csv (``*_flop_per_cycle_per_core``, ``sustained_ghz``, ``memory_bandwidth_gbps``; ``cores``
    defaults to ``cores_per_socket``). Cells may be strings (csv.DictReader)."""
    link, amx = PCIE_GBYTES_PER_S * 1e9, False
    if isinstance(device, Accelerator):
        key = _compute_key("gpu", precision)
        name, kind, peak, bw = device.name, "gpu", device.peak_flops_per_s(key), device.bandwidth_gbps * 1e9
    elif isinstance(device, CpuFamily):
        n = cores or device.cores_per_socket
        key = _compute_key("cpu", precision)
        name, kind, peak = device.name, "cpu", n * cpu_kernel_peak(device, key)  # eager int8: VNNI, not AMX
        amx = cpu_kernel_path(device, key) == "AMX"
        # a slice of a socket pulls what its cores can: min(n x per-core bandwidth, socket), as the CPU time
        # model does (rightsize.estimate.timemodel; per-core figure fitted in projection_fit.json). One process over
        # two sockets (c7i.48xlarge: 2 x 48 cores) is counted at one socket's bandwidth on purpose: torch places no
        # weight by NUMA node, so the far socket's threads read across the inter-socket link; pessimistic by up to
        # 2x there (the decode step of a 96-core instance reads as a 48-core one's), never optimistic.
        bw = min(n * _fitted("cpu", "core_bw_gbps"), device.memory_bandwidth_gbps) * 1e9
    elif "bandwidth_gbps" in device:
        key = _compute_key("gpu", precision)
        name, kind, bw = str(device.get("name", "gpu")), "gpu", float(device["bandwidth_gbps"]) * 1e9
        peak = float(device.get(f"{key}_tflops") or device.get(f"{key}_tops") or 0.0) * 1e12
        link = float(device.get("gpu_link_gbytes_per_s") or PCIE_GBYTES_PER_S) * 1e9
    elif "memory_bandwidth_gbps" in device:
        key = _compute_key("cpu", precision)
        name, kind, bw = str(device.get("name", "cpu")), "cpu", float(device["memory_bandwidth_gbps"]) * 1e9
        n = cores or int(float(device.get("cores") or device.get("cores_per_socket") or 1))
        per_cycle = float(device.get(f"{key}_flop_per_cycle_per_core") or 0.0)
        peak = n * per_cycle * float(device["sustained_ghz"]) * 1e9
        amx = key in ("bf16", "fp16") and "amx_bf16" in str(device.get("isa") or "")
    else:
        raise SpecError(
            "device", "needs accelerators.csv columns (bandwidth_gbps, fp16_tflops, ...) or cpus.csv columns "
            "(memory_bandwidth_gbps, sustained_ghz, fp32_flop_per_cycle_per_core, ...)",
        )  # fmt: skip
    if peak <= 0:  # every weight precision computes in 16-bit on a GPU (_compute_key): only bf16 -> fp16 can help
        if kind == "gpu":
            fix = "weight_precision fp16" if key == "bf16" else f"give its {key}_tflops in a catalog file (--catalog)"
        else:
            fix = f"give its {key}_flop_per_cycle_per_core in a catalog file (--catalog), or weight_precision fp32"
        raise SpecError("precision", f"{name} has no dense {key} peak in the catalog. To fix: {fix}")
    return DeviceNumbers(name, kind, peak, bw, link, amx)


def _allreduce_ms(hidden: int, act_bytes: float, tp: int, dev: DeviceNumbers, eff: Efficiencies) -> tuple[float, float]:
    """(fixed, per token) ms of one all-reduce of a [tokens, h] activation over ``tp`` devices, ring:
    2·(tp−1)/tp · tokens·h·bytes / (link·eff) + latency. Megatron-LM tensor parallelism (Shoeybi et al.
    2019, https://arxiv.org/abs/1909.08053) does 2 per block: after attention and after the MLP."""
    if tp <= 1:
        return 0.0, 0.0
    per_token = 2.0 * (tp - 1) / tp * hidden * act_bytes / (dev.link_bytes_per_s * eff.link) * 1e3
    return eff.allreduce_latency_us * 1e-3, per_token


def project_step_costs(
    shape: DecoderShape,
    device: Mapping[str, Any] | Accelerator | CpuFamily | DeviceNumbers,
    precision: str = "fp16",
    kv_precision: str = "fp16",
    tp: int = 1,
    efficiencies: Efficiencies | None = None,
    cores: int | None = None,
    engine: str = "graphs",
) -> StepCosts:
    """Roofline StepCosts of ``shape`` on ``device`` split over ``tp`` devices (tensor parallel: FLOPs and
    bytes / tp, plus 2 all-reduces per block). Prefill is compute-bound with the weight read as its floor;
    decode is memory-bound (weights + KV) with the GEMMs' FLOPs as its floor; both pay a fixed launch
    overhead of layers × kernels_per_layer × launch_us per iteration. ``engine="eager"`` (GPUs) adds the
    host floor of an engine without CUDA graphs (module docstring)."""
    if tp < 1:
        raise SpecError("tp", f"must be >= 1, got {tp}")
    if engine not in ENGINES:
        raise SpecError("engine", f"must be one of {', '.join(ENGINES)}, got {engine!r}")
    dev = device if isinstance(device, DeviceNumbers) else device_numbers(device, precision, cores)
    eff = efficiencies or EFFICIENCIES[dev.kind]
    ms_per_flop = 1e3 / (dev.peak_flops_per_s * eff.compute * tp)  # ms per FLOP, whole TP group
    ms_per_byte = 1e3 / (dev.mem_bytes_per_s * eff.bandwidth * tp)  # ms per byte, whole TP group
    fixed = shape.layers * eff.kernels_per_layer * eff.launch_us * 1e-3  # ms of launches per iteration
    ar_fixed, ar_token = _allreduce_ms(shape.hidden, 4.0 if precision == "fp32" else 2.0, tp, dev, eff)
    fixed += 2 * shape.layers * ar_fixed
    ar_token *= 2 * shape.layers  # ms per token (prefill) or per sequence (decode) of all-reduce traffic
    weights_ms = shape.weight_bytes_read(precision) * ms_per_byte
    # ms to write or read one token of KV: each GPU holds kv_heads / tp of it, a whole head when tp > kv_heads
    kv_ms = shape.kv_bytes_per_token(kv_precision) * ms_per_byte * tp / shape.kv_shards(tp)
    n_mm, lm_head = shape.block_matmul_params(), shape.hidden * shape.vocab
    # GEMM time of R rows (tokens or sequences) through a weight matrix: 2·params·(R + R_half) at the GEMM rate.
    # GPUs: the flat compute efficiency, R_half = 0. CPUs: the CPU time model's GEMM rule, fitted to published
    # CPU results (calibration/projection_fit.json): efficiency gemm · I / (I + intensity_half), I = 2R / bytes per
    # stored weight (FLOP per byte of weight streamed: int8 reads 1), so a CPU GEMM over few rows runs far below peak,
    # and a 16-bit path (AMX, AVX-512 BF16: what int8 and int4 weights compute in, see _compute_key) reaches the
    # fitted low_precision share of what fp32 reaches of its peak, or on AMX the fitted amx share of the tile peak
    # (rightsize.estimate.timemodel.CpuParams.eff; fitted to real AMX runs: far below the tiles' 16x fp32).
    gemm_ms_per_flop, r_half = ms_per_flop, 0.0
    if dev.kind == "cpu":
        low = _fitted("cpu", "low_precision") if _compute_key("cpu", precision) != "fp32" else 1.0
        low = _fitted("cpu", "amx") if dev.amx else low
        gemm_ms_per_flop = 1e3 / (dev.peak_flops_per_s * _fitted("cpu", "gemm") * low * tp)
        r_half = _fitted("cpu", "intensity_half") * WEIGHT_BYTES[precision] / 2.0  # the bytes read: int8 reads 1
    # Prefill of T tokens (shape.prefill_flops): 2·h·V (LM head, last token) + 2·N_mm·T + 2·L·d·T² FLOPs;
    # memory floor: the weights once + T tokens of KV written.
    attn = 2.0 * shape.layers * shape.attn_width * ms_per_flop  # ms per T²
    p0 = fixed + 2.0 * (lm_head * (1.0 + r_half) + n_mm * r_half) * gemm_ms_per_flop
    p1 = 2.0 * n_mm * gemm_ms_per_flop + ar_token
    prefill_floor = (fixed + weights_ms, kv_ms + ar_token, attn)
    # Decode of B sequences over C context tokens (shape.decode_bytes / decode_flops): memory line
    # W + kv·(C + B) bytes; compute floor 2·(N_mm + h·V)·(B + R_half) FLOPs at the GEMM rate, attention
    # memory-bound in both (4·L·d FLOPs per kv_bytes_per_token read: heads / kv_heads FLOP per byte at fp16,
    # far below any ridge).
    attn_c = max(kv_ms, 4.0 * shape.layers * shape.attn_width * ms_per_flop)
    gemm_b = 2.0 * (n_mm + lm_head) * gemm_ms_per_flop
    decode_floor = (fixed + gemm_b * r_half, gemm_b + ar_token, attn_c)
    eager = engine == "eager" and dev.kind == "gpu"  # on a CPU the dispatch is the work (launch_us above)
    return StepCosts(
        p0=p0, p1=p1, p2=attn, d0=fixed + weights_ms, d1=kv_ms + ar_token, d2=attn_c,
        prefill_floor=prefill_floor, decode_floor=decode_floor,
        host_floor_ms=eager_host_floor_ms(shape, tp) if eager else 0.0, ar_ms=ar_token,
        source=f"roofline: {dev.name} {precision} kv {kv_precision} tp={tp}" + (", eager engine" if eager else ""),
    )  # fmt: skip
