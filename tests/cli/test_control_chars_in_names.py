"""A run name with a control character (an older version stored them) is written out, never obeyed: an ESC in
`rightsize results` recoloured the terminal, a newline split the row."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from cli_kit import run_cli as _run

from rightsize.report.dashboard import render_path
from rightsize.store import Store

NAME = "red\x1b[31mX\nline2"


def _store(tmp_path: Path) -> tuple[Path, str]:
    store = tmp_path / "s.sqlite"
    with Store(store) as st:
        run = st.start_run("bench", name="ok", model="m")
        st.finish_run(run)
    with sqlite3.connect(store) as db:  # as an older version stored it (the spec now refuses such a name)
        db.execute("UPDATE runs SET name = ?, model = ? WHERE id = ?", (NAME, "m\x1b[0m", run))
    return store, run


def test_results_writes_control_characters_out(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store, _ = _store(tmp_path)
    rc, out, err = _run(["results", "--store", str(store)], capsys)
    assert rc == 0, err
    assert "\x1b" not in out  # the terminal had obeyed it
    cells = "".join(out.replace("│", " ").split())  # a narrow table wraps a long cell
    assert "'red\\x1b[31mX\\nline2'" in cells and "'m\\x1b[0m'" in cells


def test_dashboard_shows_control_characters_written_out(tmp_path: Path) -> None:
    store, run = _store(tmp_path)
    for target in ("/", f"/run/{run}"):
        status, html = render_path(store, target)
        assert status == 200
        assert "\x1b" not in html and "red\x1b" not in html
        assert "&#x27;red\\x1b[31mX\\nline2&#x27;" in html, target
