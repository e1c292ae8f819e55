"""`rightsize report RUN` renders the same evidence as `rightsize plan --report` (the plan is stored whole)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from plan_fixtures import tiny_online_spec

SPEC = tiny_online_spec("stored", 10, "precisions: [fp32, int8]\n")


def _charts(html: str) -> dict[str, int]:
    return {
        m.group(1): len(re.findall(r'class="pt[ "]', m.group(2)))
        for m in re.finditer(r'<figure class="chart" data-chart="([^"]+)">(.*?)</figure>', html, re.S)
    }


def _rs(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rightsize", *args], capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_report_run_matches_plan_report(tmp_path: Path) -> None:
    spec, store = tmp_path / "s.yaml", tmp_path / "s.db"
    spec.write_text(SPEC)
    live = tmp_path / "live.html"
    run = _rs("plan", str(spec), "--store", str(store), "--report", str(live), "--json")
    assert run.returncode == 0, run.stderr[-500:]
    n_candidates = json.loads(run.stdout)["n_candidates"]
    stored = tmp_path / "stored.html"
    run = _rs("report", "--store", str(store), "--output", str(stored))
    assert run.returncode == 0, run.stderr[-500:]
    a, b = live.read_text(), stored.read_text()
    assert _charts(a) == _charts(b) and _charts(a)["p95-rate"] > 0  # the same curves, sweeps and points
    assert "pass sweep=" not in b
    memory = re.compile(r'data-chart="memory".*?</figure>', re.S)
    assert (m1 := memory.search(a)) is not None and (m2 := memory.search(b)) is not None
    assert m1.group(0) == m2.group(0)  # the same memory breakdown and tiers
    listed = _rs("results", "--json", "--store", str(store))
    plans = [r for r in json.loads(listed.stdout) if r["kind"] == "plan"]
    assert plans
    from rightsize.store import Store

    with Store(store, read_only=True) as st:
        payload = st.artifacts(kind="plan")[0]["payload"]
    assert len(payload["candidates"]) == n_candidates  # every candidate, CPU ones included
    assert any(c["device_class"] == "cpu" for c in payload["candidates"])
