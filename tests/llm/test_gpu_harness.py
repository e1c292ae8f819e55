"""The GPU calibration harness (benchmarks/gpu/): its LLM step timer and its store export, run here on the CPU
so the scripts a lent GPU machine runs do not rot between loans."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

from rightsize.profile import Environment, Latency, Measurement
from rightsize.store import Store


def test_llm_steps_times_prefill_and_decode_of_our_decoder(load_benchmark: Callable[[str], ModuleType]) -> None:
    steps = load_benchmark("gpu/llm_steps")
    for model in ("gpt2", "llama-1b"):
        run = steps.measure(model, "tiny", "cpu", "fp32", batches=[1, 2], prompts=[8, 16], context=16, steps=3)
        assert [p["tokens"] for p in run["prefill"]] == [8, 16]
        assert [d["batch"] for d in run["decode"]] == [1, 2]
        for r in run["prefill"] + run["decode"]:
            assert 0 < r["launch_ms"] <= r["wall_ms"] and r["cpu_ms"] > 0
    assert steps.host_us_per_op("cpu", n=200) > 0


def test_host_probe_appends_one_reading_per_call(load_benchmark: Callable[[str], ModuleType], tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    probe = load_benchmark("gpu/host_probe")
    assert 0 < probe.us_per_op("cpu", n=200, repeats=3) < 10_000
    out = tmp_path / "probe.jsonl"
    for label in ("a", "b"):
        monkeypatch.setattr("sys.argv", ["host_probe", "--label", label, "--out", str(out)])
        probe.main()
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["label"] for r in rows] == ["a", "b"] and all(r["cpu_us_per_op"] > 0 for r in rows)


def _store(path: Path, gpus: list[dict[str, object]]) -> None:
    with Store(path) as db:
        for i, gpu in enumerate(gpus):
            env = Environment.from_dict({"id": f"e{i}", "cpu_model": "x", "gpus": [gpu]})
            env_id = db.save_env(env)
            run = db.start_run("bench", model="resnet50", env_id=env_id)
            m = Measurement.from_dict(
                {"model": "resnet50", "mode": "inference", "device": "cuda", "precision": "fp16", "batch_size": 8,
                 "input": {"image_size": 224}, "threads": None, "status": "ok", "env_id": env_id,
                 "latency_ms": Latency(5, 5, 5, 5, 0).to_dict()}
            )  # fmt: skip
            db.add_measurements(run, [m])


def test_export_writes_one_machines_measurements_with_its_fingerprint(
    tmp_path: Path, load_benchmark: Callable[[str], ModuleType], monkeypatch: pytest.MonkeyPatch
) -> None:
    export = load_benchmark("gpu/export")
    _store(tmp_path / "one.db", [{"name": "NVIDIA H100 80GB HBM3", "driver": "580.159.04"}])
    out = tmp_path / "measurements.json"
    monkeypatch.setattr("sys.argv", ["export", str(tmp_path / "one.db"), str(out), "--date", "2026-11-26"])
    export.main()
    data = json.loads(out.read_text())
    assert data["device_class"] == "gpu" and data["date"] == "2026-11-26"
    assert data["env"]["gpus"][0]["name"] == "NVIDIA H100 80GB HBM3"
    assert [m["model"] for m in data["measurements"]] == ["resnet50"]
    _store(tmp_path / "two.db", [{"name": "NVIDIA H100 80GB HBM3"}, {"name": "NVIDIA H200"}])
    monkeypatch.setattr("sys.argv", ["export", str(tmp_path / "two.db"), str(out), "--date", "2026-11-26"])
    with pytest.raises(SystemExit, match="one machine"):
        export.main()
