"""The profile a plan reads: a sweep stopped by Ctrl-C is not planned from."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from cli_kit import run_cli

from rightsize.measure.env import fingerprint
from rightsize.measure.sweep import SweepResult
from rightsize.store import Store


def test_a_plan_whose_sweep_was_interrupted_stops_and_stores_no_plan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ctrl-C during plan's measuring: it planned from the 1 of 20 configs measured, stored it and exited 0."""
    import rightsize.measure.profile_source as source

    def stopped(*_: Any, **__: Any) -> SweepResult:
        return SweepResult("r1", fingerprint(), interrupted=True)

    monkeypatch.setattr(source, "run_sweep", stopped)
    spec = tmp_path / "s.yaml"
    spec.write_text("model: simplenet\nbatch_sizes: [1, 2]\ndevices: [cpu]\n"
                    "targets: {online: {rate_per_s: 5, latency: {percentile: 95, bound_ms: 100}}}\n")  # fmt: skip
    store = tmp_path / "store.sqlite"
    rc, out, err = run_cli(["plan", str(spec), "--store", str(store)], capsys)
    # no config had finished: it said "the configs measured before the stop are stored" of none
    assert (rc, out) == (130, "") and "interrupted: no config finished: none stored; nothing was planned " in err
    with Store(store, read_only=True) as st:
        assert not [r for r in st.runs() if r.kind == "plan"]


def test_a_plan_says_when_it_kept_timings_taken_while_the_machine_was_busy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`bench` printed "N config(s) stored while the machine was busy … reused" but `plan`, reusing the same
    timings, dropped the sweep's notes: docs/measuring.md promised the note in both."""
    import rightsize.measure.profile_source as source
    from rightsize.spec import parse_spec

    busy = "2 config(s) stored while the machine was busy, and other work holds 67% of its cores now: reused"

    def swept(*_: Any, **__: Any) -> SweepResult:
        return SweepResult("r1", fingerprint(), notes=["power not measured", busy], busy_notes=[busy])

    monkeypatch.setattr(source, "run_sweep", swept)
    with Store(tmp_path / "store.sqlite") as store:
        source.ensure_profile(parse_spec({"model": "simplenet", "tiny": True}), store, progress=False)
    err = capsys.readouterr().err
    # every other note of the sweep too, as bench prints them (a failed batch, a skipped thread count had been dropped)
    assert f"note: {busy}\n" in err and "note: power not measured\n" in err
