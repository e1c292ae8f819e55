"""`rightsize diagnose --timeout` on a program slow to stop: the probe's report arrives whole or not at all, so the
user gets the diagnosis or the one-line "stopped before the probe reported" error, never half a report."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

import rightsize.diagnose.run
from rightsize.diagnose.run import _read_report, run_watched

# The report is written slower than the grace between the stop signals (json.dump is what the boot module calls).
SLOW_REPORT = """\
import json, pathlib, sys, time
import torch


def slow_dump(obj, fh):
    time.sleep(float(sys.argv[1]))
    fh.write(json.dumps(obj))


json.dump = slow_dump
pathlib.Path(sys.argv[2]).touch()
x = torch.randn(64, 64)
while True:
    x = (x @ x).tanh()
"""


def _timeout_once_ready(ready: Path) -> type[subprocess.Popen[bytes]]:
    """A Popen whose first wait (run_watched's --timeout) times out once the program is in its loop: how long
    ``import torch`` takes on a loaded machine does not decide what the test sees."""

    class Ready(subprocess.Popen[bytes]):
        timed_out = False

        def wait(self, timeout: float | None = None) -> int:
            if Ready.timed_out or timeout is None or timeout > 5:
                return super().wait(timeout)
            Ready.timed_out = True
            deadline = time.monotonic() + 120
            while not ready.exists() and self.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(0.3)
            raise subprocess.TimeoutExpired(self.args, timeout)

    return Ready


@pytest.mark.slow  # a child that imports torch: 6-9 s on 2 busy cores, kept out of test-fast
def test_a_report_slower_than_the_grace_still_arrives_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """SIGINT came 0.6 s into a 1 s report: it had cut the write short, leaving an empty facts.json and a
    JSONDecodeError traceback in the parent; the report now ignores it and gets one grace more before SIGKILL."""
    monkeypatch.setattr(rightsize.diagnose.run, "GRACE_S", 0.6)
    monkeypatch.setattr(subprocess, "Popen", _timeout_once_ready(tmp_path / "ready"))
    prog = tmp_path / "slow_report.py"
    prog.write_text(SLOW_REPORT)
    rc, facts, stopped = run_watched([sys.executable, str(prog), "1.0", str(tmp_path / "ready")], timeout_s=1.0)
    assert stopped == "timeout" and rc in (143, -9)  # SIGKILL may still come while Python shuts down after it
    assert facts is not None and facts.wall_s > 0 and facts.exit_code is None  # the diagnosis of what ran


# --timeout's SIGTERM landing while the probe starts, after torch's own import ran
STOP_WHILE_STARTING = """\
import os, signal
from rightsize.diagnose.probe import LoopProbe

enter = LoopProbe.__enter__


def enter_then_stop(self):
    out = enter(self)
    os.kill(os.getpid(), signal.SIGTERM)
    return out


LoopProbe.__enter__ = enter_then_stop
import torch

raise SystemExit(5)  # not reached: the SIGTERM ends the import
"""


@pytest.mark.slow  # a child that imports torch: 6-9 s on 2 busy cores, kept out of test-fast
def test_a_stop_while_the_probe_starts_still_reports(tmp_path: Path) -> None:
    """The stop had come before the report was registered: no report ("it had not imported torch yet"); then,
    held until it was, it came out of `import torch`, which took torch out of sys.modules and the report's own
    `import torch` ran torch's __init__ again (a RuntimeError at exit, no report)."""
    prog = tmp_path / "stop_while_starting.py"
    prog.write_text(STOP_WHILE_STARTING)
    rc, facts, stopped = run_watched([sys.executable, str(prog)])
    assert (rc, stopped) == (143, None)  # the boot module's quiet SystemExit on SIGTERM
    assert facts is not None and facts.exit_code == 143 and facts.torch_threads


def test_a_cut_report_is_no_report(tmp_path: Path) -> None:
    """Half a JSON file (a report killed mid-write by an older boot module) reads as none, not a traceback."""
    out = tmp_path / "facts.json"
    assert _read_report(out) is None
    out.write_text('{"wall_s": 1.5, "steps"')
    assert _read_report(out) is None
    out.write_text('{"wall_s": 1.5, "steps": 3}')
    report = _read_report(out)
    assert report is not None and report.steps == 3
