"""The measuring children's forkserver: a Ctrl-C while it starts leaves one line, not its traceback."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

SCRIPT = """
import sys, time
from rightsize.measure.runner import forkserver_context
forkserver_context(["torch", "transformers.models.bert.modeling_bert"])
print("started", flush=True)
try:
    time.sleep(30)
except KeyboardInterrupt:
    print("interrupted", file=sys.stderr)
    sys.exit(130)
"""


@pytest.mark.slow  # a forkserver importing torch: seconds
def test_ctrl_c_while_the_forkserver_imports_torch_prints_no_traceback() -> None:
    """Ctrl-C reaches the whole process group. The forkserver ignores it only once its preload is imported, so a
    Ctrl-C in those seconds printed a KeyboardInterrupt traceback from inside torch's import."""
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)  # fmt: skip
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "started"
        time.sleep(0.3)  # the server is importing torch now (it takes seconds)
        os.killpg(proc.pid, signal.SIGINT)  # as a terminal's Ctrl-C: every process of the group
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    time.sleep(1.0)  # a server that died of the signal has printed by now
    assert proc.returncode == 130 and err == "interrupted\n", err
