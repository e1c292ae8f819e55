"""Benched on a GPU box, planned on a laptop: a spec whose devices cannot run here plans from the store's
measurements taken on another machine, and says so; with none, the error names why (never an empty reason)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rightsize.errors import UnsupportedError
from rightsize.profile import Environment, Latency, Measurement
from rightsize.spec import Workload
from rightsize.store import Store
from rightsize.workflows.plan import plan_spec

SPEC = {
    "name": "gpu-box", "model": "bert-base", "tiny": True, "input": {"seq_len": 16}, "batch_sizes": [1, 8],
    "devices": ["cuda"], "precisions": ["fp16"],
    "targets": {"online": {"rate_per_s": 50, "latency": {"percentile": 95, "bound_ms": 200}}},
}  # fmt: skip


def _gpu_box_store(path: Path, extra: dict[str, object] | None = None) -> None:
    env = Environment.from_dict({"id": "gpubox000001", "cpu_model": "Intel(R) Xeon(R) Processor", "machine": "x86_64",
                                 "physical_cores": 16, "logical_cores": 16,
                                 "gpus": [{"name": "NVIDIA H100 80GB HBM3", "memory_bytes": 85 * 10**9}]})  # fmt: skip
    with Store(path) as db:
        env_id = db.save_env(env)
        run = db.start_run("bench", model="bert-base", env_id=env_id)
        ms = [
            Measurement.from_dict(
                {
                    "model": "bert-base",
                    "mode": "inference",
                    "device": "cuda",
                    "precision": "fp16",
                    "batch_size": b,
                    "threads": None,
                    "input": {"seq_len": 16},
                    "status": "ok",
                    "env_id": env_id,
                    "tiny": True,
                    "latency_ms": Latency(t, t * 1.05, t * 1.1, t, 0.01 * t, 20).to_dict(),
                    "throughput_per_s": b * 1e3 / t,
                    "flops_per_sample": 2e6,
                    "param_bytes": 4_000_000,
                    "extra": extra or {},
                }
            )
            for b, t in ((1, 4.0), (8, 4.5))
        ]
        db.add_measurements(run, ms)


@pytest.mark.slow  # a few seconds: make test runs it, test-fast does not
@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="here the spec's cuda runs")
def test_a_spec_measured_on_another_machine_plans_from_its_measurements(tmp_path: Path) -> None:
    store_path = tmp_path / "s.db"
    _gpu_box_store(store_path)
    with Store(store_path) as store:
        result, context = plan_spec(Workload.model_validate(SPEC), store, progress=False)
    assert result.recommendation is not None
    assert context["profile"].env.id == "gpubox000001"
    assert any("measured on another machine" in w and "H100" in w for w in result.warnings)


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="here the spec's cuda runs")
def test_nothing_measured_anywhere_says_why(tmp_path: Path) -> None:
    # what this machine cannot run: exit 2, as a spec it cannot plan (it was a failed run, exit 1)
    with Store(tmp_path / "empty.db") as store, pytest.raises(UnsupportedError, match="could not be measured on this"):
        plan_spec(Workload.model_validate(SPEC), store, progress=False)


@pytest.mark.slow
@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="here the spec's cuda runs")
def test_this_machines_cpu_sweep_is_not_a_cuda_measurement(tmp_path: Path) -> None:
    """`devices: [cuda]` on a CPU machine had been planned from its earlier CPU sweep, 'measured on this very
    device', with no word on it."""
    cpu = {**SPEC, "model": "simplenet", "input": {}, "devices": ["cpu"], "precisions": ["fp32"],
           "timing": {"max_time_s": 0.3, "max_repeats": 10}}  # fmt: skip
    with Store(tmp_path / "s.db") as store:
        result, _ = plan_spec(Workload.model_validate(cpu), store, progress=False)
        assert result.recommendation is not None
        with pytest.raises(UnsupportedError, match=r"the spec's devices \(cuda\) could not be measured"):
            plan_spec(Workload.model_validate({**cpu, "devices": ["cuda"]}), store, progress=False)


@pytest.mark.slow  # a few seconds: make test runs it, test-fast does not
@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="here the spec's cuda runs")
def test_targets_precisions_limit_what_the_plan_may_recommend(tmp_path: Path) -> None:
    """The spec's `precisions` is what to measure here; the plan weighs every precision the hardware runs (fp32,
    tf32, bf16 projected) and says so when it recommends one the spec did not list. `targets.precisions` limits it."""
    store_path = tmp_path / "s.db"
    _gpu_box_store(store_path)
    only = {**SPEC, "targets": {**SPEC["targets"], "precisions": ["fp16"]}}  # type: ignore[dict-item]
    with Store(store_path) as store:
        free, _ = plan_spec(Workload.model_validate(SPEC), store, progress=False)
        held, _ = plan_spec(Workload.model_validate(only), store, progress=False)
    assert {c.precision for c in free.candidates} > {"fp16"}
    assert {c.precision for c in held.candidates} == {"fp16"}
    assert not any("do not list" in w for w in held.warnings)


def test_a_mode_that_does_not_match_the_targets_is_refused_before_measuring(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`mode: inference` with training targets measured the whole sweep and estimated memory, then was refused."""
    from rightsize.errors import SpecError
    from rightsize.measure import profile_source

    def never(*_: object, **__: object) -> None:
        raise AssertionError("measured before the spec was checked")

    monkeypatch.setattr(profile_source, "ensure_profile", never)
    spec = {**SPEC, "devices": ["cpu"], "targets": {"training": {"steps": 100}}}
    refused = pytest.raises(SpecError, match=r"^mode: inference does not fit training targets; set mode: training")
    with Store(tmp_path / "s.db") as store, refused:
        plan_spec(Workload.model_validate(spec), store, progress=False)


@pytest.mark.slow  # a few seconds: make test runs it, test-fast does not
@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="here the spec's cuda runs")
def test_a_plan_from_disturbed_timings_says_under_its_recommendation_that_it_may_change(tmp_path: Path) -> None:
    """On a busy machine a T4 was recommended that a quiet re-run replaced with 2 x c7a.large at 40% of its price;
    the only word was one bullet under Check. The recommendation now says it may change, and why."""
    calm_path, busy_path = tmp_path / "calm.db", tmp_path / "busy.db"
    _gpu_box_store(calm_path)
    _gpu_box_store(busy_path, {"contended": True, "contention": 0.5})
    with Store(calm_path) as store:
        calm, _ = plan_spec(Workload.model_validate(SPEC), store, progress=False)
    with Store(busy_path) as store:
        busy, _ = plan_spec(Workload.model_validate(SPEC), store, progress=False)
    assert not any("may change" in line for line in calm.why)
    assert busy.why[1].startswith("the answer may change on a quiet machine: 2 of 2 local timings were disturbed")
    assert "a CPU plan may beat" not in busy.why[1]  # the disturbed timings are the GPU's own
