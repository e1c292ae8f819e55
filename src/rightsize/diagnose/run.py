"""``rightsize diagnose -- CMD``: run CMD (a Python program) with the loop probe inside it."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path

from rightsize.diagnose.probe import LoopFacts
from rightsize.errors import SpecError

BOOT = Path(__file__).parent / "boot"


def run_watched(cmd: list[str], timeout_s: float | None = None) -> tuple[int, LoopFacts | None]:
    """Run ``cmd`` with the probe loaded at start-up; its exit code and what the probe saw (None when
    the program never imported torch or died before exit handlers ran)."""
    if not cmd:
        raise SpecError("CMD", "give the command to watch after --, e.g. rightsize diagnose -- python train.py")
    with tempfile.TemporaryDirectory(prefix="rightsize-diagnose-") as tmp:
        out = Path(tmp) / "facts.json"
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(BOOT), *filter(None, [env.get("PYTHONPATH")])])
        env["RIGHTSIZE_DIAGNOSE_OUT"] = str(out)
        try:
            rc = subprocess.run(cmd, env=env, timeout=timeout_s).returncode
        except FileNotFoundError:
            raise SpecError("CMD", f"{cmd[0]!r} not found; give a Python program, e.g. python train.py") from None
        if not out.is_file():
            return rc, None
        return rc, LoopFacts.from_dict(json.loads(out.read_text(encoding="utf-8")))
