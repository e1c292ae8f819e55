"""A Profile's tables for notebooks: one flat row per measured config, a DataFrame and JSON."""

from __future__ import annotations

import json

import pytest

from rightsize.profile import Latency, Measurement, Profile

ENV = {"id": "box", "cpu_model": "x", "cores_logical": 2, "cores_physical": 2}


def _profile() -> Profile:
    lat = Latency(p50=10.0, p95=12.5, p99=13.0, std=0.5, n=20)
    ok = Measurement(model="distilbert", mode="inference", device="cpu", precision="fp32", batch_size=4, threads=2,
                     input={"seq_len": 64}, status="ok", latency_ms=lat, throughput_per_s=400.0,
                     extra={"ci_converged": False, "contended": True})  # fmt: skip
    failed = Measurement(model="distilbert", mode="inference", device="cpu", precision="int8", batch_size=4,
                         threads=2, input={"seq_len": 64}, status="failed", reason="no quantized engine")  # fmt: skip
    return Profile(model="distilbert", mode="inference", input={"seq_len": 64}, env=ENV, measurements=(ok, failed))  # type: ignore[arg-type]


def test_rows_are_flat_with_latency_in_ms_and_the_run_s_caveats() -> None:
    ok, failed = _profile().rows()
    assert (ok["precision"], ok["batch_size"], ok["p50_ms"], ok["p95_ms"], ok["repeats"]) == ("fp32", 4, 10.0, 12.5, 20)
    assert ok["converged"] is False and ok["contended"] is True and ok["throughput_per_s"] == 400.0
    assert failed["status"] == "failed" and failed["p50_ms"] is None and failed["reason"] == "no quantized engine"


def test_dataframe_and_json_carry_every_measurement() -> None:
    prof = _profile()
    frame = prof.to_dataframe()
    assert list(frame["precision"]) == ["fp32", "int8"] and frame["p95_ms"].iloc[0] == 12.5
    data = json.loads(prof.to_json())
    assert data["model"] == "distilbert" and data["env"]["id"] == "box" and len(data["measurements"]) == 2
    assert data["measurements"][0]["latency_ms"]["p95"] == 12.5


def test_the_short_repr_counts_failed_configs_apart_from_the_ok_ones() -> None:
    """3 fp32 configs ran and 2 int8 ones failed: the repr read "(3 ok: cpu fp32 x3, cpu int8 x2)"."""
    from dataclasses import replace

    from rightsize.profile import Environment

    ok, failed = _profile().measurements
    ms = (*(replace(ok, batch_size=b) for b in (1, 4, 16)), *(replace(failed, batch_size=b) for b in (1, 4)))
    prof = Profile("distilbert", "inference", {"seq_len": 64}, Environment("box", cpu_model="x"), ms)
    assert repr(prof) == ("Profile('distilbert', inference, {'seq_len': 64}, 5 measurements (3 ok: cpu fp32 x3; "
                          "2 failed: cpu int8 x2), env 'box')")  # fmt: skip
    only_failed = replace(prof, measurements=ms[3:])
    assert "2 measurements (0 ok: none; 2 failed: cpu int8 x2)" in repr(only_failed)


def test_the_python_example_prints_each_rows_quality_and_warns_under_the_table(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """examples/python_api.py printed p50 511 ms at batch 1 and 2.23 ms at batch 4 with no quality column, the
    disturbed timing said only inside the plan's reasons."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "examples" / "python_api.py"
    spec = importlib.util.spec_from_file_location("python_api_example", path)
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    example.show_profile(_profile())
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if "precision" in line)
    assert "contended" in header and "converged" in header
    table_end = out.index("warning: ")
    assert "True" in out[:table_end] and "timings of 1 of 1 configs were disturbed" in out[table_end:]
    assert "rightsize bench --fresh" in out[table_end:]
