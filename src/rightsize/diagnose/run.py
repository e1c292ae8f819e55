"""``rightsize diagnose -- CMD``: run CMD (a Python program) with the loop probe inside it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import tempfile
from pathlib import Path

from rightsize.diagnose.probe import LoopFacts
from rightsize.errors import SpecError

BOOT = Path(__file__).parent / "boot"


# After --timeout: SIGTERM (the boot module turns it into a quiet SystemExit, so the program's exit handlers, the
# probe's report among them, run), then SIGINT (a KeyboardInterrupt: a program with its own SIGTERM handler), then
# SIGKILL, each after this many seconds of grace.
GRACE_S = 5.0


def _stop(proc: subprocess.Popen[bytes]) -> int:
    """Stop ``proc`` as gently as it lets us; its exit code."""
    for sig in (signal.SIGTERM, signal.SIGINT):
        proc.send_signal(sig)
        try:
            return proc.wait(timeout=GRACE_S)
        except subprocess.TimeoutExpired:
            continue
    proc.kill()
    return proc.wait()


def run_watched(cmd: list[str], timeout_s: float | None = None) -> tuple[int, LoopFacts | None, bool]:
    """Run ``cmd`` with the probe loaded at start-up: its exit code, what the probe saw (None when the program never
    imported torch or died before exit handlers ran) and whether ``timeout_s`` stopped it (``_stop``)."""
    if not cmd:
        raise SpecError("CMD", "give the command to watch after --, e.g. rightsize diagnose -- python train.py")
    with tempfile.TemporaryDirectory(prefix="rightsize-diagnose-") as tmp:
        out = Path(tmp) / "facts.json"
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(BOOT), *filter(None, [env.get("PYTHONPATH")])])
        env["RIGHTSIZE_DIAGNOSE_OUT"] = str(out)
        try:
            proc = subprocess.Popen(cmd, env=env)
        except FileNotFoundError:
            raise SpecError("CMD", f"{cmd[0]!r} not found; give a Python program, e.g. python train.py") from None
        except OSError as exc:  # a file that is not executable, a folder, an empty name
            raise SpecError("CMD", f"cannot run {cmd[0]!r} ({exc.strerror or exc}); give a Python program, e.g. "
                            "python train.py") from None  # fmt: skip
        stopped = False
        try:
            rc = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            rc, stopped = _stop(proc), True
        except KeyboardInterrupt:  # Ctrl-C reached both: let the program finish its exit handlers
            rc, stopped = _stop(proc), True
        if not out.is_file():
            return rc, None, stopped
        return rc, LoopFacts.from_dict(json.loads(out.read_text(encoding="utf-8"))), stopped
