"""Checks on a user's torch module before rightsize calls it: one batch tensor in by position (``check_module``),
a ``torch.export`` program with a dynamic batch (``static_batch``), a factory module imported afresh when its
file changed in a running process (``import_current``), and the factory found in it (``load_factory``)."""

from __future__ import annotations

import contextlib
import importlib
import inspect
import logging
import sys
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rightsize.errors import NotFoundError, SpecError
from rightsize.inputfile import short
from rightsize.models.time_limit import FACTORY_TIMEOUT_ENV, TimeLimitExceeded, factory_timeout_s, time_limit

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


def exported_dims(program: Any) -> tuple[int | str, ...]:
    """The dims a ``torch.export`` program's first input was traced with: ints where fixed, the symbol's name (a
    ``Dim``) where dynamic; () when the graph does not say."""
    users = set(program.graph_signature.user_inputs)
    for node in program.graph.nodes:
        if node.op == "placeholder" and node.name in users:
            dims = getattr(node.meta.get("val"), "shape", ())
            return tuple(int(d) if isinstance(d, int) else str(d) for d in dims)
    return ()


def static_batch(program: Any) -> int | None:
    """The batch size a ``torch.export`` program was traced for when its first input's batch dimension is fixed
    (exported without ``dynamic_shapes``), else None."""
    dims = exported_dims(program)
    return dims[0] if dims and isinstance(dims[0], int) else None


class _DropFallbackWarning(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("Ran into the following error when deserializing")


@contextlib.contextmanager
def quiet_export_load() -> Iterator[None]:
    """Drop torch.export.load's warning (with a 50-line traceback) that it falls back to an older archive layout: it
    then loads the file, and a load that does fail raises."""
    log = logging.getLogger("torch.export")
    drop = _DropFallbackWarning()
    log.addFilter(drop)
    try:
        yield
    finally:
        log.removeFilter(drop)


def check_declared_shape(ref: str, shape: tuple[int, ...], dims: tuple[int | str, ...]) -> None:
    """Refuse a per-sample ``shape`` a saved graph's declared input dims (batch first; ints fixed, names dynamic)
    cannot take: ONNX Runtime's or torch.export's traceback otherwise, at the first forward."""
    rest = dims[1:]
    if not dims or not shape:
        return
    fits = len(shape) == len(rest) and all(
        not isinstance(d, int) or d <= 0 or d == s for d, s in zip(rest, shape, strict=True)
    )
    if fits:
        return
    named = ["batch" if not isinstance(dims[0], int) or dims[0] <= 0 else str(dims[0])]  # "b", "s77": a symbol's
    expected = "[" + ", ".join(named + [str(d) if isinstance(d, int) and d > 0 else str(d or "?") for d in rest]) + "]"
    fixed = [d for d in rest if isinstance(d, int) and d > 0]
    give = (f"--shape {','.join(map(str, fixed))}, or input.shape: {fixed} in a spec" if len(fixed) == len(rest)
            else "--shape, or input.shape in a spec")  # fmt: skip
    raise SpecError("input.shape", f"{ref} cannot run samples of shape {list(shape)}: the graph expects {expected} "
                    f"(batch first); give the per-sample shape it takes ({give})")  # fmt: skip


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


def load_factory(ref: str) -> Callable[[], Any]:
    """The factory ``package.module:factory`` names, imported (within the factory time limit) but not called; a
    NotFoundError or SpecError naming the model when it cannot be imported or is not a function called with no
    arguments."""
    module_name, _, attr = ref.partition(":")
    if not all(p.isidentifier() for p in module_name.split(".")) or not attr.isidentifier():
        raise SpecError("model", f"{short(ref)} is not package.module:factory (dotted Python names, then the name of "
                        "a function that returns the torch.nn.Module), e.g. mypkg.models:build")  # fmt: skip
    limit = factory_timeout_s()
    try:  # our stdout is ours (a --json document): its prints go to stderr; a hang ends after `limit` seconds
        with contextlib.redirect_stdout(sys.stderr), time_limit(limit):
            module = import_current(module_name, ref)
    except TimeLimitExceeded:
        raise SpecError("model", f"importing {module_name!r} has not finished after {limit:g} s; a factory's module "
                        "must import promptly (check it for a loop or a blocking call at module level), or allow more "
                        f"with {FACTORY_TIMEOUT_ENV}=SECONDS") from None  # fmt: skip
    except ImportError as exc:
        top, cwd = module_name.split(".")[0], Path.cwd()
        parts = module_name.split(".")
        ours = {".".join(parts[: i + 1]) for i in range(len(parts))}
        missing = getattr(exc, "name", None)
        if missing and missing not in ours:  # the module was found; something it imports is not installed
            raise NotFoundError(
                f"model: module {module_name!r} imports {missing!r}, which is not installed here; "
                "install it where rightsize runs (pip install ...)"
            ) from None
        here = getattr(exc, "name", None) == top and ((cwd / f"{top}.py").is_file() or (cwd / top).is_dir())
        # the `rightsize` command does not import from the working directory, as `python` would
        fix = f"it is in {cwd}: run with PYTHONPATH={cwd}" if here else "check PYTHONPATH"
        raise NotFoundError(f"model: cannot import module {module_name!r} ({exc}); {fix}") from None
    except Exception as exc:  # the user's module failed while importing: its error, not ours
        raise SpecError("model", f"importing {module_name!r} raised {type(exc).__name__}: {short(str(exc))}; fix "
                        "that module") from None  # fmt: skip
    factory = getattr(module, attr, None)
    if not callable(factory):
        raise NotFoundError(f"model: {module_name!r} has no callable {attr!r}")
    try:  # `os:system` was asked for --shape, then called, then refused: a factory takes no arguments
        inspect.signature(factory).bind()
    except TypeError:
        raise SpecError("model", f"{ref} needs arguments {inspect.signature(factory)}; a factory is called with "
                        "none and returns the torch.nn.Module: point at one, or wrap it") from None  # fmt: skip
    except ValueError:  # a builtin without a signature: its call says what is wrong
        pass
    return factory
