"""`rightsize report RUN` renders the same evidence as `rightsize plan --report` (the plan is stored whole)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from plan_fixtures import tiny_online_spec

SPEC = tiny_online_spec("stored", 10, "precisions: [fp32, int8]\n")


def _charts(html: str) -> dict[str, int]:
    return {
        m.group(1): len(re.findall(r'class="pt[ "]', m.group(2)))
        for m in re.finditer(r'<figure class="chart" data-chart="([^"]+)">(.*?)</figure>', html, re.S)
    }


@pytest.mark.slow
def test_report_run_matches_plan_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """In-process (``run_cli``): what is compared is the two reports, not the process around them."""
    from cli_kit import run_cli

    spec, store = tmp_path / "s.yaml", tmp_path / "s.db"
    spec.write_text(SPEC)
    live = tmp_path / "live.html"
    code, out, err = run_cli(["plan", str(spec), "--store", str(store), "--report", str(live), "--json"], capsys)
    assert code == 0, err[-500:]
    n_candidates = json.loads(out)["n_candidates"]
    stored = tmp_path / "stored.html"
    code, _, err = run_cli(["report", "--store", str(store), "--output", str(stored)], capsys)
    assert code == 0, err[-500:]
    a, b = live.read_text(), stored.read_text()
    assert _charts(a) == _charts(b) and _charts(a)["p95-rate"] > 0  # the same curves, sweeps and points
    assert "pass sweep=" not in b
    memory = re.compile(r'data-chart="memory".*?</figure>', re.S)
    assert (m1 := memory.search(a)) is not None and (m2 := memory.search(b)) is not None
    assert m1.group(0) == m2.group(0)  # the same memory breakdown and tiers
    code, listed, err = run_cli(["results", "--json", "--store", str(store)], capsys)
    assert code == 0, err[-500:]
    plans = [r for r in json.loads(listed) if r["kind"] == "plan"]
    assert plans
    from rightsize.store import Store

    with Store(store, read_only=True) as st:
        payload = st.artifacts(kind="plan")[0]["payload"]
    assert len(payload["candidates"]) == n_candidates  # every candidate, CPU ones included
    assert any(c["device_class"] == "cpu" for c in payload["candidates"])
