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
    assert (rc, out) == (130, "") and "interrupted: the configs measured before the stop are stored; nothing " in err
    with Store(store, read_only=True) as st:
        assert not [r for r in st.runs() if r.kind == "plan"]
