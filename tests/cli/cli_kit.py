"""Run the CLI in-process: ``from cli_kit import run_cli`` (tests/cli is on pytest's pythonpath)."""

from __future__ import annotations

import pytest

from rightsize.cli.app import main


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of ``rightsize ARGV``."""
    with pytest.raises(SystemExit) as exc:
        main(argv)
    out, err = capsys.readouterr()
    return int(exc.value.code or 0), out, err
