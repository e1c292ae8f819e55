"""Awkward user models through the CLI: a factory that leaves a thread running (the command answers and exits: it
had hung after its answer), a BatchNorm1d model trained in bench."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

FACTORY = """
import threading, time
import torch

def make():
    threading.Thread(target=lambda: time.sleep(10**6), name="poller").start()  # non-daemon, never stops
    return torch.nn.Linear(16, 4)
"""


@pytest.mark.slow  # a fresh interpreter importing torch: seconds
def test_memory_exits_though_the_factory_left_a_thread_running(tmp_path: Path) -> None:
    (tmp_path / "noisy.py").write_text(FACTORY)
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "RIGHTSIZE_STORE": str(tmp_path / "s.db")}
    run = subprocess.run([sys.executable, "-m", "rightsize", "memory", "noisy:make", "--shape", "16", "--device",
                          "cpu"], capture_output=True, text=True, timeout=120, env=env)  # fmt: skip
    assert run.returncode == 0, run.stderr[-800:]
    assert "total" in run.stdout
    assert "note: 1 thread(s) the model's code started still run (poller); exiting without waiting" in run.stderr


@pytest.mark.slow  # two measured training configs in a fresh interpreter: seconds
def test_a_batchnorm1d_model_trains_in_bench(tmp_path: Path) -> None:
    """BatchNorm1d in train mode refuses one value per channel, and the per-sample FLOPs were counted on a batch of
    1: every config of every BatchNorm1d model failed ('Expected more than 1 value per channel when training')."""
    import json

    (tmp_path / "bn.py").write_text(
        "import torch\n\n\ndef make():\n    return torch.nn.Sequential(torch.nn.Linear(16, 32), "
        "torch.nn.BatchNorm1d(32), torch.nn.Linear(32, 4))\n"
    )
    spec = tmp_path / "bn.yaml"
    spec.write_text(
        "name: bn\nmodel: bn:make\nmode: training\ninput: {shape: [16]}\nbatch_sizes: [8, 16]\n"
        "precisions: [fp32]\ntiming: {warmup: 2, min_repeats: 3, max_repeats: 5, max_time_s: 1}\n"
    )
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "RIGHTSIZE_STORE": str(tmp_path / "s.db")}
    run = subprocess.run([sys.executable, "-m", "rightsize", "bench", str(spec), "--json"], capture_output=True,
                         text=True, timeout=300, env=env)  # fmt: skip
    assert run.returncode == 0, run.stderr[-800:]
    rows = json.loads(run.stdout)  # one object per config
    assert [r["status"] for r in rows] == ["ok", "ok"], rows
    assert rows[0]["flops_per_sample"] == pytest.approx(rows[1]["flops_per_sample"], rel=0.01)  # per sample
