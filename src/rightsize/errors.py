"""One exception hierarchy for everything a user can get wrong.

    RightsizeError              exit code 2 unless said otherwise; message is one line
    ├── SpecError               a field of a spec (or a CLI option) is invalid: names the field path
    ├── NotFoundError           a model, instance, run or file does not exist ("did you mean …")
    ├── UnsupportedError        the request is valid but cannot run here (no CUDA, no ray, …)
    └── RunFailedError          a run was attempted and failed (exit code 1)

The CLI prints ``error: <message>`` on stderr and exits with ``exit_code``; it never shows a
traceback for these. Messages say what was wrong and how to fix it.
"""

from __future__ import annotations

import difflib
import sys
from collections.abc import Iterable

__all__ = [
    "STOP_LINES",
    "NotFoundError",
    "RightsizeError",
    "RunFailedError",
    "SpecError",
    "UnsupportedError",
    "did_you_mean",
    "input_refused",
    "print_stop",
]


class RightsizeError(Exception):
    """Base of every error rightsize reports to a user without a traceback."""

    exit_code: int = 2


class SpecError(RightsizeError):
    """An invalid field: ``SpecError("batch_sizes[0]", "must be >= 1, got -1")``."""

    def __init__(self, field: str, problem: str) -> None:
        self.field = field
        self.problem = problem
        super().__init__(f"{field}: {problem}" if field else problem)

    def __reduce__(self) -> tuple[type[SpecError], tuple[str, str]]:
        """Pickles as (field, problem): a process pool sends a worker's SpecError to its parent intact (the default
        rebuilt it from the message alone and failed on the missing argument)."""
        return type(self), (self.field, self.problem)


class NotFoundError(RightsizeError):
    """A named thing does not exist."""


class UnsupportedError(RightsizeError):
    """Valid input that this machine or installation cannot run."""


class RunFailedError(RightsizeError):
    """A run was attempted and failed."""

    exit_code = 1


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """Return ``" Did you mean 'x'?"`` for the closest choice, or ``""``; a choice that differs only in case or
    surrounding spaces wins (``BF16`` -> ``bf16``)."""
    if not isinstance(name, str):  # a Python caller's 5 for a precision: no suggestion, not an AttributeError here
        return ""
    options = list(choices)
    folded = [c for c in options if c.lower() == name.strip().lower()]
    close = folded or difflib.get_close_matches(name, options, n=1, cutoff=0.5)
    return f" Did you mean '{close[0]}'?" if close else ""


def first_line(exc: BaseException, limit: int = 200) -> str:
    """The first line of ``exc``'s message (its type's name when it has none), at most ``limit`` characters: what a
    one-line error quotes of an exception from the user's model or file. The TorchScript interpreter's message opens
    with "The following operation failed": its cause is the last line ("RuntimeError: mat1 and mat2 ...")."""
    lines = str(exc).strip().splitlines() or [type(exc).__name__]
    if lines[0].startswith("The following operation failed in the TorchScript interpreter"):
        cause = lines[-1].strip()
        return f"TorchScript: {cause.split(': ', 1)[-1]}"[:limit]
    return lines[0][:limit]


def input_refused(
    model: str, seq_len: int | None, image_size: int | None, exc: BaseException, shape: tuple[int, ...] | None = None
) -> BaseException:
    """The one-line error for a model that cannot run the requested input (a sequence past its position table, an
    image too small for its strides, a user model's ``shape`` its forward does not take); anything else is a bug
    and keeps its traceback."""
    if not isinstance(exc, (RuntimeError, ValueError, IndexError)):
        return exc
    if shape is not None:  # a factory, TorchScript or .pt2 model: its input is the shape given, not --seq/--image
        first = first_line(exc)
        return SpecError("input.shape", f"{model} cannot run samples of shape {list(shape)} ({type(exc).__name__}: "
                         f"{first}); give the per-sample shape its forward takes (--shape, or input.shape in a spec; "
                         "--vocab / input.vocab_size for token ids)")  # fmt: skip
    field, what = ("seq", f"{seq_len} tokens") if seq_len else ("image", f"{image_size} px") if image_size else (
        "input", "this input")  # fmt: skip
    first = first_line(exc)
    if "overflow" in first.lower():  # batch x input past a tensor's size: the batch is half of it (it blamed --seq)
        return SpecError("batch", f"{model} at this batch and {what} needs a tensor past what can be sized "
                         f"({type(exc).__name__}: {first}); lower the batch size or the input")  # fmt: skip
    hint = ("token models: at most their position table, e.g. 512 for BERT" if field == "seq" else
            "image models: a config's own image_size (a ViT's 224), or one its strides can shrink")  # fmt: skip
    return SpecError(field, f"{model} cannot run {what} ({type(exc).__name__}: {first}); use a size it takes "
                     f"({hint})")  # fmt: skip


# The line a command printed when Ctrl-C or SIGTERM stopped it. typer turns a KeyboardInterrupt into exit 130 with no
# word (a bench waiting for another sweep's lock ended silently), so the CLI says "interrupted" unless one is here.
STOP_LINES: list[str] = []


def print_stop(line: str) -> None:
    """Say on stderr how Ctrl-C / SIGTERM stopped this command (what was kept): the CLI then adds no "interrupted"."""
    print(line, file=sys.stderr, flush=True)
    STOP_LINES.append(line)
