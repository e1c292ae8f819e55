"""Checks on a user's torch module before rightsize calls it: one batch tensor in by position (``check_module``),
a ``torch.export`` program with a dynamic batch (``static_batch``), and a factory module imported afresh when its
file changed in a running process (``import_current``)."""

from __future__ import annotations

import contextlib
import importlib
import sys
import types
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rightsize.errors import SpecError

if TYPE_CHECKING:
    from torch import nn


def check_module(ref: str, model: Any) -> nn.Module:
    """``model`` when rightsize can call it as ``model(x)`` with one batch tensor; a SpecError naming ``ref`` when it
    is not a torch module, takes more than one input, or takes its input by keyword only."""
    from torch import nn as torch_nn

    if not isinstance(model, torch_nn.Module):
        raise SpecError("model", f"{ref} returned {type(model).__name__}, not a torch.nn.Module; point it at a model")
    inputs, keyword_only = required_inputs(model)
    # every config failed with "forward() missing 1 required positional argument", or memory raised a traceback
    if len(inputs) > 1:
        raise SpecError("model", f"{ref}'s forward takes {len(inputs)} inputs ({', '.join(inputs)}); rightsize feeds "
                        "one batch tensor: wrap it in a module whose forward(x) makes the others")  # fmt: skip
    if keyword_only:
        raise SpecError("model", f"{ref}'s forward takes {', '.join(keyword_only)} by keyword only; rightsize passes "
                        "one batch tensor by position: wrap it in a module whose forward(x) passes it on")  # fmt: skip
    return model


def required_inputs(model: nn.Module) -> tuple[list[str], list[str]]:
    """The names of ``model.forward``'s required positional parameters and of its required keyword-only ones (none
    known: two empty lists)."""
    import inspect

    schema = getattr(model.forward, "schema", None)  # a loaded TorchScript module: its signature is (*args)
    if schema is not None:
        return [a.name for a in schema.arguments if a.name != "self" and not a.has_default_value()], []
    try:
        params = inspect.signature(model.forward).parameters.values()
    except (TypeError, ValueError):  # a builtin without a Python signature
        return [], []
    required = [p for p in params if p.default is inspect.Parameter.empty]
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return [p.name for p in required if p.kind in kinds], [
        p.name for p in required if p.kind is inspect.Parameter.KEYWORD_ONLY
    ]


def static_batch(program: Any) -> int | None:
    """The batch size a ``torch.export`` program was traced for when its first input's batch dimension is fixed
    (exported without ``dynamic_shapes``), else None."""
    users = set(program.graph_signature.user_inputs)
    for node in program.graph.nodes:
        if node.op == "placeholder" and node.name in users:
            val = node.meta.get("val")
            dims = getattr(val, "shape", ())
            return int(dims[0]) if dims and isinstance(dims[0], int) else None
    return None


# The checksum of each factory module's file when this process imported it (``models.revision``).
_IMPORTED_AT: dict[str, int | None] = {}


def import_current(module_name: str, ref: str) -> types.ModuleType:
    """``module_name`` imported, or imported again when its file changed since this process imported it. Python
    keeps the first import: in a notebook (the Python API), an edited factory's new checksum keyed the old
    module's memory estimate, which every later plan then reused."""
    from rightsize.models.revision import model_revision

    rev = model_revision(ref)
    module = sys.modules.get(module_name)
    if module is not None and module_name in _IMPORTED_AT and _IMPORTED_AT[module_name] != rev:
        # its bytecode cache is keyed by whole seconds and size: a same-size edit within a second would reload it
        with contextlib.suppress(OSError, TypeError):
            Path(module.__cached__).unlink()
        module = importlib.reload(module)
    else:
        module = importlib.import_module(module_name)
    _IMPORTED_AT[module_name] = rev
    return module
