"""The ``rightsize`` command: registers each command module and turns user errors into exit codes.

Command modules import nothing heavy at import time (torch, ray, fastapi load inside the
command), so ``rightsize --help`` stays instant.
"""

from __future__ import annotations

import contextlib
import errno
import importlib
import os
import signal
import sys

import typer
from typer import Abort, TyperException

from rightsize import __version__
from rightsize.allocator import keep_freed_memory
from rightsize.cli._common import json_stdout
from rightsize.errors import STOP_LINES, RightsizeError

# Order is the order of ``rightsize --help``.
COMMAND_MODULES = [
    "plan",
    "diagnose",
    "bench",
    "memory",
    "finetune",
    "catalog",
    "models",
    "results",
    "env",
    "serve",
    "loadtest",
    "validate",
    "report",
    "dashboard",
    "pipeline",
]

app = typer.Typer(
    name="rightsize",
    help="Pick the cheapest CPU or GPU setup that meets a deep-learning workload's deadline or SLO.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _version(value: bool) -> None:
    if value:
        print(__version__)
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    """rightsize: measure, project, plan, prove."""


_TORCH = "pip install torch==2.13.0 first (pinned: a plain `torch` pulls CUDA wheels on a CPU machine)"
INSTALL_HINTS = {
    "torch": _TORCH,
    "transformers": "pip install 'rightsize[models]'",
    "onnx": "pip install 'rightsize[onnx]'",
    "onnxruntime": "pip install 'rightsize[onnx]'",
    "onnxscript": "pip install 'rightsize[onnx]'",
    "fastapi": "pip install 'rightsize[serve]'",
    "uvicorn": "pip install 'rightsize[serve]'",
    "httpx": "pip install 'rightsize[serve]'",
    "hdrh": "pip install 'rightsize[serve]'",
    "orjson": "pip install 'rightsize[serve]'",
    "ray": "pip install 'rightsize[ray]'",
    "pyarrow": "pip install 'rightsize[ray]'",
    "pandas": "pip install 'rightsize[ray]'",
}


_registered: list[str] = []  # the command modules already on ``app`` (main may run many times in one process)


def _register() -> None:
    if _registered:  # each register() adds its commands again: typer would rebuild every copy on every call
        return
    for name in COMMAND_MODULES:
        qualified = f"rightsize.cli.{name}"
        try:
            module = importlib.import_module(qualified)
        except ModuleNotFoundError as exc:  # a command not built yet is simply absent
            if exc.name == qualified:
                continue
            raise
        module.register(app)
        _registered.append(name)


def _raw_value(args: list[str], opts: list[str]) -> str | None:
    """The text given to an option (``--x V`` or ``--x=V``) in ``args``, the last one given; None when absent."""
    found = None
    for i, a in enumerate(args):
        if a in opts and i + 1 < len(args):
            found = args[i + 1]
        elif "=" in a and a.split("=", 1)[0] in opts:
            found = a.split("=", 1)[1]
    return found


def _usage_line(exc: Exception, args: list[str] | None = None) -> str | None:
    """A usage error as the one line every other bad input gets (click's own is four: usage, a hint, a blank line,
    ``Error: ...``), with where to read the options; None for "no command given", whose help is the answer. A range
    refusing nan ("--max-wait-ms: Input should be greater than or equal to 0": nan is not below 0) says what it is."""
    from typer._click.exceptions import NoArgsIsHelpError, UsageError

    if not isinstance(exc, UsageError) or isinstance(exc, NoArgsIsHelpError) or exc.ctx is None:
        return None
    message = exc.format_message().replace("Invalid value for ", "")  # "'--limit': 0 is not in the range x>=1."
    if message.startswith("'") and "': " in message:  # the option first, as every other error names its field
        name, _, rest = message[1:].partition("': ")
        opts = list(getattr(getattr(exc, "param", None), "opts", None) or [])
        raw = _raw_value(args or [], opts) if opts else None
        if raw is not None and raw.strip().lower().lstrip("+-") == "nan":
            rest = "nan is not a number; give a number in the range --help shows"
        elif raw is not None and rest.startswith("Input should be a valid integer"):
            rest = _whole_number_fix(name, raw, getattr(exc, "param", None))
        message = f"{name}: {rest}"
    names, ctx = [], exc.ctx
    while ctx.parent is not None:  # the subcommands' names; the root's would be argv[0]'s ("python -m pytest")
        names.append(ctx.info_name or "")
        ctx = ctx.parent
    command = " ".join(["rightsize", *reversed(names)])
    return f"{message.rstrip('.')} (options: {command} --help)"


def _whole_number_fix(name: str, raw: str, param: object) -> str:
    """A whole-number option given ``1e9`` or ``4.5`` (pydantic's "Input should be a valid integer, unable to parse
    string as an integer", while a float option beside it takes ``50e6``): the value in digits to give instead."""
    from rightsize.inputfile import short

    try:
        value = float(raw)
    except ValueError:
        default = getattr(param, "default", None)
        example = f", e.g. {name} {default}" if isinstance(default, int) and not isinstance(default, bool) else ""
        return f"{short(raw)} is not a whole number; give one in digits{example}"
    if value != value or value in (float("inf"), float("-inf")):
        return f"{short(raw)} is not a whole number; give one in digits"
    if value.is_integer():
        n, lo, hi = int(value), getattr(param, "min", None), getattr(param, "max", None)
        if (lo is None or n >= lo) and (hi is None or n <= hi):
            return f"takes a whole number in digits, not {short(raw)}; give {name} {n}"
        bounds = f"{lo} to {hi}" if lo is not None and hi is not None else f">= {lo}" if lo is not None else f"<= {hi}"
        return f"takes a whole number in digits, not {short(raw)}, and {n} is past its range ({bounds})"
    low = int(value // 1)
    return f"{short(raw)} is not a whole number; give {name} {low} or {name} {low + 1}"


_TERMINATED: list[int] = []  # the signal that stopped this command, once one has


def _stop_as_ctrl_c(signum: int, _frame: object) -> None:
    """SIGTERM (systemd, docker stop, kill) ended the process on the spot: a sweep's run stayed 'running' for
    every reader and no cleanup ran. Raised as Ctrl-C instead, so the same cleanup runs; the exit is 143."""
    _TERMINATED.append(signum)
    raise KeyboardInterrupt


_NO_SPACE = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}


def _drop_stdout() -> None:
    """Point stdout at /dev/null: what it still buffers would fail again at exit ("Exception ignored ...")."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def main(argv: list[str] | None = None) -> None:
    """Entry point of the console script; exits with 0 ok, 1 failed run, 2 bad input."""
    keep_freed_memory()  # before any thread allocates: glibc fixes its arena limit then (rightsize.allocator)
    STOP_LINES.clear()  # one command's (the tests call main in one process)
    if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:  # servers install their own (uvicorn drains)
        signal.signal(signal.SIGTERM, _stop_as_ctrl_c)
    try:
        _main(argv)
    except SystemExit as exc:
        code = 128 + _TERMINATED[0] if _TERMINATED and exc.code in (130, 0, None) else exc.code
        if argv is None:  # the console script, not a caller's process (the tests call main(args))
            _leave_stray_threads(code)
        sys.exit(code)


def _leave_stray_threads(code: object) -> None:
    """Exit now when threads the user's code started (a model factory's) are still running: Python waits for every
    non-daemon thread at exit, and `memory`, `plan` and `serve` had printed their answer and then hung for good."""
    import threading

    main = threading.main_thread()
    # ours are named rightsize-* (an executor's idle workers, which end at exit)
    strays = [t for t in threading.enumerate()
              if t is not main and t.is_alive() and not t.daemon and not t.name.startswith("rightsize-")]  # fmt: skip
    if not strays:
        return
    names = ", ".join(sorted({t.name for t in strays}))
    print(f"note: {len(strays)} thread(s) the model's code started still run ({names}); exiting without waiting "
          "for them", file=sys.stderr)  # fmt: skip
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code if isinstance(code, int) else (0 if code is None else 1))


def _main(argv: list[str] | None) -> None:
    args = sys.argv[1:] if argv is None else argv
    ours = args[: args.index("--")] if "--" in args else args  # after "--": diagnose's program and its options
    try:
        _register()  # inside: a signal while the commands import is a stop, not a traceback
        with json_stdout("--json" in ours):
            rc = app(args=argv, standalone_mode=False)
    except RightsizeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except (Abort, KeyboardInterrupt):
        if not STOP_LINES:
            print("interrupted", file=sys.stderr)
        sys.exit(130)
    except ModuleNotFoundError as exc:  # an optional dependency this command needs is not installed
        package = (exc.name or "").split(".")[0]
        if package not in INSTALL_HINTS:
            raise
        print(
            f"error: this command needs {package!r}, which is not installed: {INSTALL_HINTS[package]}", file=sys.stderr
        )
        sys.exit(1)
    except OSError as exc:
        if exc.errno not in _NO_SPACE:
            raise
        # stdout (a table, a --json document) on a full disk or /dev/full: a traceback from print() had been all
        _drop_stdout()
        where = f"{exc.filename}" if exc.filename else "the output"
        print(f"error: cannot write {where} ({exc.strerror}); free space or send it elsewhere (what the command "
              "stored is kept)", file=sys.stderr)  # fmt: skip
        sys.exit(2)
    except TyperException as exc:  # typer's own click: usage errors, bad or missing options (exit 2)
        line = _usage_line(exc, ours)
        show = getattr(exc, "show", None)
        if line is not None:
            print(f"error: {line}", file=sys.stderr)
        elif callable(show):
            show()
        else:
            print(f"error: {exc}", file=sys.stderr)
        sys.exit(int(getattr(exc, "exit_code", 2) or 2))
    if rc == 130 and not STOP_LINES:  # typer's exit for a KeyboardInterrupt no command caught: it says nothing
        print("interrupted", file=sys.stderr)
    sys.exit(rc if isinstance(rc, int) else 0)
