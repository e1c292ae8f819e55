"""``rightsize plan`` on a generative spec through the real entry point (in-process): the table, the
recommendation and the energy line that says how the GPUs draw."""

from __future__ import annotations

import json
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


ONE_TOKEN_SPEC = """name: one-token
model: llama-7b
targets:
  providers: [aws]
  instances: [g6.xlarge, c7i.48xlarge, m7i.4xlarge]
  generative:
    rate_per_s: 5
    prompt_tokens: {uniform: [200, 800]}
    output_tokens: 1
    ttft: {percentile: 95, bound_ms: 2000}
    tpot: {percentile: 50, bound_ms: 60}
"""


def _plan(tmp_path: Path, *args: str) -> None:
    spec = tmp_path / "one.yaml"
    spec.write_text(ONE_TOKEN_SPEC)
    with pytest.raises(SystemExit) as done:
        main(["plan", str(spec), "--store", str(tmp_path / "s.sqlite"), *args])
    assert (done.value.code or 0) == 0


@pytest.mark.slow  # ~3 s: make test runs it, make test-fast skips it
def test_one_output_token_prints_no_tpot_and_a_cpu_row_no_tensor_parallel_degree(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """output_tokens: 1 printed "TPOT p50 0.0 ms" in the table and "TPOT p50 0.0 ms (bound 60)" in the reasons, as if
    TPOT were judged; a c7i.48xlarge row printed "tp 1" (in --json too); "1 instance options cannot serve it"."""
    monkeypatch.setenv("RIGHTSIZE_CATALOG", "")
    monkeypatch.setenv("COLUMNS", "200")
    _plan(tmp_path)
    out = capsys.readouterr().out
    cpu = next(ln for ln in out.splitlines() if "c7i.48xlarge" in ln and "│" in ln)
    cells = [c.strip() for c in cpu.strip("│ ").split("│")]
    assert cells[2] == "-" and cells[7] == "n/a", cells  # tp, TPOT p50
    gpu = next(ln for ln in out.splitlines() if "g6.xlarge" in ln and "│" in ln)
    assert [c.strip() for c in gpu.strip("│ ").split("│")][2] == "1"
    assert "0.0 ms" not in out and "(bound 60)" not in out
    assert re.search(r"^best CPU plan: .*TTFT \d+ ms, TPOT n/a \(1 output token\)$", out, re.M), out
    assert re.search(r"^1 instance option cannot serve it, e\.g\. m7i\.4xlarge: one request alone: TTFT p95 \d+ ms "
                     r"\(bound 2000\)$", out, re.M), out  # fmt: skip
    assert "TPOT does not apply (shown as n/a)" in out
    _plan(tmp_path, "--json")
    got = json.loads(capsys.readouterr().out)
    tps = {c["instance"]: c["tp"] for c in got["candidates"]}
    assert tps == {"g6.xlarge": 1, "c7i.48xlarge": None} and got["best_cpu"]["tp"] is None
