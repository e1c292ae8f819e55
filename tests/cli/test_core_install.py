"""Every command registers on a core install (no extras): `rightsize --version` had failed there with "this command
needs 'hdrh'", because validate's module imported the load generator (and its HdrHistogram) at import time."""

from __future__ import annotations

import subprocess
import sys

from rightsize.cli.app import INSTALL_HINTS


def test_every_command_registers_without_the_optional_packages() -> None:
    blocked = sorted(INSTALL_HINTS)
    code = (
        "import sys\n"
        f"for name in {blocked!r}:\n"
        "    sys.modules[name] = None  # import raises ModuleNotFoundError, as on a core install\n"
        "from rightsize.cli import app\n"
        "app._register()\n"
        "print(len(app._registered))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert int(out.stdout.strip()) >= 10
