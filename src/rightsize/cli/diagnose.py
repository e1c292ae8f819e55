"""``rightsize diagnose -- python train.py``: watch a training or inference loop and print the checklist."""

from __future__ import annotations

import typer

from rightsize.cli._common import JSON_OPTION, emit_json, err_console, out_console


def diagnose_cmd(
    ctx: typer.Context,
    timeout: float | None = typer.Option(None, "--timeout", min=1, help="Stop the program after this many seconds."),
    as_json: bool = JSON_OPTION,
) -> None:
    """Run a Python program and diagnose its loop: data starvation, utilization, memory, batch size, AMP."""
    from rightsize.diagnose import diagnose, render
    from rightsize.diagnose.run import run_watched
    from rightsize.errors import RunFailedError, SpecError

    if ctx.args and ctx.args[0].startswith("-"):
        raise SpecError(
            "CMD", f"No such option: {ctx.args[0]}; put the program after --: rightsize diagnose -- python x.py"
        )
    rc, facts, stopped = run_watched(list(ctx.args), timeout_s=timeout)
    if facts is None:
        if stopped:
            raise RunFailedError(f"the program was stopped after --timeout {timeout:g} s before the probe reported: "
                                 "it had not imported torch yet, or ignored the interrupt; give it longer")  # fmt: skip
        raise RunFailedError(
            f"the program exited {rc} without the probe's report: it never imported torch, or it was killed"
        )
    findings = diagnose(facts)
    if as_json:
        emit_json({"exit_code": rc, "facts": facts.to_dict(), "findings": [f.to_dict() for f in findings]})
    else:
        out_console.print(render(facts, findings), markup=False, highlight=False)
    if stopped:
        err_console.print(f"note: the program was stopped after --timeout {timeout:g} s; the diagnosis covers the "
                          "steps it ran until then")  # fmt: skip
    elif rc != 0:
        err_console.print(f"note: the program exited with code {rc}")


def register(app: typer.Typer) -> None:
    app.command("diagnose", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})(diagnose_cmd)
