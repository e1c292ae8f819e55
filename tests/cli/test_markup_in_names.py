"""A name with square brackets is text, not rich markup: `[/bold]` crashed `plan` and then every `results`."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_kit import run_cli as _run

from rightsize.store import Store

NAME = "tag [/bold] end [l](javascript:x)"


def test_results_lists_a_bracketed_name_as_written(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "s.sqlite"
    with Store(store) as st:
        st.start_run("plan", name=NAME, model="[red]m[/red]")
    rc, out, err = _run(["results", "--store", str(store)], capsys)
    assert rc == 0, err  # was rich.errors.MarkupError, exit 1, for the whole store
    assert NAME in out and "[red]m[/red]" in out  # '[l]' was silently dropped
