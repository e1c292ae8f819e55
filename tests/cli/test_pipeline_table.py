"""`rightsize pipeline`'s per-stage table: stage times summed over the workers are labelled as busy time, not wall."""

from __future__ import annotations

import io
from typing import Any

import pytest
from rich.console import Console

import rightsize.cli.pipeline as pipeline_cli

# 200 items in 12.3 s on 2 workers: infer kept the two busy 13.70 s together, more than the run's wall time
PAYLOAD: dict[str, Any] = {
    "model": "distilbert", "engine": "local", "device": "cpu", "precision": "fp32", "items": 200, "wall_s": 12.3,
    "throughput_items_per_s": 16.3, "workers": 2, "batch_size": 32,
    "ids": {"unique": 200, "expected": 200, "missing": 0, "duplicated": 0},
    "stages": {"read": {"wall_s": 0.0, "cpu_s": 0.0}, "preprocess": {"wall_s": 0.0, "cpu_s": 0.0},
               "infer": {"wall_s": 13.70, "cpu_s": 12.9}, "write": {"wall_s": 0.0, "cpu_s": 0.0}},
}  # fmt: skip


def test_stage_times_summed_over_workers_are_not_called_wall(monkeypatch: pytest.MonkeyPatch) -> None:
    """The columns said "wall s" and "share of wall": infer's 13.70 s in a 12.3 s run read as a measuring error."""
    buf = io.StringIO()
    monkeypatch.setattr(pipeline_cli, "out_console", Console(file=buf, width=200))
    pipeline_cli._print(PAYLOAD)
    out = buf.getvalue()
    assert "200 items in 12.3 s" in out
    lines = [line.rstrip() for line in out.splitlines()]
    assert "per-stage busy time, summed over 2 worker(s): can exceed the 12.3 s run" in lines  # one line
    header = next(line for line in out.splitlines() if "stage" in line and "µs/item" in line)
    assert [c.strip() for c in header.strip("┃ ").split("┃")] == [
        "stage", "busy s (all workers)", "CPU s (all workers)", "share of busy", "µs/item (CPU)"
    ]  # fmt: skip
    assert "wall s" not in out and "share of wall" not in out
    infer = next(line for line in out.splitlines() if "infer" in line)
    assert [c.strip() for c in infer.strip("│ ").split("│")] == ["infer", "13.70", "12.90", "100%", "64500.0"]


def test_a_files_one_time_read_and_what_bounds_the_recommendation_are_said(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 60-row file's 0.36 CPU s of imports read as 5,924 µs/item; docs/cluster.md says each candidate's notes say
    which side bounds it, and the text said it for none."""
    from types import SimpleNamespace

    buf = io.StringIO()
    monkeypatch.setattr(pipeline_cli, "out_console", Console(file=buf, width=200))
    pipeline_cli._print(PAYLOAD | {"fixed_stages": {"read": {"wall_s": 0.41, "cpu_s": 0.36}}})
    note = "bound by inference; the input pipeline could feed 160,205 items/s"
    pipeline_cli._print_bound(SimpleNamespace(notes=["spin-up 8.6 min", note]))
    lines = [line.rstrip() for line in buf.getvalue().splitlines()]
    assert lines[-2:] == [
        "read: 0.36 CPU s (0.41 s) more, paid once a run (imports, the reader's setup): not in the µs/item above, "
        "nor in the plan",
        f"input stages, for the recommendation: {note}",
    ]


@pytest.mark.parametrize("address", ["bogus", ""])
def test_a_bad_ray_address_is_refused_before_the_pipeline_starts(
    address: str, tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """`pipeline --ray` was passed on unchecked (bench checked it): '' ran locally, a bad address reached Ray."""
    from cli_kit import run_cli

    spec = tmp_path / "p.yaml"
    spec.write_text("model: simplenet\ntiny: true\nbatch_sizes: [1]\n")
    code, out, err = run_cli(["pipeline", str(spec), "--ray", address, "--store", str(tmp_path / "s.sqlite")], capsys)
    assert (code, out) == (2, "")
    assert err.strip() == ("error: --ray: must be 'auto' or a cluster address HOST:PORT, e.g. 127.0.0.1:6379 or "
                           f"ray://HOST:10001, got {address!r}")  # fmt: skip
