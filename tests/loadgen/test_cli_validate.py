"""``rightsize validate``: choosing what to serve here, and input errors (the served path: test_compare.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import pytest

from rightsize.cli.app import main
from rightsize.plan import Batching, Candidate, PlanResult
from rightsize.workflows.validate import pick_local_candidate


def cand(
    instance: str, device_class: Literal["cpu", "gpu"], precision: str, batching: Batching | None, feasible: bool = True
) -> Any:
    return Candidate(
        instance=instance, provider="aws", region="us-east-1", device_class=device_class,
        device="cpu" if device_class == "cpu" else "T4", count=1, precision=precision, purchase="on_demand",
        cost_usd_per_hour=1.0, feasible=feasible, provenance="projected", price_date="2025-06-01", batching=batching,
        replicas=2,
    )  # fmt: skip


def result(cands: list[Candidate]) -> PlanResult:
    rec = next((c for c in cands if c.feasible), None)
    return PlanResult("online", "w", "m", {}, rec, cands, [])


def test_a_cpu_recommendation_is_served_as_planned() -> None:
    c = cand("c7i.2xlarge", "cpu", "int8", Batching(4, 3.0))
    picked, batching, precision, why = pick_local_candidate(result([c]))
    assert picked is c and batching == Batching(4, 3.0) and precision == "int8" and "recommendation" in why


def test_a_gpu_recommendation_falls_back_to_the_best_cpu_candidate() -> None:
    gpu = cand("g4dn.xlarge", "gpu", "fp16", Batching(32, 5.0))
    cpu = cand("c6i.2xlarge", "cpu", "fp32", Batching(8, 2.0))
    picked, batching, precision, why = pick_local_candidate(result([gpu, cpu]))
    assert picked is cpu and batching.max_batch == 8 and precision == "fp32" and "needs a GPU" in why


def test_a_cpu_pick_at_a_precision_not_measured_here_gives_way_to_a_measured_one() -> None:
    """int8 projected from fp32 (this machine never ran it) cannot be predicted from a local curve."""
    int8 = cand("Standard_F8s_v2", "cpu", "int8", Batching(1, 0.0))
    fp32 = cand("Standard_F8s_v2", "cpu", "fp32", Batching(1, 0.0))
    picked, _, precision, why = pick_local_candidate(result([int8, fp32]), lambda p: p == "fp32")
    assert picked is fp32 and precision == "fp32" and "not measured here" in why
    picked, _, precision, _ = pick_local_candidate(result([int8, fp32]), lambda p: True)
    assert picked is int8 and precision == "int8"


def test_without_any_cpu_plan_the_gpu_batching_runs_at_fp32() -> None:
    gpu = cand("g4dn.xlarge", "gpu", "fp16", Batching(16, 4.0))
    cpu = cand("c6i.2xlarge", "cpu", "fp32", None, feasible=False)
    picked, batching, precision, why = pick_local_candidate(result([gpu, cpu]))
    assert picked is gpu and batching == Batching(16, 4.0) and precision == "fp32" and "no CPU plan" in why


@pytest.mark.parametrize(
    ("args", "message"),
    [(["--loads", "0.5,1.5"], "--loads"), (["--loads", "x"], "--loads"), (["--loads", ""], "--loads: is empty")],
)  # '' had meant the default levels, and planned and measured for minutes
def test_bad_options_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str) -> None:
    spec = tmp_path / "w.yaml"
    spec.write_text("model: simplenet\n")
    with pytest.raises(SystemExit) as exc:
        main(["validate", str(spec), *args, "--no-store"])
    assert exc.value.code == 2 and message in capsys.readouterr().err


def test_a_spec_without_an_online_target_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "w.yaml"
    spec.write_text("model: simplenet\ntiny: true\n")
    with pytest.raises(SystemExit) as exc:
        main(["validate", str(spec), "--store", str(tmp_path / "s.sqlite")])
    assert exc.value.code == 2 and "targets.online" in capsys.readouterr().err


def test_a_generative_validation_names_what_it_changed_from_the_spec(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lengths past the stand-in's context are cut, int8 is served as fp32, a reduced decoder is a stand-in and a
    busy machine is named: each says so in the report's notes (they had changed what was tested silently)."""
    import numpy as np

    import rightsize.cli.validate as cli_validate
    import rightsize.workflows.validate_generate as vg

    sent: dict[str, Any] = {}

    def fake(model: str, size: str, *, prompts: Any, outputs: Any, **kw: Any) -> dict[str, Any]:
        rng = np.random.default_rng(0)
        sent.update(
            model=model, size=size, prompts=prompts(50, rng), outputs=outputs(50, rng), fractions=kw["fractions"]
        )
        return {}

    monkeypatch.setattr(vg, "validate_generative", fake)
    monkeypatch.setattr(vg, "summarise", lambda reports, which: {})
    monkeypatch.setattr("rightsize.measure.conditions.loadavg_1m", lambda: 64.0)
    spec = tmp_path / "chat.yaml"
    spec.write_text(
        "name: chat\nmodel: llama-1b\ntargets:\n  generative:\n    rate_per_s: 1\n    prompt_tokens: 64\n"
        "    output_tokens: 300000\n    ttft: {percentile: 95, bound_ms: 3000}\n"
        "    tpot: {percentile: 50, bound_ms: 100}\n"
        "    weight_precision: int8\n"
    )
    from rightsize.spec import load_spec

    report = cli_validate._validate_generative(load_spec(spec), spec, None, 1.0, "small", 0, as_json=True)
    assert sent["model"] == "llama-1b" and int(sent["outputs"].max()) < 300000 and sent["fractions"] == vg.LEVELS
    notes = " | ".join(report["notes"])
    assert "output_tokens: up to 300000 asked for" in notes and "prompt_tokens" not in notes
    assert "weight_precision int8 is not served here" in notes and "the machine was busy before the run" in notes
    assert report["stand_in"] and report["served_model"] == "llama-1b small"


def test_size_on_a_spec_that_is_not_generative_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    """`validate small.yaml --size huge` ran, the option (and its bad value) silently ignored."""
    with pytest.raises(SystemExit) as done:
        main(["validate", "examples/sentiment-api.yaml", "--size", "huge"])
    assert done.value.code == 2
    assert capsys.readouterr().err.startswith("error: --size: sizes the decoder a generative spec serves")
