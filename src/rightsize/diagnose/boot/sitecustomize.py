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
import signal
import sys
from contextlib import suppress
from typing import Any

_OUT = os.environ.pop("RIGHTSIZE_DIAGNOSE_OUT", None)  # popped: child processes (loader workers) stay quiet
_STOPS = {signal.SIGTERM, signal.SIGINT}  # how ``diagnose --timeout`` (and Ctrl-C) stop the program


def _start(torch: Any) -> None:
    """Start the probe and register its report with the stop signals held back: a --timeout SIGTERM landing between
    the two had ended the program with the probe running and no report registered ("had not imported torch")."""
    from rightsize.diagnose.probe import LoopProbe

    came: list[int] = []
    try:
        handlers = {sig: signal.signal(sig, lambda signum, _frame: came.append(signum)) for sig in _STOPS}
    except ValueError:  # torch imported off the main thread, where no handler can be set: nothing to hold back
        handlers = {}
    try:
        probe = LoopProbe()
        probe.__enter__()
        atexit.register(_dump, probe, torch)
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    for signum in came[:1]:  # delivered now, to the program's own handler (ours: a quiet SystemExit)
        signal.raise_signal(signum)


def _dump(probe: Any, torch: Any) -> None:
    """Write the report whole or not at all: --timeout's SIGINT and SIGKILL come after a grace whatever the report
    is doing, and one cut mid-write had left half a JSON file (a traceback in the parent, no diagnosis)."""
    with suppress(ValueError):  # the stop already came: a second one must not cut the report short
        for sig in _STOPS:
            signal.signal(sig, signal.SIG_IGN)
    sys.modules.setdefault("torch", torch)  # a stop raised inside `import torch` took it out: no second import
    probe.__exit__(None, None, None)
    part = f"{_OUT}.part"
    with open(part, "w", encoding="utf-8") as fh:
        json.dump(probe.facts().to_dict(), fh)
    os.replace(part, _OUT)  # type: ignore[arg-type]


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
            _start(module)

        loader.exec_module = exec_then_watch  # type: ignore[method-assign]
        return spec


def _exit_on_term(signum: int, frame: Any) -> None:
    """SIGTERM (how ``diagnose --timeout`` stops the program) as a quiet SystemExit: exit handlers, the probe's
    report among them, run, and no KeyboardInterrupt traceback is printed."""
    raise SystemExit(128 + signum)


if _OUT:
    sys.meta_path.insert(0, _OnTorchImport())
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:  # a program's own handler is left alone
        signal.signal(signal.SIGTERM, _exit_on_term)
