"""Step costs: fitting measured iterations, and the roofline projection onto catalog devices."""

from __future__ import annotations

import csv
import dataclasses
from pathlib import Path

import numpy as np
import pytest

import rightsize
from rightsize.catalog import load_catalog
from rightsize.errors import SpecError
from rightsize.llm.costs import (
    EAGER_OPS,
    EFFICIENCIES,
    StepCosts,
    device_numbers,
    eager_host_floor_ms,
    fit_step_costs,
    project_step_costs,
)
from rightsize.llm.shape import DecoderShape

DATA = Path(rightsize.__file__).parent / "catalog" / "data"
TRUE = StepCosts(p0=4.0, p1=0.05, p2=2e-5, d0=9.0, d1=0.3, d2=0.002)


@dataclasses.dataclass
class Record:  # the shape of rightsize.llm.engine.IterationRecord
    kind: str
    seqs: int
    tokens: int
    context_tokens: int
    ms: float


def _records(rng: np.random.Generator, batched_prefill: bool = False, jitter: float = 0.0) -> list[object]:
    out: list[object] = []
    for _ in range(200):
        seqs = int(rng.integers(2, 5)) if batched_prefill else 1
        t = int(rng.integers(16, 1024))  # every sequence of one iteration: t tokens
        ms = seqs * TRUE.prefill_ms(t) * (1 + jitter * rng.standard_normal())
        out.append({"kind": "prefill", "seqs": seqs, "tokens": seqs * t, "context_tokens": 0, "ms": ms})
        b = int(rng.integers(1, 64))
        c = int(b * rng.integers(20, 2000))
        out.append(Record("decode", b, b, c, TRUE.decode_ms(b, c) * (1 + jitter * rng.standard_normal())))
    return out


def test_fit_recovers_the_coefficients() -> None:
    fit = fit_step_costs(_records(np.random.default_rng(0)))
    for name in ("p0", "p1", "p2", "d0", "d1", "d2"):
        assert getattr(fit, name) == pytest.approx(getattr(TRUE, name), rel=1e-6)
    assert fit.prefill_residual is not None and fit.prefill_residual < 1e-9
    assert fit.decode_residual is not None and fit.decode_residual < 1e-9
    assert "200 prefill + 200 decode" in fit.source


def test_fit_reports_its_residual_on_noisy_records() -> None:
    fit = fit_step_costs(_records(np.random.default_rng(1), jitter=0.05))
    assert fit.decode_ms(32, 32 * 500) == pytest.approx(TRUE.decode_ms(32, 32 * 500), rel=0.02)
    assert fit.prefill_ms(512) == pytest.approx(TRUE.prefill_ms(512), rel=0.03)
    assert 0.02 < (fit.decode_residual or 0) < 0.06  # median |N(0, 0.05)| = 0.034


def test_fit_follows_a_step_that_jumps_between_one_and_two_sequences() -> None:
    """A CPU engine's decode step is not a line in B (BLAS takes another path for 2-3 rows than for 1: on the dev VM
    a small GPT-2 went 4.7 ms at B = 1, 8.2 ms at B = 2, 9.2 ms at B = 8): the fit keeps each measured batch size's
    median departure from the line, and the simulator steps at that size pay it."""
    rng = np.random.default_rng(4)
    premium = {2: 3.0, 3: 2.5, 4: 1.0}  # ms above the line at B = 2, 3, 4

    def step(b: int, c: int) -> float:
        return (4.0 + 0.3 * b + 0.001 * c + premium.get(b, 0.0)) * (1 + 0.01 * rng.standard_normal())

    recs: list[object] = [{"kind": "prefill", "seqs": 1, "tokens": t, "context_tokens": 0, "ms": 2.0 + 0.1 * t}
                          for t in range(16, 400, 8)]  # fmt: skip
    for b in [1] * 60 + [2] * 40 + [3] * 20 + [4] * 10 + [8] * 10 + [6] * 3:
        c = b * int(rng.integers(50, 300))
        recs.append(Record("decode", b, b, c, step(b, c)))
    fit = fit_step_costs(recs)
    for b in (1, 2, 3, 4, 8):
        assert fit.decode_ms(b, b * 150) == pytest.approx(4.0 + 0.3 * b + 0.15 * b + premium.get(b, 0.0), rel=0.05)
    assert len(fit.decode_by_seqs) == 8 and fit.decode_by_seqs[5] == 0.0  # 3 steps at B = 6: too few, the line
    assert fit.decode_residual is not None and fit.decode_residual < 0.03
    assert fit.decode_ms(20, 20 * 150) == pytest.approx(fit.d0 + 20 * fit.d1 + 3000 * fit.d2)  # beyond: the line


def test_fit_on_batched_prefill_warns_and_assumes_equal_lengths() -> None:
    with pytest.warns(UserWarning, match="equal length"):
        fit = fit_step_costs(_records(np.random.default_rng(2), batched_prefill=True))
    assert fit.prefill_ms(300) == pytest.approx(TRUE.prefill_ms(300), rel=1e-6)


def test_fit_needs_both_kinds() -> None:
    only_decode = [r for r in _records(np.random.default_rng(3)) if isinstance(r, Record)]
    with pytest.raises(SpecError, match="no prefill"):
        fit_step_costs(only_decode)
    with pytest.raises(SpecError, match="kind"):
        fit_step_costs([{"kind": "train", "seqs": 1, "tokens": 1, "context_tokens": 0, "ms": 1.0}])


def _row(name: str) -> dict[str, str]:
    with open(DATA / "accelerators.csv") as f:
        return next(r for r in csv.DictReader(f) if r["name"] == name)


def test_device_adapter_reads_catalog_rows_and_objects() -> None:
    cat = load_catalog()
    h100_row = device_numbers(_row("H100"), "fp16")
    assert h100_row == device_numbers(cat.accelerators["H100"], "fp16")
    assert (h100_row.peak_flops_per_s, h100_row.mem_bytes_per_s) == (989e12, 3350e9)
    assert device_numbers(_row("H100"), "int4").peak_flops_per_s == 989e12  # W4A16: fp16 tensor cores
    assert device_numbers({**_row("H100"), "gpu_link_gbytes_per_s": "450"}).link_bytes_per_s == 450e9
    with pytest.raises(SpecError, match="bf16"):
        device_numbers(_row("T4"), "bf16")  # no bf16 on Turing
    cpu = device_numbers(cat.cpus["intel-skylake"], "fp32", cores=16)
    assert cpu.kind == "cpu" and cpu.peak_flops_per_s == pytest.approx(16 * 64 * 2.7e9)
    with open(DATA / "cpus.csv") as f:
        row = next(r for r in csv.DictReader(f) if r["name"] == "intel-skylake")
    assert device_numbers(row, "fp32", cores=16) == cpu
    with pytest.raises(SpecError, match="columns"):
        device_numbers({"tflops": 1.0})


def test_roofline_llama7b_on_h100() -> None:
    s = DecoderShape.from_zoo("llama-7b")
    costs = project_step_costs(s, _row("H100"), "fp16")
    eff = EFFICIENCIES["gpu"]
    launches_ms = 32 * eff.kernels_per_layer * eff.launch_us * 1e-3
    # Batch 1 decode is the weight read: 13.5 GB / (3.35 TB/s x eff) + launches.
    weights_ms = s.weight_bytes_read("fp16") / (3350e9 * eff.bandwidth) * 1e3
    assert costs.decode_ms(1, 100) == pytest.approx(weights_ms + launches_ms, rel=0.01)
    assert 5.0 < costs.decode_ms(1, 100) < 10.0
    # Long prefill is compute-bound: FLOPs / (989 TFLOP/s x eff).
    flops_ms = s.prefill_flops(4096) / (989e12 * eff.compute) * 1e3
    assert costs.prefill_ms(4096) == pytest.approx(flops_ms + launches_ms, rel=0.01)
    # A short prompt cannot beat the weight read (the floor), nor a big batch its FLOPs.
    kv_write_ms = s.kv_bytes_per_token() * 8 / (3350e9 * eff.bandwidth) * 1e3
    assert costs.prefill_ms(8) == pytest.approx(weights_ms + launches_ms + kv_write_ms, rel=1e-3)
    gemm_ms = 2 * (s.block_matmul_params() + 4096 * 32000) * 1024 / (989e12 * eff.compute) * 1e3
    assert costs.decode_ms(1024, 0) >= gemm_ms
    # KV reads cost d2 per context token: 512 KiB at 2.5 TB/s.
    assert costs.d2 == pytest.approx(512 * 1024 / (3350e9 * eff.bandwidth) * 1e3)


def test_tensor_parallel_splits_work_and_pays_all_reduces() -> None:
    s = DecoderShape.from_zoo("llama-13b")
    nvlink = {**_row("H100"), "gpu_link_gbytes_per_s": "450"}
    one = project_step_costs(s, nvlink, "fp16")
    two = project_step_costs(s, nvlink, "fp16", tp=2)
    pcie = project_step_costs(s, _row("H100"), "fp16", tp=2)  # no link figure: PCIe 12 GB/s
    for b in (1, 64):
        assert one.decode_ms(b, b * 1000) / 2 < two.decode_ms(b, b * 1000) < one.decode_ms(b, b * 1000)
    assert pcie.prefill_ms(2048) > two.prefill_ms(2048)
    assert "tp=2" in two.source
    with pytest.raises(SpecError, match="tp"):
        project_step_costs(s, nvlink, tp=0)


def test_quantised_weights_decode_faster() -> None:
    s = DecoderShape.from_zoo("llama-7b")
    fp16 = project_step_costs(s, _row("A10G"), "fp16")
    int4 = project_step_costs(s, _row("A10G"), "int4")
    assert int4.decode_ms(1, 500) < 0.4 * fp16.decode_ms(1, 500)
    cpu = project_step_costs(DecoderShape.from_zoo("gpt2"), load_catalog().cpus["intel-skylake"], "fp32", cores=8)
    assert cpu.source.startswith("roofline: intel-skylake") and cpu.decode_ms(1, 100) > 0


@pytest.mark.parametrize("family", ["intel-icelake", "intel-sapphire-rapids", "amd-genoa"])
def test_smaller_weights_never_run_slower_on_a_cpu(family: str) -> None:
    """Weight-only int8/int4 on a CPU computes on the 16-bit path and reads fewer bytes: on a CPU with a bf16 path
    (AMX, AVX-512 BF16) and on one without, no step of an int8 model is slower than fp16's, nor int4's than
    int8's (they had run at the fp32 rate: c6i.2xlarge decoded llama-1b at 82 ms int8 against 48 ms fp16)."""
    s, fam = DecoderShape.from_zoo("llama-1b"), load_catalog().cpus[family]
    steps = {p: project_step_costs(s, fam, p, cores=4) for p in ("fp16", "int8", "int4")}
    for b in (1, 8):
        fp16, int8, int4 = (steps[p].decode_ms(b, b * 384) for p in ("fp16", "int8", "int4"))
        assert int4 <= int8 < 0.8 * fp16
    assert steps["int8"].prefill_ms(128) <= steps["fp16"].prefill_ms(128)


def _decode_ops(model: str, blocks: int) -> int:
    """Operators (views left out) one decode step of 2 slots in a run dispatches in our own engine."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from transformers import AutoModelForCausalLM

    from rightsize.estimate.work import classify_op
    from rightsize.llm.decoder import Decoder, lm_config

    class Count(TorchDispatchMode):
        n = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            out = func(*args, **(kwargs or {}))
            if classify_op(func._overloadpacket.__name__, bool(getattr(func, "is_view", False))) != "host":
                Count.n += 1
            return out

    cfg = lm_config(model, "tiny")
    setattr(cfg, "n_layer" if model == "gpt2" else "num_hidden_layers", blocks)
    with torch.inference_mode():
        dec = Decoder(AutoModelForCausalLM.from_config(cfg).eval(), slots=2, max_len=32)
        for slot in (0, 1):
            dec.prefill(slot, [1, 2, 3])
        dec.decode([0, 1], [4, 5])
        Count.n = 0
        with Count():
            dec.decode([0, 1], [6, 7])
    return Count.n


@pytest.mark.parametrize(("model", "kind"), [("llama-1b", "rope"), ("gpt2", "gpt2")])
def test_eager_op_counts_are_those_of_our_own_engine(model: str, kind: str) -> None:
    fixed, per_block = EAGER_OPS[kind]
    two, four = _decode_ops(model, 2), _decode_ops(model, 4)
    assert (four - two) // 2 == per_block
    assert two - 2 * per_block == fixed


def test_an_eager_engine_floors_every_step_at_its_host_time() -> None:
    s = DecoderShape.from_zoo("llama-7b")
    graphs = project_step_costs(s, _row("H100"), "fp16")
    eager = project_step_costs(s, _row("H100"), "fp16", engine="eager")
    floor = eager_host_floor_ms(s)
    fixed, per_block = EAGER_OPS["rope"]
    assert floor == pytest.approx((fixed + 32 * per_block) * 0.016, rel=0.5)  # ~16 µs per eager op, fitted
    assert eager.host_floor_ms == floor and "eager" in eager.source and graphs.host_floor_ms == 0.0
    # An H100 reads 7B weights in ~7 ms: eager, the host (~13 ms) sets the pace at batch 1 and for short prompts ...
    assert graphs.decode_ms(1, 200) < floor
    assert eager.decode_ms(1, 200) == pytest.approx(floor)
    assert eager.prefill_ms(8) == pytest.approx(floor)
    # ... but not when the GPU is slower than the host: a big batch, a long prompt, a slow GPU.
    assert eager.decode_ms(512, 512 * 1000) == graphs.decode_ms(512, 512 * 1000) > floor
    assert eager.prefill_ms(4096) == graphs.prefill_ms(4096)
    a10g = (project_step_costs(s, _row("A10G"), "fp16", engine=e).decode_ms(1, 200) for e in ("graphs", "eager"))
    assert len(set(a10g)) == 1
    # tensor parallel: two more dispatched all-reduces a block, on every rank
    ops, ops_tp = fixed + 32 * per_block, fixed + 32 * (per_block + 2)
    assert eager_host_floor_ms(s, tp=2) == pytest.approx(floor * ops_tp / ops)
    # CPUs: dispatch is already the launch term; no floor
    cpu = project_step_costs(s, load_catalog().cpus["intel-icelake"], "fp16", engine="eager", cores=16)
    assert cpu.host_floor_ms == 0.0
    with pytest.raises(SpecError, match="engine"):
        project_step_costs(s, _row("H100"), engine="compiled")


def test_a_cpu_gemm_over_few_rows_runs_below_peak_as_the_cpu_time_model_says() -> None:
    """CPU step costs use the fitted CPU GEMM rule (efficiency gemm · I / (I + intensity_half), I = 2 rows / bytes
    per weight): a decode step's compute line is 2 · params · (B + R_half) at the GEMM rate, so batch 8 costs
    far more than 8 / 1 of the weight read, and prefill of many tokens runs near the fitted GEMM rate."""
    from rightsize.estimate.projection import load_projection_model

    fit = load_projection_model().cpu
    s = DecoderShape.from_zoo("gpt2")
    fam = load_catalog().cpus["amd-turin"]
    costs = project_step_costs(s, fam, "fp32", "fp32", cores=1)
    dev = device_numbers(fam, "fp32", cores=1)
    r_half = fit.intensity_half * 4 / 2  # fp32 weights: 4 bytes
    flops_b = 2.0 * (s.block_matmul_params() + s.hidden * s.vocab)
    for b in (8, 64):
        gemm_ms = flops_b * (b + r_half) / (dev.peak_flops_per_s * fit.gemm) * 1e3
        assert costs.decode_ms(b, 0) >= gemm_ms * 0.999
    rate = dev.peak_flops_per_s * fit.gemm / 1e3  # FLOP per ms
    lm_head = s.hidden * s.vocab
    gemm_ms = (2.0 * s.block_matmul_params() * (512 + r_half) + 2.0 * lm_head * (1 + r_half)) / rate
    assert gemm_ms <= costs.prefill_ms(512) < 1.3 * gemm_ms  # near the fitted GEMM rate, not at half of peak
    gpu = project_step_costs(s, _row("H100"), "fp16")  # GPUs keep the flat compute efficiency: no R_half
    assert gpu.decode_floor[0] < 1.0


@pytest.mark.parametrize("precision", ["bf16", "int8", "int4"])
def test_a_cpu_16_bit_gemm_reaches_the_fitted_low_precision_share_as_the_cpu_time_model_says(precision: str) -> None:
    """A 7B prompt on 24 Sapphire Rapids cores read 72 of 73.7 TFLOPS: the CPU step costs took the fitted GEMM
    efficiency (1.0, at its bound) but not the low_precision factor (0.71) the CPU time model applies to the
    AVX-512 BF16 path that 16-bit, int8 and int4 weights compute in, nor on AMX the fitted amx share of the tile
    peak (0.21: a real AMX host ran bf16 GEMMs far below the tiles' 16x fp32). fp32 keeps the plain GEMM rate."""
    from rightsize.estimate.projection import load_projection_model

    fit = load_projection_model().cpu
    s = DecoderShape.from_zoo("llama-7b")
    cpus = load_catalog().cpus
    for fam, share in ((cpus["intel-sapphire-rapids"], fit.amx), (cpus["amd-genoa"], fit.low_precision)):
        for prec, low in ((precision, share), ("fp32", 1.0)):
            costs = project_step_costs(s, fam, prec, "fp16", cores=24)
            peak = device_numbers(fam, prec, cores=24).peak_flops_per_s
            assert costs.p1 == pytest.approx(2.0 * s.block_matmul_params() * 1e3 / (peak * fit.gemm * low))
    assert device_numbers(cpus["intel-sapphire-rapids"], precision).amx
    assert not device_numbers(cpus["amd-genoa"], precision).amx
    assert fit.low_precision < 0.9 and fit.amx < 0.5


@pytest.mark.parametrize(
    ("gpu", "precision", "fix"),
    [("P4", "int8", "give its fp16_tflops in a catalog file (--catalog)"), ("T4", "bf16", "weight_precision fp16")],
    ids=["no-16-bit-peak", "no-bf16"],
)
def test_a_gpu_without_the_peak_names_the_fix_that_can_help(gpu: str, precision: str, fix: str) -> None:
    """Every weight precision computes in 16-bit on a GPU: 'pick another precision' could not help a P4 (it read so for
    int8, int4 and fp16 alike); only bf16 -> fp16 can."""
    key = "bf16" if precision == "bf16" else "fp16"
    with pytest.raises(SpecError) as exc:
        device_numbers(load_catalog().accelerators[gpu], precision)
    assert str(exc.value) == f"precision: {gpu} has no dense {key} peak in the catalog. To fix: {fix}"
