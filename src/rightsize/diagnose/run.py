"""``rightsize diagnose -- CMD``: run CMD (a Python program) with the loop probe inside it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Literal

from rightsize.diagnose.probe import LoopFacts
from rightsize.errors import SpecError

BOOT = Path(__file__).parent / "boot"
Stop = Literal["timeout", "interrupt"] | None  # what ended the program early, if anything


# After --timeout: SIGTERM (the boot module turns it into a quiet SystemExit, so the program's exit handlers, the
# probe's report among them, run), then SIGINT (a KeyboardInterrupt: a program with its own SIGTERM handler), then
# SIGKILL, each after this many seconds of grace (one more while the report is being written).
GRACE_S = 5.0


def _stop(proc: subprocess.Popen[bytes], out: Path) -> int:
    """Stop ``proc`` as gently as it lets us; its exit code. The probe writes its report to ``out``.part first."""
    for sig in (signal.SIGTERM, signal.SIGINT):
        proc.send_signal(sig)
        try:
            return proc.wait(timeout=GRACE_S)
        except subprocess.TimeoutExpired:
            continue
    if out.with_name(out.name + ".part").exists():  # the boot module ignores the signals meanwhile: SIGKILL only
        try:
            return proc.wait(timeout=GRACE_S)
        except subprocess.TimeoutExpired:
            pass
    proc.kill()
    return proc.wait()


def _read_report(out: Path) -> LoopFacts | None:
    """The probe's report, None when there is none or it cannot be read (the CLI then says why in one line)."""
    try:
        return LoopFacts.from_dict(json.loads(out.read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError):  # absent, or not the JSON the boot module writes
        return None


def _stderr_fd() -> int:
    """The file descriptor of our stderr (2 when ``sys.stderr`` is replaced by something without one)."""
    sys.stderr.flush()
    try:
        return sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is both an OSError and a ValueError
        return 2


def run_watched(
    cmd: list[str], timeout_s: float | None = None, stdout_to_stderr: bool = False
) -> tuple[int, LoopFacts | None, Stop]:
    """Run ``cmd`` with the probe loaded at start-up: its exit code, what the probe saw (None when the program never
    imported torch or died before exit handlers ran) and what stopped it early (``_stop``): "timeout" when it ran
    past ``timeout_s``, "interrupt" on Ctrl-C, None when it ended by itself. ``stdout_to_stderr`` sends the
    program's stdout to our stderr (``--json``: our stdout holds only the report)."""
    if not cmd or not cmd[0].strip():  # '' had read "cannot run '' (Permission denied)"
        raise SpecError("CMD", "give the command to watch after --, e.g. rightsize diagnose -- python train.py")
    if cmd[0].endswith(".py") and os.path.isfile(cmd[0]) and not os.access(cmd[0], os.X_OK):
        # `diagnose ok.py` with ok.py right here had said "'ok.py' not found" (it is run as a program, not a path)
        raise SpecError("CMD", f"{cmd[0]!r} is a Python file, not a program to run; watch it with "
                        f"rightsize diagnose -- python {' '.join(cmd)}")  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="rightsize-diagnose-") as tmp:
        out = Path(tmp) / "facts.json"
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(BOOT), *filter(None, [env.get("PYTHONPATH")])])
        env["RIGHTSIZE_DIAGNOSE_OUT"] = str(out)
        try:
            proc = subprocess.Popen(cmd, env=env, stdout=_stderr_fd() if stdout_to_stderr else None)
        except FileNotFoundError:
            raise SpecError("CMD", f"{cmd[0]!r} not found; give a Python program, e.g. python train.py") from None
        except OSError as exc:  # a file that is not executable, a folder, an empty name
            if os.path.isdir(cmd[0]):  # exec's "Permission denied" for a folder reads as a permissions problem
                raise SpecError(
                    "CMD", f"{cmd[0]!r} is a directory; give a Python program, e.g. python train.py"
                ) from None
            raise SpecError("CMD", f"cannot run {cmd[0]!r} ({exc.strerror or exc}); give a Python program, e.g. "
                            "python train.py") from None  # fmt: skip
        stopped: Stop = None
        try:
            rc = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            rc, stopped = _stop(proc, out), "timeout"
        except KeyboardInterrupt:  # Ctrl-C reached both: let the program finish its exit handlers
            rc, stopped = _stop(proc, out), "interrupt"
        facts = _read_report(out)
        if facts is None:
            return rc, None, stopped
        if stopped is None:  # it ended by itself: a failure leads the diagnosis (--timeout's SIGTERM exit is ours)
            facts.exit_code = rc
        return rc, facts, stopped
