"""Started by ``rightsize diagnose -- CMD`` in CMD's Python: watch the whole run, write the facts at exit.

Python imports ``sitecustomize`` at start-up from the path; ``rightsize diagnose`` puts this folder first
on PYTHONPATH and names the output file in RIGHTSIZE_DIAGNOSE_OUT. torch is imported only when the
program itself imports it (a meta-path hook starts the probe then), so a script that never uses torch
runs unchanged.
"""

from __future__ import annotations

import atexit
import json
import os
import sys
from typing import Any

_OUT = os.environ.pop("RIGHTSIZE_DIAGNOSE_OUT", None)  # popped: child processes (loader workers) stay quiet


def _start() -> None:
    from rightsize.diagnose.probe import LoopProbe

    probe = LoopProbe()
    probe.__enter__()

    def dump() -> None:
        probe.__exit__(None, None, None)
        with open(_OUT, "w", encoding="utf-8") as fh:  # type: ignore[arg-type]
            json.dump(probe.facts().to_dict(), fh)

    atexit.register(dump)


class _OnTorchImport:
    """Start the probe right after the program's own ``import torch`` has run torch's __init__."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != "torch" or self not in sys.meta_path:
            return None
        sys.meta_path.remove(self)
        import importlib.util

        spec = importlib.util.find_spec("torch")  # the real finders, without this one
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        exec_module = loader.exec_module

        def exec_then_watch(module: Any) -> None:
            exec_module(module)
            _start()

        loader.exec_module = exec_then_watch  # type: ignore[method-assign]
        return spec


def _exit_on_term(signum: int, frame: Any) -> None:
    """SIGTERM (how ``diagnose --timeout`` stops the program) as a quiet SystemExit: exit handlers, the probe's
    report among them, run, and no KeyboardInterrupt traceback is printed."""
    raise SystemExit(128 + signum)


if _OUT:
    sys.meta_path.insert(0, _OnTorchImport())
    import signal

    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:  # a program's own handler is left alone
        signal.signal(signal.SIGTERM, _exit_on_term)
