"""Options whose default is worked out at run time say in --help what it is (typer prints no [default] for None)."""

from __future__ import annotations

import pytest
from cli_kit import run_cli


def _help(command: str, capsys: pytest.CaptureFixture[str]) -> str:
    rc, out, _ = run_cli([command, "--help"], capsys)
    assert rc == 0
    return " ".join(out.replace("│", " ").split())  # rich boxes and wraps the help


def test_memory_seq_says_it_defaults_to_the_models_own(capsys: pytest.CaptureFixture[str]) -> None:
    """`memory --seq` read "Sequence length (token models)." and the run used the zoo's 128 / 2048 unsaid."""
    assert "default: the model's, the input column of `rightsize models`" in _help("memory", capsys)


def test_loadtest_duration_shows_its_default(capsys: pytest.CaptureFixture[str]) -> None:
    """`loadtest --duration` showed no [default] (the run uses 10 s, 5 s a --find-knee step)."""
    text = "".join(_help("loadtest", capsys).split())  # rich may break "--find-knee" at its hyphen
    assert "[default:(10,or5per--find-kneestep)]" in text
