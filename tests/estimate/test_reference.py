"""The reference fit: recovers known parameters, holds each source out, and makes honest bands."""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from types import ModuleType

import pytest

from rightsize.catalog import load_catalog
from rightsize.estimate.bands import Evaluation, Held, band_for, bands_from, evaluate
from rightsize.estimate.reference import (
    Anchor,
    ReferenceRow,
    fit_params,
    load_reference,
    predict_row,
    reference_path,
    work_key,
)
from rightsize.estimate.timemodel import CpuParams, GpuParams, gpu_time_ms
from rightsize.profile import Latency, Measurement, WorkProfile

CAT = load_catalog("")


def _work(name: str, scale: float, mode: str = "inference") -> WorkProfile:
    gemm = 2 * 128 * 768 * 768 * scale
    ops = (("gemm", 72, gemm, 2 * gemm, 2.8e6, 3.5e6), ("memory", 96, 0.0, 0.0, 8e5 * scale, 1.6e6 * scale),
           ("conv", 10, gemm, 2 * gemm, 1e6, 2e6), ("host", 72, 0, 0, 0, 0))  # fmt: skip
    return WorkProfile(name, mode, {"seq_len": 128}, False, ops, int(85e6 * scale), 200)


WORKS = {work_key(n, "inference", {"seq_len": 128}): _work(n, s) for n, s in (("a", 1.0), ("b", 0.5), ("c", 2.0))}
TRUE = GpuParams(gemm_half=0.55, conv_half=0.4, host_us=9.0, kernel_us=4.0, peak_exponent=0.3)


def _row(i: int, source: str, model: str, device: str, batch: int, truth: GpuParams, noise: float) -> ReferenceRow:
    w = WORKS[work_key(model, "inference", {"seq_len": 128})]
    t = gpu_time_ms(w, batch, CAT.accelerators[device], "fp16", truth) * math.exp(noise)
    return ReferenceRow(f"r{i}", source, model, "inference", batch, {"seq_len": 128}, "fp16", "gpu", device, 1, None,
                        None, "PyTorch", "latency_ms", t, "https://example.org", "2024-01")  # fmt: skip


def _synthetic_rows(seed: int = 1) -> list[ReferenceRow]:
    rng = random.Random(seed)
    rows, i = [], 0
    for s in range(6):
        for model in ("a", "b", "c"):
            for device, batch in (("T4", 1), ("A100-80GB", 64), ("H100", 256), ("V100-16GB", 8), ("L4", 32)):
                if rng.random() < 0.6:
                    rows.append(_row(i, f"src{s}", model, device, batch, TRUE, rng.gauss(0, 0.05)))
                    i += 1
    return rows


def test_fit_recovers_the_parameters_that_made_the_data() -> None:
    rows = _synthetic_rows()
    fit = fit_params(rows, WORKS, {}, CAT)
    errs = [abs(math.log(predict_row(r, WORKS, {}, CAT, fit.gpu, fit.cpu) / r.latency_ms)) for r in rows]  # type: ignore[operator]
    assert max(errs) < 0.2  # 5% noise: every row within ~20% after the fit
    prior_errs = [abs(math.log(predict_row(r, WORKS, {}, CAT, GpuParams(), CpuParams()) / r.latency_ms)) for r in rows]  # type: ignore[operator]
    assert sum(errs) < 0.5 * sum(prior_errs)  # the fit learned something


def test_leave_one_source_out_never_sees_the_held_source() -> None:
    rows = _synthetic_rows()
    poisoned = [*rows, _row(999, "liar", "a", "T4", 1, TRUE, math.log(5.0))]  # a 5x-off source
    ev = evaluate(poisoned, WORKS, {}, CAT)
    liar = next(h for h in ev.held if h.row.source == "liar")
    assert liar.ratio < 0.3  # predicted by the honest sources: far from the liar's figure
    assert ev.summary("gpu")["n"] == len(poisoned)


def test_bands_cover_the_held_out_share_they_claim() -> None:
    rng = random.Random(3)
    row = _row(0, "s", "a", "T4", 1, TRUE, 0.0)
    held = [Held(row, row.latency_ms * math.exp(rng.gauss(0, 0.2))) for _ in range(200)]
    band = bands_from(held)["gpu"]
    assert band.lo < 1 < band.hi and 0.88 <= band.coverage <= 1.0
    assert band.hi / band.lo == pytest.approx(math.exp(2 * 1.645 * 0.2) * 1.05 / 0.95, rel=0.2)


def test_out_of_source_coverage_flags_a_source_unlike_the_others() -> None:
    """In-sample coverage is ~90% by construction; a source whose errors the others never show is outside a band
    built without it, and only the out-of-source reading says so."""
    rng = random.Random(5)
    rows = [_row(i, f"s{i % 4}", "a", "T4", 1, TRUE, 0.0) for i in range(40)]
    held = [Held(r, r.latency_ms * math.exp(rng.gauss(0, 0.1))) for r in rows]
    held += [Held(r, r.latency_ms * 2.5) for r in (_row(100 + i, "odd", "a", "T4", 1, TRUE, 0.0) for i in range(5))]
    ev = Evaluation(fit=None, held=tuple(held), bands=bands_from(held), skipped=())  # type: ignore[arg-type]
    s = ev.summary("gpu")
    assert s["coverage"] >= 0.88
    assert ev.out_of_source_coverage([h for h in held if h.row.source == "odd"]) == 0.0
    assert ev.out_of_source_coverage([h for h in held if h.row.source != "odd"]) >= 0.85
    assert s["coverage_out_of_source"] <= s["coverage"] - 0.05


def test_cpu_rows_are_anchored_on_local_measurements() -> None:
    work = _work("a", 1.0)
    fam = CAT.cpus["intel-icelake"]
    lat = Latency(50.0, 55.0, 60.0, 50.0, 2.0, 20)
    m = Measurement("a", "inference", "cpu", "fp32", 1, 1, {"seq_len": 128}, "ok", latency_ms=lat)
    anchor = Anchor(fam, (m,), WORKS)
    row = ReferenceRow("c1", "s", "a", "inference", 1, {"seq_len": 128}, "fp32", "cpu", "intel-icelake", 1, 1, 1,
                       "PyTorch", "latency_ms", 50.0, "https://example.org", "2024")  # fmt: skip
    assert predict_row(row, WORKS, {"a": anchor}, CAT, GpuParams(), CpuParams()) == pytest.approx(50.0)
    assert predict_row(row, WORKS, {}, CAT, GpuParams(), CpuParams()) is None  # nothing to anchor on
    fast = Anchor(fam, (m,), WORKS, core_gflops=2 * 0.85 * fam.peak_flops_per_s("fp32", 1) / 1e9)
    assert fast.effective_family.sustained_ghz == pytest.approx(2 * fam.sustained_ghz)
    assert work.n_params > 0


def test_an_anchor_factor_is_worked_out_once_per_anchor_and_params() -> None:
    """The refit asked it again for every CPU row of a model at each step: two thirds of its time."""
    from rightsize.estimate.reference import _anchor_factor, anchor_factor

    fam = CAT.cpus["intel-icelake"]
    m = Measurement("a", "inference", "cpu", "fp32", 1, 1, {"seq_len": 128}, "ok",
                    latency_ms=Latency(50.0, 55.0, 60.0, 50.0, 2.0, 20))  # fmt: skip
    doubled = replace(m, latency_ms=Latency(100.0, 110.0, 120.0, 100.0, 2.0, 20))
    anchor, slower = Anchor(fam, (m,), WORKS), Anchor(fam, (doubled,), WORKS)
    first = anchor_factor(anchor, "inference", "fp32", CpuParams())
    assert first is not None and first == _anchor_factor(anchor, "inference", "fp32", CpuParams(), False)
    assert anchor_factor(anchor, "inference", "fp32", CpuParams()) is first  # kept, not worked out again
    assert anchor_factor(slower, "inference", "fp32", CpuParams())[0] == pytest.approx(2 * first[0])  # type: ignore[index]
    assert anchor_factor(anchor, "inference", "fp32", CpuParams(gemm=0.3))[0] != first[0]  # type: ignore[index]


def test_shipped_reference_set_is_complete_and_cited() -> None:
    if not reference_path().exists():
        pytest.skip("no reference set shipped")
    rows = load_reference()
    assert len(rows) >= 40
    assert len({r.device for r in rows if r.device_class == "gpu"}) >= 6
    assert {r.device_class for r in rows} == {"gpu", "cpu"}
    assert len({r.device for r in rows if r.device_class == "cpu"}) >= 2  # 2 so far (docs/reference-set.md)
    assert {"fp32", "int8"} <= {r.precision for r in rows if r.device_class == "cpu"}
    assert {"resnet50", "bert-base", "gpt2"} <= {r.model for r in rows}  # CNN, encoder, decoder
    assert {r.mode for r in rows} == {"inference", "training"}
    repo = Path(__file__).resolve().parents[2]
    for r in rows:
        # a published figure cites its page; a real run on a lent machine cites its committed measurements file
        cited = r.source_url.startswith("http") or (r.benched and (repo / r.source_url).is_file())
        assert cited and r.published and r.value > 0, r.id
        assert r.device in CAT.accelerators or r.device in CAT.cpus, r.id
    assert len({r.id for r in rows}) == len(rows)
    # NVIDIA's own DeepLearningExamples performance tables are held out for independent checks
    assert not any("nvidia/deeplearningexamples" in r.source_url.lower() or "ngc.nvidia" in r.source_url for r in rows)


@pytest.mark.slow  # traces ResNet-50 (~3 s)
def test_check_rows_are_cited_kept_out_of_the_fit_and_projectable() -> None:
    from rightsize.estimate.reference import checks_path, needed_works, predict_row, with_check_devices
    from rightsize.estimate.work import trace_works

    checks, fitted = load_reference(checks_path()), load_reference()
    cat = with_check_devices(CAT)
    assert len(checks) >= 10
    assert not {r.id for r in checks} & {r.id for r in fitted}
    assert not {r.source for r in checks} & {r.source for r in fitted}  # no source is both fitted and a check
    older_stacks = {"ryujaehun-gpu-benchmark-2021"}  # a planned card on a 2021 stack (docs/reference-set.md)
    nvidia_tables = {"nvidia-dle-resnet50-t4-2021"}  # NVIDIA's own tables: kept for independent checks, never fitted
    for r in checks:
        assert r.source_url.startswith("http") and r.published and r.value > 0, r.id
        assert r.device in cat.accelerators, r.id
        planned_ok = older_stacks | nvidia_tables
        assert r.device not in CAT.accelerators or r.source in planned_ok, r.id  # else a card the planner never sees
    assert {r.source for r in checks} >= older_stacks | nvidia_tables
    # the T4 rows: the table's "Throughput Avg" cells (img/s), AMP = fp16, FP32 = fp32 (Turing has no TF32)
    t4 = {(r.precision, r.batch_size): r.value for r in checks if r.source in nvidia_tables}
    assert t4 == {("fp16", 1): 79, ("fp16", 16): 1050, ("fp16", 64): 1165, ("fp16", 256): 1198,
                  ("fp32", 1): 98, ("fp32", 256): 415}  # fmt: skip
    assert all(r.device == "T4" and r.metric == "throughput_per_s" for r in checks if r.source in nvidia_tables)
    # the shipped fit projects them (a finite time for every row), one model of each family at least
    row = next(r for r in checks if r.model == "resnet50" and r.mode == "inference")
    works = trace_works(needed_works([row], []))
    t = predict_row(row, works, {}, cat, GpuParams(), CpuParams())
    assert t is not None and 0 < t < math.inf


def test_processes_side_by_side_share_the_socket() -> None:
    row = ReferenceRow("c2", "s", "a", "inference", 1, {"seq_len": 128}, "fp32", "cpu", "intel-icelake", 1, 4, 4,
                       "PyTorch", "throughput_per_s", 200.0, "https://example.org", "2024", instances=10)  # fmt: skip
    assert row.latency_ms == pytest.approx(50.0)  # 10 processes' total: one batch takes 10 / 200 s
    lat = Latency(50.0, 55.0, 60.0, 50.0, 2.0, 20)
    m = Measurement("a", "inference", "cpu", "fp32", 1, 1, {"seq_len": 128}, "ok", latency_ms=lat)
    anchors = {"a": Anchor(CAT.cpus["intel-icelake"], (m,), WORKS)}
    alone = predict_row(replace(row, instances=1), WORKS, anchors, CAT, GpuParams(), CpuParams())
    shared = predict_row(row, WORKS, anchors, CAT, GpuParams(), CpuParams())
    slow_clock = predict_row(replace(row, clock_ghz=1.5), WORKS, anchors, CAT, GpuParams(), CpuParams())
    assert alone is not None and shared is not None and slow_clock is not None
    assert shared >= alone  # a tenth of the socket's bandwidth each
    assert slow_clock > shared  # a named SKU's lower all-core clock


def test_device_runs_are_the_converged_gpu_timings_of_the_stored_runs(
    load_benchmark: Callable[[str], ModuleType],
) -> None:
    """device_runs.csv is written from benchmarks/gpu/results (real runs, never fitted) and nothing else: the rows
    whose error joins the GPU band trace back to a stored measurement."""
    from rightsize.estimate.reference import device_runs_path

    bench = load_benchmark("gpu_vs_device")
    runs = sorted(p for p in bench.RESULTS.iterdir() if (p / "measurements.json").exists())
    want = [r for run in runs for r in bench.reference_rows(run)]
    got = load_reference(device_runs_path(), run=True)
    assert len(got) >= 100 and [r.id for r in got] == [w["id"] for w in want]
    for r, w in zip(got, want, strict=True):
        assert r.value == pytest.approx(w["value"]) and r.run and r.device_class == "gpu", r.id
        assert r.device in CAT.accelerators and r.source_url.startswith("benchmarks/gpu/results/"), r.id
    assert not {r.source for r in got} & {r.source for r in load_reference()}  # not a published source


def test_real_runs_join_the_band_but_not_the_fit() -> None:
    pub = [ReferenceRow(f"p{i}", "s", "a", "inference", 1, {}, "fp32", "gpu", "A10", 1, None, None, "", "latency_ms",
                        10.0, "https://example.org", "2024") for i in range(20)]  # fmt: skip
    run = [replace(r, id=f"r{i}", source="run", run=True) for i, r in enumerate(pub)]
    held = [Held(r, 10.0) for r in pub]  # exact
    ran = [Held(r, 10.0 / 1.8) for r in run]  # the runs took 1.8x the projection
    alone, both = bands_from(held)["gpu"], bands_from([*held, *ran])["gpu"]
    assert alone.hi < 1.1 < 1.8 < both.hi  # the runs' error widens the band
    assert "20 published GPU results and the error over 20 real GPU runs" in both.source


def test_each_gpu_regime_gets_its_own_band_when_it_has_the_rows() -> None:
    """Host-bound rows err wider than device-bound ones: each regime its own band, the class's band over both; a
    regime with too few rows falls back to the class's band."""
    rng = random.Random(7)
    rows = [_row(i, f"s{i % 5}", "a", "T4", 1, TRUE, 0.0) for i in range(60)]
    held = [Held(r, r.latency_ms * math.exp(rng.gauss(0, 0.3 if i % 2 else 0.05)), "host" if i % 2 else "device")
            for i, r in enumerate(rows)]  # fmt: skip
    bands = bands_from(held)
    host, device, both = bands["gpu:host"], bands["gpu:device"], bands["gpu"]
    assert device.hi / device.lo < 1.4 < 2.0 < host.hi / host.lo  # 5% vs 30% noise
    assert device.hi / device.lo < both.hi / both.lo < host.hi / host.lo
    assert "30 published device-bound GPU results" in device.source
    assert band_for(bands, "gpu", "device") is device and band_for(bands, "gpu") is both
    few = bands_from([*held[:20], *(replace(h, regime="") for h in held[20:])])  # 10 rows per regime left tagged
    assert set(few) == {"gpu", "gpu:device", "gpu:host"}
    fewer = bands_from([*held[:18], *(replace(h, regime="") for h in held[18:])])  # 9 per regime: no regime band
    assert set(fewer) == {"gpu"} and band_for(fewer, "gpu", "host") is fewer["gpu"]


def test_shipped_gpu_bands_are_narrower_where_the_gpu_sets_the_time() -> None:
    """The shipped fit's device-bound GPU band is narrower than the host-bound one, and a projected GPU batch is
    tagged by the regime its own time split puts it in (ResNet-50 on an A100: batch 1 host-bound, 256 not)."""
    from rightsize.estimate.projection import load_projection_model
    from rightsize.estimate.timemodel import gpu_time_split_ms, regime_of
    from rightsize.estimate.work import trace_works

    model = load_projection_model()
    host, device = model.band("gpu", "host"), model.band("gpu", "device")
    assert device.hi / device.lo < host.hi / host.lo and device.hi < model.band("gpu").hi
    assert device.n >= 40 and host.n >= 40
    work = trace_works({("resnet50", "inference", "image_size=224")})
    w = next(iter(work.values()))
    acc = CAT.accelerators["A100-80GB"]
    regimes = [regime_of(*gpu_time_split_ms(w, b, acc, "fp16", model.gpu)[:2]) for b in (1, 256)]
    assert regimes == ["host", "device"]


def test_a_cpu_row_is_anchored_on_its_own_path_or_extrapolated_from_fp32() -> None:
    from rightsize.estimate.reference import ANCHORED, EXTRAPOLATED, cpu_regime

    lat = Latency(50.0, 55.0, 60.0, 50.0, 2.0, 20)
    ms = tuple(Measurement("a", "inference", "cpu", p, 1, 1, {"seq_len": 128}, "ok", latency_ms=lat) for p in
               ("fp32", "bf16", "int8"))  # fmt: skip
    anchors = {"a": Anchor(CAT.cpus["amd-genoa"], ms, WORKS)}  # AVX-512 BF16 and VNNI, no AMX

    def row(prec: str, device: str) -> ReferenceRow:
        return ReferenceRow("r", "s", "a", "inference", 1, {"seq_len": 128}, prec, "cpu", device, 1, 1, 1, "PyTorch",
                            "latency_ms", 50.0, "https://example.org", "2024")  # fmt: skip

    assert cpu_regime(row("bf16", "intel-sapphire-rapids"), anchors, CAT, CpuParams()) == EXTRAPOLATED  # AMX
    assert cpu_regime(row("int8", "intel-sapphire-rapids"), anchors, CAT, CpuParams()) == ANCHORED  # VNNI both
    assert cpu_regime(row("fp32", "intel-icelake"), anchors, CAT, CpuParams()) == ANCHORED
    assert cpu_regime(row("bf16", "amd-turin"), anchors, CAT, CpuParams()) == ANCHORED  # AVX-512 BF16 both
    assert cpu_regime(row("fp32", "intel-icelake"), {}, CAT, CpuParams()) == ""  # nothing to anchor on
