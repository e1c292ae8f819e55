"""scripts/calibrate_cpu.py runs end to end (tiny model) and writes what the reference evaluation reads."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow  # several seconds: make test runs it, make test-fast skips it
def test_calibrate_cpu_writes_measurements_with_the_environment(tmp_path: Path) -> None:
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import calibrate_cpu
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    out = tmp_path / "cpu.json"
    argv = ["--models", "simplenet", "--tiny", "--precisions", "fp32", "--batches", "1", "--threads", "1",
            "--max-time", "0.2", "--out", str(out)]  # fmt: skip
    assert calibrate_cpu.main(argv) == 0
    d = json.loads(out.read_text())
    assert d["kind"] == "measurements" and d["device_class"] == "cpu"
    assert "hostname" not in d["env"] and d["env"]["physical_cores"] >= 1
    assert [m["status"] for m in d["measurements"]] == ["ok"]
    assert d["measurements"][0]["env_id"] == d["env"]["id"]
