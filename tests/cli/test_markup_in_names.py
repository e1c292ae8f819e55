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


def test_a_url_or_host_with_brackets_is_printed_as_written(capsys: pytest.CaptureFixture[str]) -> None:
    """stderr prints the user's URL, host or path as text: `loadtest 'http://...?a=[/b]'` and `dashboard --host
    '[/x]'` raised MarkupError from their first note."""
    from rightsize.cli._common import err_console

    err_console.print("open loop on http://127.0.0.1:9/v1/predict?a=[/b] [red]x[/red]")  # no MarkupError
    assert "?a=[/b] [red]x[/red]" in capsys.readouterr().err
    rc, _, err = _run(["dashboard", "--host", "[/x]", "--port", "0"], capsys)
    assert rc == 2 and "Traceback" not in err, err
