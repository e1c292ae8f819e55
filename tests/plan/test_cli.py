"""`rightsize plan` end to end on the paths that need no measuring, and the no-torch rule."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rightsize", *args], capture_output=True, text=True, timeout=120, cwd=ROOT
    )


@pytest.mark.slow  # ~2 s on 2 cores: kept out of make test-fast
def test_rules_example_json(tmp_path: Path) -> None:
    out = _run("plan", "examples/gradient-boosting.yaml", "--json", "--top", "3", "--store", str(tmp_path / "s.db"))
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    rec = d["recommendation"]
    assert d["kind"] == "rules" and rec["device_class"] == "cpu" and rec["feasible"]
    assert rec["provenance"] == "rule" and rec["price_date"]
    assert len(d["candidates"]) == 3 and d["why"] and d["why_not"]
    text = " ".join(_run("plan", "examples/gradient-boosting.yaml", "--store", str(tmp_path / "s.db")).stdout.split())
    assert "ranked by rule: holds the data in RAM, has the wanted vCPUs, is of the wanted family" in text


def test_spec_without_targets_is_a_user_error(tmp_path: Path) -> None:
    spec = tmp_path / "no-targets.yaml"
    spec.write_text("model: distilbert\n")
    out = _run("plan", str(spec), "--store", str(tmp_path / "s.db"))
    assert out.returncode == 2 and "targets" in out.stderr and "Traceback" not in out.stderr


@pytest.mark.parametrize("name", sorted(p.name for p in (ROOT / "examples").glob("*.yaml") if p.name != "quick.yaml"))
def test_examples_are_valid_specs_with_targets(name: str) -> None:
    from rightsize.plan import plan_kind
    from rightsize.spec import load_spec

    w = load_spec(ROOT / "examples" / name)
    assert w.targets is not None
    kind = plan_kind(w.targets)
    assert kind in ("online", "batch", "training", "rules", "generative")
    if kind not in ("rules", "generative"):  # generative plans project from the shape: nothing to measure
        # quick to measure on 2 cores: few configs, CPU only
        assert w.devices == ["cpu"] and len(w.batch_sizes) * len(w.precisions) <= 6


def test_planning_imports_no_torch() -> None:
    code = (
        "import sys, rightsize.plan, rightsize.plan.sim, rightsize.cli.plan; "
        "from rightsize.spec import parse_spec; from rightsize.catalog import load_catalog; "
        "spec = parse_spec({'model': 'x', 'targets': {'kind': 'etl', 'data_gb': 5}}); "
        "r = rightsize.plan.plan(spec, [], load_catalog()); "
        "assert r.recommendation is not None; print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
