"""`rightsize memory` on a factory that never returns: one line, exit 2, no traceback, no hang."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from cli_kit import run_cli


@pytest.mark.slow  # a few seconds: make test runs it, test-fast does not
def test_memory_on_a_factory_that_never_returns_exits_2_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "hanging_cli_factory_mod.py").write_text("import time\ndef build():\n    time.sleep(60)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("RIGHTSIZE_FACTORY_TIMEOUT_S", "0.5")
    monkeypatch.setenv("RIGHTSIZE_CATALOG", "")
    started = time.monotonic()
    code, out, err = run_cli(["memory", "hanging_cli_factory_mod:build", "--shape", "4", "--device", "cpu"], capsys)
    assert time.monotonic() - started < 20  # its sleep is 60 s; the rest is the CLI starting
    assert code == 2 and out == ""
    assert err.strip() == (
        "error: model: hanging_cli_factory_mod:build() has not returned after 0.5 s; a factory must build and return "
        "the torch.nn.Module (check it for a loop or a blocking call), or raise RIGHTSIZE_FACTORY_TIMEOUT_S"
    )
    assert "Traceback" not in err
