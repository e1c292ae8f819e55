"""``rightsize models``: list the zoo (name, family, parameter count, input)."""

from __future__ import annotations

from typing import Any

import typer

from rightsize.cli._common import JSON_OPTION, emit_json, out_console


def model_rows() -> list[dict[str, Any]]:
    from rightsize.models import list_entries

    rows = []
    for e in list_entries():
        if e.kind == "tokens":
            inp = f"tokens [seq_len] (default {e.default_seq_len}), vocab {e.vocab_size}"
        elif e.kind == "image":
            inp = f"image [3, size, size] (default {e.default_image_size})"
        else:
            inp = f"features [{e.features}]"
        rows.append(
            {
                "name": e.name, "family": e.family, "parameters": e.count_params(),
                "tiny_parameters": e.count_params(tiny=True),
                "input": inp, "input_kind": e.kind, "description": e.description, "runnable": not e.meta_only,
            }
        )  # fmt: skip
    return rows


def models(json_out: bool = JSON_OPTION) -> None:
    """List the model zoo (real architectures, random weights, nothing downloaded)."""
    rows = model_rows()
    if json_out:
        emit_json(rows)
        return
    from rich.markup import escape
    from rich.table import Table

    t = Table(title="rightsize model zoo", title_justify="left")
    for col in ("name", "family", "params", "input", "description"):
        t.add_column(col, justify="right" if col == "params" else "left")
    for r in rows:
        t.add_row(
            r["name"], r["family"], f"{r['parameters'] / 1e6:,.1f}M", escape(r["input"]), escape(r["description"])
        )
    out_console.print(t)


def register(app: typer.Typer) -> None:
    app.command("models")(models)
