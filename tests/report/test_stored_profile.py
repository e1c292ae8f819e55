"""A report rendered later from the store charts the profile its plan was built from."""

from __future__ import annotations

from pathlib import Path

from rightsize.profile import Latency, Measurement
from rightsize.report.stored import matching_profile
from rightsize.store import Store


def _m(seq: int, p50: float, batch: int) -> Measurement:
    return Measurement(
        "distilbert", "inference", "cpu", "int8", batch, None, {"seq_len": seq}, "ok",  # type: ignore[arg-type]
        latency_ms=Latency(p50, p50 * 1.2, p50 * 1.3, p50, 1.0, 20), throughput_per_s=batch * 1000 / p50,
        env_id="env1",
    )  # fmt: skip


def test_the_plans_own_profile_not_the_largest(tmp_path: Path) -> None:
    """text-classification's report charted 18 points at 13.9 ms from another profile beside a plan sized on 47 ms:
    the largest stored profile of the model won."""
    with Store(tmp_path / "s.sqlite") as s:
        s.save_env({"id": "env1", "cpu_model": "test cpu", "gpus": []})
        run = s.start_run("bench", name="t", model="distilbert", env_id="env1")
        s.add_measurements(run, [_m(128, 47.0, 1)])  # the plan's: one point
        s.add_measurements(run, [_m(64, 13.9, b) for b in (1, 2, 4)])  # a bigger profile of another input
        s.finish_run(run)
        largest = matching_profile(s, "distilbert", "inference", None)
        assert largest is not None and largest.input == {"seq_len": 64}  # without the key: the largest, as before
        key = {"env": "env1", "input": {"seq_len": 128}, "tiny": False}
        own = matching_profile(s, "distilbert", "inference", None, key)
        assert own is not None and own.input == {"seq_len": 128} and own.ok()[0].latency_ms is not None
        assert own.ok()[0].latency_ms.p50 == 47.0
        # a key naming no stored profile (its env gone) falls back to the largest
        assert matching_profile(s, "distilbert", "inference", None, key | {"env": "elsewhere"}) == largest
