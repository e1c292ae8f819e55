"""Without --ray nothing about Ray is imported: the CLI, `bench` and a local `pipeline` run keep it out."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

_PROBE = """
import sys
from rightsize.cli.app import main, _register
_register()
assert "ray" not in sys.modules, "importing the CLI imported ray"
for argv in {argvs!r}:
    try:
        main(argv)
    except SystemExit as exc:
        assert exc.code == 0, (argv, exc.code)
print("RAY_IMPORTED=" + str(any(m == "ray" or m.startswith("ray.") for m in sys.modules)))
"""


@pytest.mark.slow
def test_bench_and_pipeline_without_ray_never_import_ray(tmp_path: Path) -> None:
    spec = tmp_path / "tiny.yaml"
    timing = {"warmup": 1, "min_repeats": 3, "max_repeats": 5, "max_time_s": 0.5}
    spec.write_text(json.dumps({"model": "simplenet", "tiny": True, "batch_sizes": [2], "timing": timing}))
    db = str(tmp_path / "s.sqlite")
    argvs = [["bench", str(spec), "--json", "--store", db],
             ["pipeline", str(spec), "--items", "200", "--workers", "1", "--json", "--store", db]]  # fmt: skip
    script = tmp_path / "probe.py"  # a file, so forkserver children can re-import __main__ safely
    script.write_text(
        "if __name__ == '__main__':\n" + "".join(f"    {line}\n" for line in _PROBE.format(argvs=argvs).splitlines())
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "RAY_IMPORTED=False" in done.stdout
