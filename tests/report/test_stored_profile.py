"""A report rendered later from the store charts the profile its plan was built from."""

from __future__ import annotations

from pathlib import Path

import pytest

from rightsize.profile import Latency, Measurement
from rightsize.report.stored import matching_profile, stored_report_data
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


def test_a_later_bench_does_not_redraw_a_stored_plans_points(tmp_path: Path) -> None:
    """A plan from a contended 311 ms point, then a quiet re-bench at 12 ms: `rightsize report PLAN` charts the 311 ms
    the plan saw (it had charted today's 12 ms beside numbers planned from 311)."""
    with Store(tmp_path / "s.sqlite") as s:
        s.save_env({"id": "env1", "cpu_model": "test cpu", "gpus": []})
        run = s.start_run("bench", name="t", model="distilbert", env_id="env1")
        s.add_measurements(run, [_m(128, 311.0, 1)])
        plan_id = s.save_artifact(None, "plan", {"kind": "online", "model": "distilbert"})
        with s._tx() as c:  # the re-bench lands a second later (stored times have whole seconds)
            c.execute("UPDATE artifacts SET created_at = ? WHERE id = ?", ("2026-01-01T00:00:00+00:00", plan_id))
            c.execute("UPDATE measurements SET created_at = ?", ("2025-12-31T23:59:59+00:00",))
        s.add_measurements(run, [_m(128, 12.0, 1)])
        s.finish_run(run)
        key = {"env": "env1", "input": {"seq_len": 128}, "tiny": False}
        for k in (key, None):
            then = matching_profile(s, "distilbert", "inference", None, k, until="2026-01-01T00:00:00+00:00")
            now = matching_profile(s, "distilbert", "inference", None, k)
            assert then is not None and now is not None
            assert [m.latency_ms.p50 for m in then.ok() if m.latency_ms] == [311.0]
            assert [m.latency_ms.p50 for m in now.ok() if m.latency_ms] == [12.0]
        (plan,) = [a for a in s.artifacts(kind="plan") if a["id"] == plan_id]
        charted = stored_report_data(s, plan).measurements  # what `rightsize report PLAN` draws
        assert [m.latency_ms.p50 for m in charted if m.latency_ms] == [311.0]


def test_a_plan_not_found_names_the_newest_plan_of_either_kind(tmp_path: Path) -> None:
    """Under a newer generative plan the error named the newest serving plan as the newest."""
    from rightsize.errors import NotFoundError
    from rightsize.report.stored import find_plan

    with Store(tmp_path / "s.sqlite") as s:
        old = s.save_artifact(None, "plan", {"kind": "online", "model": "distilbert", "name": "api"})
        new = s.save_artifact(None, "generative-plan", {"model": "llama-7b", "name": "chat"})
        with s._tx() as c:
            c.execute("UPDATE artifacts SET created_at = ? WHERE id = ?", ("2026-01-01T00:00:00+00:00", old))
            c.execute("UPDATE artifacts SET created_at = ? WHERE id = ?", ("2026-01-02T00:00:00+00:00", new))
        with pytest.raises(NotFoundError, match=f"newest plan: run {new}"):
            find_plan(s, "zzzzzzzz")


def test_a_rules_plan_shows_no_measured_profile(tmp_path: Path) -> None:
    """`targets: {kind: classic_ml}` with `model: distilbert` is sized by rules, yet its report showed 'Measured on',
    the stored DistilBERT profile at seq 64 and 'Smallest GPU tier that holds it: 8 GiB' for its rule-of-thumb RAM."""
    from rightsize.catalog import load_catalog
    from rightsize.report.data import RULES_NOTE
    from rightsize.report.html import render_html
    from rightsize.report.markdown import render_markdown

    rec = {"instance_type": "c6i.xlarge", "provider": "aws", "device": "cpu", "device_class": "cpu", "count": 1,
           "precision": "fp64", "provenance": "rule", "feasible": True, "memory_bytes": 6e9,
           "cost_usd_per_hour": 0.17}  # fmt: skip
    payload = {"kind": "rules", "model": "distilbert", "recommendation": rec, "candidates": [rec],
               "why": ["sized by rules, not measured"]}  # fmt: skip
    with Store(tmp_path / "s.sqlite") as s:
        s.save_env({"id": "env1", "cpu_model": "test cpu", "gpus": []})
        run = s.start_run("bench", name="t", model="distilbert", env_id="env1")
        s.add_measurements(run, [_m(64, 13.9, b) for b in (1, 2, 4)])
        s.finish_run(run)
        s.save_artifact(None, "plan", payload)
        (plan,) = s.artifacts(kind="plan")
        data = stored_report_data(s, plan, load_catalog())
    assert data.measurements == [] and data.profile_model is None
    text = render_markdown(data)
    assert "## Measured on" not in text and "GPU tier" not in text and "| cpu | int8 |" not in text
    assert RULES_NOTE in text and RULES_NOTE in render_html(data)
