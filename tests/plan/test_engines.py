"""`engines: [torch, onnxruntime]`: both measured and planned; the cheapest (then faster) wins, the other is shown."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rightsize.spec import Workload
from rightsize.store import Store
from rightsize.workflows.plan import plan_spec

pytest.importorskip("onnxruntime")
try:
    import openvino  # noqa: F401

    ENGINES = ["torch", "onnxruntime", "openvino"]
except ImportError:
    ENGINES = ["torch", "onnxruntime"]
NAMES = {"torch": "PyTorch eager", "onnxruntime": "ONNX Runtime", "openvino": "OpenVINO"}


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One store and ONNX cache for the measured plans below: tiny distilbert is exported and each engine's configs
    measured once, and a later plan reuses them (what those tests check is the plan, not the measuring)."""
    return tmp_path_factory.mktemp("engines")


@pytest.mark.slow
def test_plan_picks_an_engine_and_names_the_other(shared: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RIGHTSIZE_ONNX_CACHE", str(shared / "onnx"))
    workload = Workload.model_validate({
        "name": "engines", "model": "distilbert", "tiny": True, "input": {"seq_len": 16},
        "batch_sizes": [1, 4], "precisions": ["fp32"], "engines": ENGINES,
        "timing": {"max_time_s": 0.5, "max_repeats": 20},
        "targets": {"online": {"rate_per_s": 5, "latency": {"percentile": 95, "bound_ms": 200}}},
    })  # fmt: skip
    store = Store(shared / "s.db")
    result, _ = plan_spec(workload, store, progress=False)
    engines = result.assumptions["engines"]
    assert set(engines) == set(ENGINES)
    assert engines["onnxruntime"]["model"] == "ort:distilbert" and engines["torch"]["model"] == "distilbert"
    assert result.recommendation is not None
    chosen = next(e for e, v in engines.items() if v["model"] == result.model)
    assert engines[chosen]["cost"] <= min(c for c in (e["cost"] for e in engines.values()) if c is not None)
    assert any(line.startswith("engine: ") for line in result.why)
    assert result.to_dict()["engine"] == chosen  # --json names the engine, not only the model ref's prefix
    for other in set(ENGINES) - {chosen}:
        assert any(line.startswith(f"engine {NAMES[other]}") for line in result.why)
    if chosen != "torch":  # measured on a CPU engine: no GPU candidate
        assert all(c.device_class == "cpu" for c in result.candidates)
    models = {p.model for p in store.profiles(tiny=True)}
    assert {engines[e]["model"] for e in ENGINES} <= models  # every engine measured and stored


def test_engines_are_inference_only() -> None:
    with pytest.raises(ValueError, match="run inference only"):
        Workload.model_validate({"model": "distilbert", "mode": "training", "engines": ["onnxruntime"]})


@pytest.mark.slow
def test_a_cpu_engines_plan_picks_only_precisions_it_runs(shared: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """ONNX Runtime's CPU path runs fp32 and int8: its plan had offered 'c7i.large bf16' (projected from its fp32),
    a plan `rightsize serve ort:...` refuses."""
    monkeypatch.setenv("RIGHTSIZE_ONNX_CACHE", str(shared / "onnx"))
    workload = Workload.model_validate({
        "name": "ort-only", "model": "ort:distilbert", "tiny": True, "input": {"seq_len": 16},
        "batch_sizes": [1, 4], "precisions": ["fp32"], "timing": {"max_time_s": 0.5, "max_repeats": 20},
        "targets": {"online": {"rate_per_s": 5, "latency": {"percentile": 95, "bound_ms": 200}}},
    })  # fmt: skip
    result, _ = plan_spec(workload, Store(shared / "s.db"), progress=False)
    assert result.candidates and {c.precision for c in result.candidates} <= {"fp32", "int8"}
    assert all(c.device_class == "cpu" for c in result.candidates)
    # a bare .onnx runs on ONNX Runtime too: it had been planned at bf16 and on GPUs, which `serve` refuses
    [exported] = [p for p in sorted((shared / "onnx").rglob("*.onnx")) if not p.name.endswith("-int8.onnx")]
    bare = workload.model_copy(update={"name": "bare-onnx", "model": str(exported), "tiny": False})
    result, _ = plan_spec(bare, Store(shared / "s.db"), progress=False)
    assert result.candidates and {c.precision for c in result.candidates} <= {"fp32", "int8"}
    assert all(c.device_class == "cpu" for c in result.candidates)


@pytest.mark.slow
def test_a_gpu_only_instance_filter_plans_the_engine_that_runs_there(
    shared: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`instances: [g4dn.xlarge]` with `engines: [torch, onnxruntime]` ended the whole plan with "no service curve
    matches a catalog instance ... re-run the projection": ONNX Runtime is planned on CPUs only."""
    from rightsize.errors import SpecError

    monkeypatch.setenv("RIGHTSIZE_ONNX_CACHE", str(shared / "onnx"))
    spec = {
        "name": "gpu-only", "model": "distilbert", "tiny": True, "input": {"seq_len": 16}, "batch_sizes": [1],
        "precisions": ["fp32"], "engines": ["torch", "onnxruntime"], "timing": {"max_time_s": 0.3, "max_repeats": 10},
        "targets": {"instances": ["g4dn.xlarge"],
                    "online": {"rate_per_s": 5, "latency": {"percentile": 95, "bound_ms": 200}}},
    }  # fmt: skip
    store = Store(shared / "s.db")
    result, _ = plan_spec(Workload.model_validate(spec), store, progress=False)
    assert result.recommendation is not None and result.recommendation.instance == "g4dn.xlarge"
    assert "engine ONNX Runtime: not planned (CPU only; targets.instances keeps no CPU instance)" in result.why
    with pytest.raises(SpecError, match=r"^targets\.instances: keeps no CPU instance, and engines \['onnxruntime'\]"):
        plan_spec(Workload.model_validate(spec | {"engines": ["onnxruntime"]}), store, progress=False)


def _two_engines(torch_curves: list[object], ort_curves: list[object]) -> object:
    from plan_fixtures import small_catalog

    from rightsize.plan import plan
    from rightsize.workflows.engine_choice import pick_engine

    w = Workload.model_validate({
        "name": "two", "model": "distilbert", "tiny": True,
        "targets": {"online": {"rate_per_s": 10, "latency": {"percentile": 95, "bound_ms": 80}}},
    })  # fmt: skip
    torch_r = plan(w, torch_curves, small_catalog())  # type: ignore[arg-type]
    ort_r = plan(w, ort_curves, small_catalog())  # type: ignore[arg-type]
    best, _ = pick_engine([("torch", torch_r, {}), ("onnxruntime", ort_r, {})])
    return best


def test_why_not_the_other_device_class_looks_across_engines() -> None:
    """sentiment-api: ONNX Runtime's CPU plan won, and "why not the other device class" copied PyTorch's own account,
    judged against PyTorch's GPU pick: "no CPU plan is feasible; e.g. Standard_F2s_v2 ...", a CPU line under a CPU
    recommendation; with PyTorch's GPU plan the winner, it said no CPU plan was feasible beside ONNX Runtime's."""
    from plan_fixtures import cpu_curve, gpu_curve

    slow_cpu, t4, fast_cpu = cpu_curve("c.2x", 900.0, 700.0), gpu_curve("T4", 4.0, 0.2), cpu_curve("c.2x", 20.0, 15.0)
    best = _two_engines([slow_cpu, t4], [fast_cpu])  # ONNX Runtime's CPU plan is the cheaper
    assert best.recommendation.device_class == "cpu"  # type: ignore[attr-defined]
    assert best.alternative.device_class == "gpu"  # type: ignore[attr-defined]
    assert best.why_not[0].startswith("best GPU plan: ") and best.why_not[0].endswith("(engine PyTorch eager)")  # type: ignore[attr-defined]
    pricey_cpu = cpu_curve("c.4x", 20.0, 15.0)  # only the bigger CPU serves it on ONNX Runtime: the T4 wins
    best = _two_engines([slow_cpu, t4], [pricey_cpu])
    assert best.recommendation.device_class == "gpu"  # type: ignore[attr-defined]
    assert best.alternative.device_class == "cpu" and best.why_not[0].startswith("best CPU plan: ")  # type: ignore[attr-defined]
    assert "(engine ONNX Runtime)" in best.why_not[0]  # type: ignore[attr-defined]


def test_the_report_simulates_an_alternative_another_engine_planned() -> None:
    """sentiment-api's report drew no line for the T4 alternative: its rate sweep was simulated over the ONNX Runtime
    plan's curves, which have no GPU, and came out empty. The winner's context carries the alternative's curve."""
    from plan_fixtures import cpu_curve, gpu_curve, small_catalog

    from rightsize.plan import plan
    from rightsize.report.data import compute_sweeps
    from rightsize.workflows.engine_choice import pick_engine
    from rightsize.workflows.plan import sweep_fn

    w = Workload.model_validate({
        "name": "two", "model": "distilbert", "tiny": True,
        "targets": {"online": {"rate_per_s": 10, "latency": {"percentile": 95, "bound_ms": 80}}},
    })  # fmt: skip
    torch_curves, ort_curves = (
        [cpu_curve("c.2x", 900.0, 700.0), gpu_curve("T4", 4.0, 0.2)],
        [cpu_curve("c.2x", 20.0, 15.0)],
    )
    runs = [(e, plan(w, k, small_catalog()), {"curves": k}) for e, k in (("torch", torch_curves), ("onnxruntime",
            ort_curves))]  # type: ignore[arg-type]  # fmt: skip
    best, context = pick_engine(runs)  # type: ignore[arg-type]
    assert best.alternative is not None and best.alternative.device == "T4"
    assert context["curves"] == [*ort_curves, torch_curves[1]]
    sweeps, _ = compute_sweeps(best, sweep_fn(best, context["curves"]))
    t4 = next(s for s in sweeps if "g.t4" in s.label)
    assert all(v is not None for v in t4.p95_ms[:3]), t4  # had been None at every rate


def test_a_cpu_alternative_from_another_engine_says_which_and_validate_serves_it() -> None:
    """sentiment-api: PyTorch's T4 won and ONNX Runtime's c7a.large was the best CPU plan. `--json` gave the
    alternative no model or engine (it read as PyTorch int8), and validate served PyTorch fp32 with the T4's batching,
    saying there was no CPU plan."""
    from plan_fixtures import cpu_curve, gpu_curve, small_catalog

    from rightsize.plan import plan
    from rightsize.workflows.engine_choice import pick_engine
    from rightsize.workflows.validate import _other_engines_cpu_plan

    target = {"online": {"rate_per_s": 10, "latency": {"percentile": 95, "bound_ms": 80}}}
    torch_w = Workload.model_validate({"name": "two", "model": "distilbert", "tiny": True, "targets": target})
    ort_w = torch_w.model_copy(update={"model": "ort:distilbert"})
    torch_r = plan(torch_w, [cpu_curve("c.2x", 900.0, 700.0), gpu_curve("T4", 4.0, 0.2)], small_catalog())
    ort_r = plan(ort_w, [cpu_curve("c.4x", 20.0, 15.0)], small_catalog())
    best, _ = pick_engine([("torch", torch_r, {}), ("onnxruntime", ort_r, {})])
    assert best.recommendation is not None and best.recommendation.device_class == "gpu"
    alt = best.to_dict()["alternative"]
    assert (alt["instance"], alt["model"], alt["engine"]) == ("c.4x", "ort:distilbert", "onnxruntime")
    assert _other_engines_cpu_plan(best) == best.recommendation.instance  # validate re-plans ort:distilbert
    own = pick_engine([("torch", plan(torch_w, [cpu_curve("c.2x", 20.0, 15.0), gpu_curve("T4", 4.0, 0.2)],
                                      small_catalog()), {})])[0]  # fmt: skip
    assert own.to_dict()["alternative"]["model"] == "distilbert" and _other_engines_cpu_plan(own) is None


def test_the_pareto_chart_draws_the_other_engines_best_plans() -> None:
    """sentiment-api's report drew only the winning engine's candidates: PyTorch's best plan (the same c7a.large at
    the same price, slower) and the T4 that "why not" names had no point. The plan keeps each other engine's best
    plan (``engine_plans``) and the chart draws it and the alternative, labelled by engine."""
    from plan_fixtures import cpu_curve, gpu_curve, small_catalog

    from rightsize.plan import plan
    from rightsize.report.charts import pareto_chart
    from rightsize.report.data import build_report_data
    from rightsize.workflows.engine_choice import pick_engine

    target = {"online": {"rate_per_s": 10, "latency": {"percentile": 95, "bound_ms": 80}}}
    torch_w = Workload.model_validate({"name": "two", "model": "distilbert", "tiny": True, "targets": target})
    ort_w = torch_w.model_copy(update={"model": "ort:distilbert"})
    torch_r = plan(torch_w, [cpu_curve("c.2x", 30.0, 22.0), gpu_curve("T4", 4.0, 0.2)], small_catalog())
    ort_r = plan(ort_w, [cpu_curve("c.2x", 20.0, 15.0)], small_catalog())
    best, _ = pick_engine([("torch", torch_r, {}), ("onnxruntime", ort_r, {})])
    assert best.model == "ort:distilbert" and best.alternative is not None and best.alternative.device == "T4"
    d = best.to_dict()
    assert torch_r.recommendation is not None and torch_r.recommendation.device_class == "cpu"
    mine = d["engine_plans"]["torch"]
    assert (mine["instance"], mine["model"], mine["engine"]) == (torch_r.recommendation.instance, "distilbert", "torch")
    svg = pareto_chart(build_report_data(d))
    assert "best plans on the other engines" in svg
    tips = re.findall(r"PyTorch eager: [^<]*", svg)
    assert len(tips) == 2, tips  # the torch recommendation and the T4 alternative, once each
    assert any("T4" in t for t in tips) and any(torch_r.recommendation.instance in t for t in tips)
    assert "among ONNX Runtime&#x27;s plans" in svg
    one = pick_engine([("onnxruntime", plan(ort_w, [cpu_curve("c.2x", 20.0, 15.0)], small_catalog()), {})])[0]
    assert "other engines" not in pareto_chart(build_report_data(one.to_dict()))
