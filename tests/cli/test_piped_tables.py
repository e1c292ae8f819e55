"""Piped output (CI logs, `| less`) keeps each table row on one line: no rich 80-column wrapping."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from plan_fixtures import tiny_online_spec
from report_kit import build_store

from rightsize.store import Store


def test_piped_results_table_has_one_line_per_row(tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite"
    a, _ = build_store(store)
    with Store(store) as st:
        n = len(st.measurements(run_id=a))
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    run = subprocess.run([sys.executable, "-m", "rightsize", "results", a, "--store", str(store)],
                         capture_output=True, text=True, timeout=60, env=env)  # fmt: skip
    assert run.returncode == 0, run.stderr
    rows = [line for line in run.stdout.splitlines() if line.startswith("│")]
    first_cells = [line.split("│")[1].strip() for line in rows]
    assert len(rows) == n and all(first_cells), run.stdout[:600]  # no continuation lines with an empty cell


SPEC = tiny_online_spec("piped", 10)


@pytest.mark.slow
def test_piped_plan_table_has_one_line_per_candidate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from cli_kit import run_cli

    spec = tmp_path / "piped.yaml"
    spec.write_text(SPEC)
    # measured in this process first (its forkserver has torch already): the piped run is then a warm re-plan
    code, _, err = run_cli(["plan", str(spec), "--store", str(tmp_path / "s.db"), "--json"], capsys)
    assert code == 0, err[-500:]
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    cmd = [sys.executable, "-m", "rightsize", "plan", str(spec), "--store", str(tmp_path / "s.db"), "--top", "8"]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert run.returncode == 0, run.stderr[-500:]
    rows = [line for line in run.stdout.splitlines() if line.startswith("│")]
    assert len(rows) == 8 and all(line.split("│")[1].strip() for line in rows), run.stdout[:1500]


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("json_flag", [[], ["--json"]], ids=["table", "json"])
def test_output_to_a_full_disk_is_one_line(tmp_path: Path, json_flag: list[str]) -> None:
    """`results --json > file` on a full disk (here /dev/full) ended in print()'s OSError traceback, exit 1."""
    store = tmp_path / "s.sqlite"
    build_store(store)
    with open("/dev/full", "w") as full:
        run = subprocess.run([sys.executable, "-m", "rightsize", "results", "--store", str(store), *json_flag],
                             stdout=full, stderr=subprocess.PIPE, text=True, timeout=60)  # fmt: skip
    assert run.returncode == 2
    assert run.stderr == ("error: cannot write the output (No space left on device); free space or send it elsewhere "
                          "(what the command stored is kept)\n")  # fmt: skip
