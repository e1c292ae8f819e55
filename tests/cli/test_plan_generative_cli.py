"""``rightsize plan`` on a generative spec through the real entry point (in-process): the table, the
recommendation and the energy line that says how the GPUs draw."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rightsize.cli.app import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.slow  # > 1.6 s: make test runs it, make test-fast skips it
def test_a_generative_plan_says_its_energy_and_what_the_gpus_do(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RIGHTSIZE_CATALOG", "")
    monkeypatch.setenv("COLUMNS", "200")
    with pytest.raises(SystemExit) as done:
        main(["plan", str(EXAMPLES / "llama-7b-chat.yaml"), "--top", "3"])
    out = capsys.readouterr().out
    assert (done.value.code or 0) == 0
    assert "recommendation: " in out and "kWh/1M" in out
    # the prices' date and source, as an online plan says them (a generative plan had said neither)
    assert re.search(r"^prices 20\d\d-\d\d.* \(skypilot-catalog", out, re.M), out
    line = next(ln for ln in out.splitlines() if ln.startswith("energy: "))
    m = re.search(r"draws (\d+) W, its replicas (\d+)% busy, the GPUs working (\d+)% of it, their math "
                  r"units (\d+)% of that: ([\d.]+) kWh", line)  # fmt: skip
    assert m, line
    compute = int(m.group(4))
    assert 0 <= compute < 60  # decode streams weights: a chat replica's math units idle most of the GPU's time
    assert float(m.group(5)) > 0
