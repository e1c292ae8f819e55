"""A warm re-plan (profile, traced work and memory already stored) never imports torch: it is what makes it fast."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from plan_fixtures import tiny_online_spec

SPEC = tiny_online_spec("warm", 5)

CHECK = """
import sys
from rightsize.cli.app import main
try:
    main(["plan", sys.argv[1], "--store", sys.argv[2], "--json"])
except SystemExit as exc:
    assert not exc.code, exc.code
loaded = sorted(m for m in sys.modules if m == "torch" or m.startswith(("torch.", "transformers")))
print("IMPORTED:" + ",".join(loaded[:5]), file=sys.stderr)
"""


@pytest.mark.slow
def test_warm_replan_imports_no_torch(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from cli_kit import run_cli

    spec, store = tmp_path / "warm.yaml", tmp_path / "s.db"
    spec.write_text(SPEC)
    # the cold plan in this process (its forkserver has torch already); only the warm one needs a fresh process
    code, _, err = run_cli(["plan", str(spec), "--store", str(store), "--json"], capsys)
    assert code == 0, err[-600:]
    warm = subprocess.run([sys.executable, "-c", CHECK, str(spec), str(store)], capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert warm.returncode == 0, warm.stderr[-600:]
    assert "IMPORTED:\n" in warm.stderr or warm.stderr.rstrip().endswith("IMPORTED:"), warm.stderr[-300:]
