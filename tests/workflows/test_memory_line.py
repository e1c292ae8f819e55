"""The plan's memory line (fixed + per-sample bytes) grows with the batch in training too, as `memory` does."""

from __future__ import annotations

from pathlib import Path

import pytest

from rightsize.spec import parse_spec
from rightsize.store import Store
from rightsize.workflows.plan import fit_memory_line, memory_models

GIB = 2**30


def test_the_line_takes_its_slope_from_large_batches_and_covers_batch_1() -> None:
    # BERT-base AdamW fp16 training at seq 64 (estimate_memory, 2026-11-27): the optimizer step is the peak at
    # batches 1 and 8 (3.02 GiB both), activations at 64 and 512; a slope from 1 and 8 read 0 bytes per sample
    t1, t64, t512 = int(3.0175 * GIB), int(4.1024 * GIB), int(16.8506 * GIB)
    fixed, per_sample = fit_memory_line([(1, t1), (64, t64), (512, t512)])
    assert per_sample == pytest.approx((t512 - t64) / 448)
    assert fixed + per_sample >= t1  # batch 1 covered
    assert t512 <= fixed + 512 * per_sample <= 1.05 * t512  # a bound: the optimizer step's flat part kept
    assert fit_memory_line([(1, 100), (8, 100)]) == (100.0, 0.0)


@pytest.mark.slow  # traces BERT-mini's memory at three batches and three precisions (~10 s)
def test_a_training_plan_knows_a_big_batch_needs_more_memory(tmp_path: Path) -> None:
    spec = parse_spec({"name": "t", "model": "bert-base", "mode": "training", "tiny": True,
                       "input": {"seq_len": 64}, "precisions": ["fp32"],
                       "targets": {"training": {"dataset_size": 1000, "epochs": 1, "batch_size": 32}}})  # fmt: skip
    with Store(tmp_path / "s.sqlite") as db:
        models, breakdowns = memory_models(spec, db, {"fp32"})
    m = models["fp32"]
    assert m.per_sample_bytes > 0  # was 0: every micro-batch "fit"
    # a CPU worker all-reduces the same gradients (its line had none: CPU clusters skipped the all-reduce)
    assert m.on_cpu is not None and m.on_cpu.gradient_bytes == m.gradient_bytes and m.gradient_bytes
    assert breakdowns["cpu:fp32"]["cuda_context"] == 0 and breakdowns["fp32"]["cuda_context"] > 0
    assert m.bytes_at(4096) > m.bytes_at(1) + 4000 * m.per_sample_bytes * 0.99


def test_a_cpu_replica_is_planned_without_the_cuda_context(tmp_path: Path) -> None:
    """The line was traced for CUDA only: every CPU candidate carried a ~715 MiB CUDA context it never makes."""
    from rightsize.catalog import load_catalog
    from rightsize.plan.options import pair_options
    from rightsize.profile import ServiceCurve

    spec = parse_spec({"name": "i", "model": "bert-base", "mode": "inference", "tiny": True,
                       "input": {"seq_len": 32}, "precisions": ["fp32"]})  # fmt: skip
    with Store(tmp_path / "s.sqlite") as db:
        models, _ = memory_models(spec, db, {"fp32"})
        again, _ = memory_models(spec, db, {"fp32"})  # from the store's cache: the CPU line kept
    gpu, cpu = models["fp32"], models["fp32"].for_device("cpu")
    assert cpu is not gpu and again["fp32"].on_cpu == cpu
    assert 0.6 * GIB < gpu.fixed_bytes - cpu.fixed_bytes < 0.9 * GIB  # the context (and cuBLAS workspace)
    assert cpu.fixed_bytes > 0 and models["fp32"].for_device("gpu") is gpu
    cat = load_catalog()
    c6i = next(i for i in cat.instances if i.instance_type == "c6i.2xlarge")
    curve = ServiceCurve("cpu:c6i.2xlarge", "fp32", (1, 8), (5.0, 30.0), (0.1, 0.1), "measured", instance="c6i.2xlarge")
    (opt,) = pair_options([c6i], [curve], cat.accelerators, models)
    assert opt.memory == cpu


def test_a_cpu_recommendations_report_shows_the_cpu_breakdown() -> None:
    from types import SimpleNamespace

    from rightsize.report.data import at_planned_batch, memory_view
    from rightsize.workflows.plan import CPU_MEMORY_LABEL, report_memory

    gpu = {"weights": 98e6, "activations": 66e6, "cuda_context": 750e6}
    cpu = {"weights": 98e6, "activations": 66e6, "workspace": 24e6}
    context = {"memory": {"fp32": gpu, "cpu:fp32": cpu}}
    rec = SimpleNamespace(device_class="cpu", precision="fp32")
    mem = report_memory(SimpleNamespace(recommendation=rec), context)  # type: ignore[arg-type]
    assert mem == {"breakdown": cpu, "label": CPU_MEMORY_LABEL, "tiers": []}
    view = memory_view(mem, tiers=[{"memory_gib": 16, "names": "T4"}])
    assert view is not None and view.tiers == ()  # a CPU plan: no GPU tiers, even where the caller offers some
    plan = {"kind": "online", "recommendation": {"device_class": "cpu", "memory_bytes": 300e6,
                                                 "batching": {"max_batch": 8}}}  # fmt: skip
    at = at_planned_batch(view, plan)  # a CPU breakdown is brought to the CPU plan's batch
    assert at.total_bytes == 300e6 and "more activations at batch 8" in at.breakdown
    gpu_rec = SimpleNamespace(device_class="gpu", precision="fp32")
    assert report_memory(SimpleNamespace(recommendation=gpu_rec), context) == gpu  # no catalog: the plain breakdown


def test_a_model_that_cannot_be_traced_is_said_once_and_not_traced_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A user model that fails at batch > 1 was traced again on every plan, each time under "estimating ...'s memory
    (once: cached in the store)", and nothing said that it failed."""
    (tmp_path / "onlyone.py").write_text(
        "from torch import nn\n\n\nclass M(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.l = nn.Linear(4, 2)\n\n    def forward(self, x):\n        if x.shape[0] > 1:\n"
        "            raise RuntimeError('batch too big for this model')\n        return self.l(x)\n\n\n"
        "def make():\n    return M()\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    spec = parse_spec({"name": "u", "model": "onlyone:make", "mode": "inference", "input": {"shape": [4]},
                       "precisions": ["fp32"]})  # fmt: skip
    with Store(tmp_path / "s.sqlite") as db:
        models, _ = memory_models(spec, db, {"fp32"})
        first = capsys.readouterr().err
        again, _ = memory_models(spec, db, {"fp32"})
        second = capsys.readouterr().err
    assert models == {} == again
    assert "onlyone:make's memory could not be estimated at fp32 (" in first and "batch too big" in first, first
    assert second == "", second  # from the store: not traced again, nothing claimed
