"""`rightsize memory` and `bench` on a factory that never returns or raises: one line, exit 2, no traceback, no hang."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from cli_kit import run_cli


def _failing_factories(module: str) -> list[tuple[str, str, str]]:
    """(factory body, RIGHTSIZE_FACTORY_TIMEOUT_S, the one line expected) for ``module:build`` raising, then never
    returning."""
    return [
        ("    raise RuntimeError('weights file missing')\n", "300",
         f"error: model: {module}:build() raised RuntimeError: 'weights file missing'; fix that factory"),
        ("    time.sleep(600)\n", "1",
         f"error: model: {module}:build() has not returned after 1 s; a factory must build and return the "
         "torch.nn.Module (check it for a loop or a blocking call), or allow more with "
         "RIGHTSIZE_FACTORY_TIMEOUT_S=SECONDS"),
    ]  # fmt: skip


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
        "the torch.nn.Module (check it for a loop or a blocking call), or allow more with "
        "RIGHTSIZE_FACTORY_TIMEOUT_S=SECONDS"
    )
    assert "Traceback" not in err


@pytest.mark.slow  # a forkserver importing torch, then one child: ~10 s each
@pytest.mark.parametrize(
    ("body", "limit", "error"), _failing_factories("counted_factory_mod"), ids=["raises", "never-returns"]
)
def test_bench_stops_at_the_first_config_whose_factory_fails(
    tmp_path: Path, store_path: Path, body: str, limit: str, error: str
) -> None:
    """bench measured every config of a failing factory, each in its own child: a table of identical failures
    (exit 1), and for one that never returns each child was killed after 300 s + its timing budget. The factory
    fails in the first config's child; the sweep stops there with the factory's one line, exit 2, and stores
    nothing (a fixed factory is measured again without --fresh)."""
    calls = tmp_path / "calls.txt"
    (tmp_path / "counted_factory_mod.py").write_text(
        f"import time\n\n\ndef build():\n    with open({str(calls)!r}, 'a') as f:\n        f.write('call\\n')\n{body}"
    )
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({
        "name": "t", "model": "counted_factory_mod:build", "input": {"shape": [4]}, "batch_sizes": [1, 2, 4],
        "precisions": ["fp32"], "devices": ["cpu"],
        "timing": {"warmup": 1, "min_repeats": 3, "max_repeats": 8, "max_time_s": 1.0},
    }))  # fmt: skip
    env = os.environ | {"RIGHTSIZE_STORE": str(store_path), "PYTHONPATH": str(tmp_path), "COLUMNS": "200",
                        "RIGHTSIZE_FACTORY_TIMEOUT_S": limit}  # fmt: skip
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "rightsize", "bench", str(spec)], env=env, capture_output=True,
                          text=True, timeout=300)  # fmt: skip
    assert time.monotonic() - started < 120  # the hanging child's own kill came after 304 s
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == "" and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == error
    assert calls.read_text().count("call") == 1  # the first config's child; batches 2 and 4 never started
    listed = subprocess.run([sys.executable, "-m", "rightsize", "results", "--json"], env=env, capture_output=True,
                            text=True, timeout=120)  # fmt: skip
    assert json.loads(listed.stdout or "[]") == []


@pytest.mark.slow  # a forkserver importing torch, then its pool: ~10 s each
@pytest.mark.parametrize(
    ("body", "limit", "error"), _failing_factories("pool_factory_mod"), ids=["raises", "never-returns"]
)
def test_pipeline_workers_whose_factory_fails_end_the_run_in_one_line(
    tmp_path: Path, store_path: Path, body: str, limit: str, error: str
) -> None:
    """The local pipeline builds the model in each pool worker's initializer: one that raised made the Pool start a
    new worker for ever, printing the traceback in a loop (the run never ended); one that never returned hung it."""
    (tmp_path / "pool_factory_mod.py").write_text(f"import time\n\n\ndef build():\n{body}")
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({"name": "p", "model": "pool_factory_mod:build", "input": {"shape": [4]},
                                    "batch_sizes": [1]}))  # fmt: skip
    env = os.environ | {"RIGHTSIZE_STORE": str(store_path), "PYTHONPATH": str(tmp_path), "COLUMNS": "200",
                        "RIGHTSIZE_FACTORY_TIMEOUT_S": limit}  # fmt: skip
    proc = subprocess.run([sys.executable, "-m", "rightsize", "pipeline", str(spec), "--items", "8", "--workers", "2"],
                          env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and proc.stderr.strip().splitlines()[-1] == error


@pytest.mark.slow  # torch import and a 2 s limit: ~8 s
def test_serve_on_a_factory_that_never_returns_exits_2_in_one_line(tmp_path: Path) -> None:
    """serve builds the model off the main thread, where no timer reaches the factory: it hung for ever, and SIGTERM
    (the server's drain) could not stop it."""
    (tmp_path / "serve_hang_mod.py").write_text("import time\n\n\ndef build():\n    time.sleep(600)\n")
    env = os.environ | {"PYTHONPATH": str(tmp_path), "RIGHTSIZE_FACTORY_TIMEOUT_S": "1", "COLUMNS": "200"}
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "rightsize", "serve", "serve_hang_mod:build", "--shape", "4",
                           "--port", "0"], env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert time.monotonic() - started < 60  # its sleep is 600 s
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == (
        "error: model: serve_hang_mod:build has not loaded after 2 s; a factory must build and return the "
        "torch.nn.Module (check it for a loop or a blocking call), or allow more with "
        "RIGHTSIZE_FACTORY_TIMEOUT_S=SECONDS"
    )


@pytest.mark.slow  # a pool of 2 workers importing torch: seconds
def test_pipeline_workers_whose_model_fails_a_batch_end_the_run_in_one_line(tmp_path: Path, store_path: Path) -> None:
    """A model whose forward takes one item at a time: the local pool's worker failure reached the driver as a
    72-line RemoteTraceback, exit 1."""
    (tmp_path / "pool_batch_mod.py").write_text(
        "import torch\n\n\nclass One(torch.nn.Linear):\n    def forward(self, x):\n        if x.shape[0] != 1:\n"
        "            raise ValueError(f'only batch 1 supported, got {x.shape[0]}')\n        return super().forward(x)"
        "\n\n\ndef build():\n    return One(4, 2)\n"
    )
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({"name": "p", "model": "pool_batch_mod:build", "input": {"shape": [4]},
                                    "batch_sizes": [8]}))  # fmt: skip
    env = os.environ | {"RIGHTSIZE_STORE": str(store_path), "PYTHONPATH": str(tmp_path), "COLUMNS": "200"}
    cmd = [sys.executable, "-m", "rightsize", "pipeline", str(spec), "--items", "16", "--workers", "2"]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-800:]
    assert proc.stderr.strip().splitlines()[-1] == (
        "error: the model failed on a batch of 8 items in a pipeline worker (ValueError: only batch 1 supported, got "
        "8); fix its forward (one output row per item), or pass --batch-size 1 if it takes one item at a time"
    )
