"""``rightsize diagnose -- python train.py``: watch a training or inference loop and print the checklist."""

from __future__ import annotations

import math
import sys

import typer

from rightsize.cli._common import emit_json, err_console, out_console

TIMEOUT_EXIT = 124  # the program stopped by --timeout, as coreutils `timeout` exits
INTERRUPT_EXIT = 130  # Ctrl-C, as a shell reports a program SIGINT ended


def exit_code(rc: int, stopped: str | None) -> int:
    """Our exit code for a program that exited with ``rc``: 124 when --timeout stopped it, 130 on Ctrl-C, else the
    program's own (a signal's death, ``-N`` from subprocess, as a shell reports it: 128 + N)."""
    if stopped == "timeout":
        return TIMEOUT_EXIT
    if stopped == "interrupt":
        return INTERRUPT_EXIT
    return 128 - rc if rc < 0 else rc


def _error(message: str) -> None:
    """One ``error:`` line on stderr, as ``rightsize.cli.app.main`` prints a RightsizeError."""
    print(f"error: {message}", file=sys.stderr)


def _timeout_s(timeout: float | None) -> float | None:
    """--timeout in seconds, None for no limit (not given, or inf). Checked here rather than by the option's range:
    its message for nan was "Input should be greater than or equal to 1"."""
    from rightsize.errors import SpecError

    if timeout is None or timeout == math.inf:
        return None
    if math.isnan(timeout):
        raise SpecError("--timeout", "nan is not a number; give seconds, e.g. --timeout 600 (inf: no limit)")
    if timeout < 1:
        raise SpecError("--timeout", f"{timeout:g} s is under 1 s; give seconds, e.g. --timeout 600 (inf: no limit)")
    return timeout


def _ignores_pythonpath(cmd: list[str]) -> bool:
    """Whether ``cmd`` runs python with -I or -E (among the interpreter's own flags, before the script or -m)."""
    if not cmd or "python" not in cmd[0].rsplit("/", 1)[-1]:
        return False
    for arg in cmd[1:]:
        if not arg.startswith("-") or arg in ("-m", "-c"):
            return False
        if arg[1:2] != "-" and ("I" in arg[1:] or "E" in arg[1:]):
            return True
    return False


_LAUNCHERS = ("torchrun", "torch.distributed.run", "torch.distributed.launch", "accelerate", "deepspeed")


def _launcher(cmd: list[str]) -> str | None:
    """The distributed launcher ``cmd`` runs (torchrun, python -m torch.distributed.run, accelerate launch,
    deepspeed), or None."""
    names = [a.rsplit("/", 1)[-1] for a in cmd[:3]]
    return next((n for n in names if n in _LAUNCHERS), None)


def diagnose_cmd(
    ctx: typer.Context,
    timeout: float | None = typer.Option(
        None,
        "--timeout",
        help="Stop the program with SIGTERM after this many seconds (at least 1; inf, the default: no limit) and "
        "diagnose what ran; exit code 124.",
    ),
    as_json: bool = typer.Option(
        False,
        "--json",
        help="Print the diagnosis as one JSON document on stdout; the program's own stdout goes to stderr.",
    ),
) -> None:
    """Run a Python program and diagnose its loop: data starvation, utilization, memory, batch size, AMP.

    CMD, after --, is the program and its arguments, e.g. python train.py --epochs 1. The diagnosis is printed
    whatever the program's exit code. Exit code: the program's own (0 when it succeeded; when it failed, its code,
    as `time` and `nice` do), 124 when --timeout stopped it, 130 on Ctrl-C, 2 for a bad option or a CMD that
    cannot run, 1 when the program succeeded but the probe never reported (it did not import torch)."""
    from rightsize.diagnose import diagnose, render
    from rightsize.diagnose.run import run_watched
    from rightsize.errors import RunFailedError, SpecError

    timeout = _timeout_s(timeout)
    if ctx.args and ctx.args[0].startswith("-"):
        raise SpecError(
            "CMD", f"No such option: {ctx.args[0]}; put the program after --: rightsize diagnose -- python x.py"
        )
    rc, facts, stopped = run_watched(list(ctx.args), timeout_s=timeout, stdout_to_stderr=as_json)
    code = exit_code(rc, stopped)
    if facts is None:
        if stopped == "timeout":
            message = (f"the program was stopped after --timeout {timeout:g} s before the probe reported: it had not "
                       "imported torch yet, or ignored the interrupt; give it longer")  # fmt: skip
        elif stopped == "interrupt":
            message = "the program was interrupted before the probe reported"
        else:
            message = (f"the program was killed by signal {-rc} before the probe reported" if rc < 0 else
                       f"the program exited {rc} without the probe's report: it never imported torch, or it was "
                       "killed")  # fmt: skip
            if _ignores_pythonpath(list(ctx.args)):  # the probe loads through PYTHONPATH: -I / -E skip it
                message += "; python -I or -E ignores PYTHONPATH, through which the probe loads: drop that flag"
        if code == 0:  # the program succeeded, the diagnosis did not: `diagnose` exits 1, and --json says so
            code = RunFailedError.exit_code
        if as_json:  # stdout still holds one JSON document: a script reads why there is no diagnosis
            emit_json({"exit_code": code, "facts": None, "findings": [], "error": message})
        if code == RunFailedError.exit_code and rc == 0:
            raise RunFailedError(message)
        _error(message)
        raise typer.Exit(code)  # the program's failure, not ours: its exit code
    findings = diagnose(facts)
    if facts.batches == 0 and facts.steps == 0 and (launcher := _launcher(list(ctx.args))):
        # torchrun imports torch itself: the probe watched the launcher, and its ranks ran unwatched ("✗ loop: no
        # DataLoader batch ... wrap your loop in watch()" for a loop that had trained)
        err_console.print(f"note: {launcher} starts the training in worker processes the probe does not follow; "
                          "diagnose one rank directly (python train.py, on one device)", highlight=False)  # fmt: skip
    if as_json:
        emit_json({"exit_code": code, "facts": facts.to_dict(), "findings": [f.to_dict() for f in findings]})
    else:
        out_console.print(render(facts, findings), markup=False, highlight=False)
    if stopped == "timeout":
        err_console.print(f"note: the program was stopped after --timeout {timeout:g} s; the diagnosis covers the "
                          f"steps it ran until then (exit code {code})", highlight=False)  # fmt: skip
    elif stopped == "interrupt":
        err_console.print("note: the program was interrupted; the diagnosis covers the steps it ran until then",
                          highlight=False)  # fmt: skip
    elif rc < 0:
        err_console.print(f"note: the program was killed by signal {-rc} (exit code {code})",
                          highlight=False)  # fmt: skip
    elif rc != 0:
        err_console.print(f"note: the program exited with code {rc}", highlight=False)
    if code:
        raise typer.Exit(code)


def register(app: typer.Typer) -> None:
    app.command(
        "diagnose",
        options_metavar="[OPTIONS] -- CMD [ARGS]...",
        context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    )(diagnose_cmd)
