"""Helpers shared by command modules: JSON output, consoles, common options."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from pathlib import Path
from typing import Any

import typer
from rich.console import Console

# Humans read stderr while --json writes stdout, so piping JSON never mixes in progress text.
# Piped output (CI logs, `| tee`) gets a wide fixed width instead of rich's 80-column default.
# Piped output gets $COLUMNS if set, else 200: wide enough that a table row stays on one line.
_PIPE_WIDTH = int(os.environ["COLUMNS"]) if os.environ.get("COLUMNS", "").isdigit() else 200
err_console = Console(stderr=True, width=None if sys.stderr.isatty() else _PIPE_WIDTH)
out_console = Console(width=None if sys.stdout.isatty() else _PIPE_WIDTH)

JSON_OPTION = typer.Option(False, "--json", help="Print machine-readable JSON on stdout.")
STORE_OPTION = typer.Option(
    None,
    "--store",
    envvar="RIGHTSIZE_STORE",
    help="SQLite results store (default: user cache dir).",
)
CATALOG_OPTION = typer.Option(
    None,
    "--catalog",
    envvar="RIGHTSIZE_CATALOG",
    help="CSV file that adds or overrides catalog rows.",
)


def _default(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return dataclasses.asdict(obj)
    if hasattr(obj, "model_dump"):
        return obj.model_dump(mode="json")
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, set | frozenset | tuple):
        return list(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def to_json(obj: Any) -> str:
    """Serialise dataclasses, pydantic models and paths; NaN/inf become null."""
    return json.dumps(_sanitize(json.loads(json.dumps(obj, default=_default))), indent=2)


def _sanitize(obj: Any) -> Any:
    if isinstance(obj, float) and (obj != obj or obj in (float("inf"), float("-inf"))):
        return None
    if isinstance(obj, dict):
        return {k: _sanitize(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_sanitize(v) for v in obj]
    return obj


def emit_json(obj: Any) -> None:
    sys.stdout.write(to_json(obj) + "\n")
    sys.stdout.flush()
