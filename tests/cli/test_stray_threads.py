"""A model factory that leaves a thread running: the command answers and exits (it had hung after its answer)."""

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
