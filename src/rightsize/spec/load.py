"""Load a spec from YAML and turn pydantic's errors into one line naming the field path."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from typing import Any, get_args

from pydantic import BaseModel, ValidationError

from rightsize.errors import NotFoundError, SpecError, did_you_mean
from rightsize.inputfile import load_yaml, not_a_file, read_user_text, short
from rightsize.spec.schema import Workload


def _field_path(loc: tuple[int | str, ...]) -> str:
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        elif part.startswith("function-") or part in {"literal", "int", "float", "str", "none", "list[...]"}:
            continue  # pydantic's union-branch labels, not fields
        else:
            part = part if part.isprintable() and part.strip() == part else repr(part)  # a key of "\n": one line
            path += f".{part}" if path else part
    return path


def spec_error_from(exc: ValidationError) -> SpecError:
    """The first error, as ``field.path[i]: problem``; also says how many more there are. An unknown field comes
    first: a misspelt key (``rate_per_sec``) also makes its right spelling "missing", and the typo is the cause."""
    errors = exc.errors(include_url=False)
    first = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
    path = _field_path(tuple(first["loc"]))
    msg = str(first["msg"]).removeprefix("Value error, ")
    moved = None  # an unknown key that is a field of another section: that section's "missing" field is this one
    if first["type"] == "extra_forbidden":
        parent = tuple(first["loc"][:-1])
        missing = [str(e["loc"][-1]) for e in errors if e["type"] == "missing" and tuple(e["loc"][:-1]) == parent]
        known = missing or _fields_at(parent)  # a sibling left missing, else every field of that section
        hint = did_you_mean(str(first["loc"][-1]), known)
        home = _belongs_under(str(first["loc"][-1]), first.get("input"), parent)
        moved = first["loc"][-1] if home else None
        msg = (f"unknown field here; {home}" if home else f"unknown field;{hint}" if hint else
               "unknown field; remove it or check its spelling")  # fmt: skip
    elif first["type"] == "missing":
        msg = "required field is missing"
    elif first["type"] == "model_type":  # "Input should be a valid dictionary or instance of LatencyBound" (a class)
        msg = "must be a mapping of its fields" + _example(tuple(first["loc"]))
    elif first["type"] == "too_long":  # pydantic's "List should have at most 5 items after validation, not 6"
        msg = f"has {(first.get('ctx') or {}).get('actual_length', 'too many')} values"
    # Our validators report list indices in the message ("[0] must be ..."); join them to the path.
    given = first.get("input")
    head, sep, rest = msg.partition(": ")
    if msg.startswith("["):
        index, _, rest = msg.partition(" ")
        path, msg = path + index, rest
    elif sep and isinstance(given, dict) and head in given:  # a whole-section check naming one of its fields
        path, msg = f"{path}.{head}" if path else head, rest
    elif (
        "input" in first
        and first["type"] not in {"missing", "extra_forbidden"}
        and ", got " not in msg
        and not msg.startswith(short(given))  # our message began with the value
        and not isinstance(given, (dict, list))  # a whole section says nothing the message does not
    ):
        msg = f"{msg}, got {short(given)}"
    # named, so one fix-and-rerun takes them all (it said "1 more"); not the fields a misspelt key left missing
    typo_parent = tuple(first["loc"][:-1]) if first["type"] == "extra_forbidden" else None
    others = [e for e in errors if e is not first and not _left_missing(e, typo_parent, moved)]
    names = list(dict.fromkeys(_field_path(tuple(e["loc"])) or "spec" for e in others))
    more = f" (and {len(others)} more: {', '.join(names[:3])}{', ...' if len(names) > 3 else ''})" if others else ""
    return SpecError(path or "spec", msg + _fix(first) + more)


def _left_missing(error: Any, parent: tuple[Any, ...] | None, moved: Any) -> bool:
    """A field reported missing only because the first error's key stands for it: misspelt beside it (``parent``),
    or written in the wrong section (``moved``, its name)."""
    return error["type"] == "missing" and (tuple(error["loc"][:-1]) == parent or error["loc"][-1] == moved)


def _section(loc: tuple[int | str, ...]) -> tuple[Any, Any] | None:
    """(model class, field info) of the section at ``loc`` of a Workload (list indices and union branch labels
    skipped; the Workload itself and no info at the top); None when ``loc`` names no field."""
    cls: Any = Workload
    info = None
    for part in loc:
        fields = getattr(cls, "model_fields", None)
        if isinstance(part, int) or not fields:
            continue  # a list index, or a union branch's label
        if part not in fields:
            return None
        info = fields[part]
        cls = _model_in(info.annotation)
    return cls, info


def _example(loc: tuple[int | str, ...]) -> str:
    """For the section at ``loc`` of a Workload: ", e.g. {...}" from its description, else its fields by name."""
    if (found_section := _section(loc)) is None:
        return ""
    cls, info = found_section
    found = re.search(r"e\.g\. (\{[^}]*\})", (info.description or "") if info else "")
    if found:
        return f", e.g. {found.group(1)}"
    fields = getattr(cls, "model_fields", None) or {}
    names = sorted(fields, key=lambda n: not fields[n].is_required())  # the required ones first
    return f" ({', '.join(names[:6])}{', ...' if len(names) > 6 else ''})" if names else ""


def _fields_at(loc: tuple[int | str, ...]) -> list[str]:
    """The field names of the section at ``loc`` of a Workload (``targets.batch``: deadline_hours, items, ...), so a
    misspelt optional key gets its "did you mean" (it had, only at the top level or beside a missing field)."""
    found = _section(loc)
    return list(getattr(found[0], "model_fields", None) or {}) if found is not None else []


def _sections(cls: Any = Workload, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    """(path, model class) of every section of a Workload reachable through mappings (not lists): ``()`` the
    Workload, ``("targets",)``, ``("targets", "online")``, ``("targets", "online", "latency")``, ..."""
    found = [(path, cls)]
    for name, info in cls.model_fields.items():
        inner = _model_in(info.annotation)
        if inner is not None and "list[" not in str(info.annotation):
            found += _sections(inner, (*path, name))
    return found


def _belongs_under(name: str, value: Any, parent: tuple[int | str, ...]) -> str:
    """For an unknown key that is a field of another section, where it belongs: "it belongs under targets (write
    targets: {kind: classic_ml})" for a top-level ``kind`` (whose did-you-mean had been 'tiny'); sections below
    the key's own first. A value of the wrong shape there (a list for ``batch``) is left to the did-you-mean."""
    here = tuple(part for part in parent if isinstance(part, str))
    homes = [path for path, cls in _sections() if path != here and name in cls.model_fields
             and (_model_in(cls.model_fields[name].annotation) is not None) == isinstance(value, dict)]  # fmt: skip
    homes = [h for h in homes if h[: len(here)] == here] or homes
    if not homes:
        return ""
    if len(homes) > 1:
        return f"it belongs under {' or '.join('.'.join(h) for h in homes[:3])}: move it there"
    home = homes[0]
    base = here if home[: len(here)] == here else ()  # written below the key's own section, else from the top
    rest = home[len(base) :]
    shown = "{...}" if isinstance(value, dict) else _yaml_scalar(value)
    nested = f"{name}: {shown}"
    if not rest:  # a top-level field written inside a section (input: {name: ...})
        return f"it belongs at the top level of the spec (write {nested} there)"
    for part in reversed(rest[1:]):
        nested = f"{part}: {{{nested}}}"
    top = " at the top level" if base != here else ""
    return f"it belongs under {'.'.join(home)} (write {rest[0]}: {{{nested}}}{top})"


def _yaml_scalar(value: Any) -> str:
    """``value`` as it would be written in YAML when that is short and plain (classic_ml, 10, true), else "..."."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (int, float)) or (isinstance(value, str) and re.fullmatch(r"[\w.:/+-]{1,40}", value)):
        return str(value)
    return "..."


def _missing_fix(loc: tuple[int | str, ...]) -> str:
    """What to write for a required field left out: its example (``latency: {percentile: 95, bound_ms: 80}``), a
    section's required fields, else the kind of value and its description ("required field is missing" named
    no fix)."""
    if (found := _section(loc)) is None or not loc or not isinstance(loc[-1], str):
        return ""
    cls, info = found
    name, description = loc[-1], (info.description or "") if info else ""
    example = re.search(r"e\.g\. (\{[^}]*\})", description)
    if example:
        return f"; add {name}: {example.group(1)}"
    fields = getattr(cls, "model_fields", None)
    if fields:
        needed = [f for f, i in fields.items() if i.is_required()] or list(fields)[:1]
        return f"; add {name}: {{{', '.join(f'{f}: ...' for f in needed)}}}"
    words: dict[Any, str] = {int: "a whole number", float: "a number", str: "text"}
    kind = words.get(info.annotation if info else None, "a value")
    return f"; add {name}: {kind}" + (f" ({description})" if description else "")


def _model_in(annotation: Any) -> Any:
    """The pydantic model class inside ``annotation`` (itself, or inside Optional / a union / a list), else None."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in get_args(annotation):
        if (found := _model_in(arg)) is not None:
            return found
    return None


def _fix(error: Any) -> str:
    """What to write instead, for pydantic's own checks (ours say it already): a bound, a whole number, one of the
    choices with the closest first ("Input should be 'graphs' or 'eager', got 'EAGER'" named no fix)."""
    kind, ctx = error["type"], error.get("ctx") or {}
    if kind == "missing":
        return _missing_fix(tuple(error["loc"]))
    if kind == "list_type":  # `purchase: on_demand` read "Input should be a valid list, got 'on_demand'"
        name = next((part for part in reversed(error["loc"]) if isinstance(part, str)), "field")
        given = error.get("input")
        one = _yaml_scalar(given) if not isinstance(given, (dict, list)) else "..."
        return f"; write it as a list: {name}: [{one}]" if one != "..." else f"; write a list: {name}: [...]"
    bounds = {"greater_than_equal": ("ge", "{} or more"), "greater_than": ("gt", "above {}"),
              "less_than_equal": ("le", "{} or less"), "less_than": ("lt", "below {}")}  # fmt: skip
    if kind in bounds:
        key, words = bounds[kind]
        bound = ctx.get(key)
        shown = f"{bound:g}" if isinstance(bound, (int, float)) else str(bound)
        return f"; set it to a number {words.format(shown)}" if key in ctx else ""
    if kind == "too_short":  # `batch_sizes: []` read "List should have at least 1 item after validation, not 0"
        return "; list at least one value, or drop the field for its default"
    if kind == "too_long":  # 6 precisions read "List should have at most 5 items after validation, not 6"
        return f"; list at most {ctx.get('max_length', 'the allowed number of')}"
    if kind == "int_parsing_size":  # 1e308 for a count: "exceeded maximum size" named no range
        return "; write a whole number within the field's range (e.g. 8)"
    if kind in ("int_from_float", "int_parsing", "int_type"):
        return "; write a whole number (e.g. 8)"
    if kind == "finite_number":  # `.nan` / `.inf` in YAML: "Input should be a finite number, got nan" named no fix
        return "; write a number (YAML's .nan and .inf are not), e.g. 0.5"
    if kind in ("float_parsing", "float_type"):
        return "; write a number (e.g. 0.5)"
    if kind == "literal_error":
        choices = re.findall(r"'([^']*)'", str(ctx.get("expected", "")))
        hint = did_you_mean(str(error.get("input")), choices)
        return f";{hint}" if hint else f"; use one of {', '.join(choices)}" if choices else ""
    return ""


def _check_keys(data: Any, path: str) -> None:
    """Refuse a mapping key YAML read as something other than text (``~:`` is null, ``1:`` a number): pydantic
    names such a field ``None``, which says nothing."""
    if isinstance(data, dict):
        for key, value in data.items():
            if not isinstance(key, str):
                raise SpecError(path or "spec", f"has the key {short(key)}, which YAML reads as "
                                f"{type(key).__name__}, not a field name; write field names as text")  # fmt: skip
            _check_keys(value, f"{path}.{key}" if path else key)
    elif isinstance(data, list):
        for i, item in enumerate(data):
            _check_keys(item, f"{path}[{i}]")


def parse_spec(data: Any, source: str = "spec") -> Workload:
    """Validate a mapping (already parsed YAML) into a Workload."""
    if data is None:
        raise SpecError(source, "the file is empty; write the spec's fields (examples/quick.yaml is a short one)")
    if not isinstance(data, dict):
        raise SpecError(source, f"must be a YAML mapping of fields, got {type(data).__name__}")
    _check_keys(data, "")
    try:
        return Workload.model_validate(data)
    except ValidationError as exc:
        raise spec_error_from(exc) from None


def load_spec(path: str | Path) -> Workload:
    """Read and validate a YAML workload spec; a relative model path is found next to the spec when it is not in
    the working directory (``model_beside_spec``)."""
    if not str(path).strip():  # Path("") is ".": it had read "spec file '.' is not a regular file"
        raise SpecError("spec", "is empty; pass the path to a YAML spec such as examples/quick.yaml")
    p = Path(path)
    if not p.is_file():
        what = not_a_file(p)  # a directory, /dev/null, a pipe, a symbolic link loop
        raise NotFoundError(f"spec file {str(p)!r} {what}; pass the path to a YAML spec such as examples/quick.yaml")
    return model_beside_spec(parse_spec(load_yaml(read_user_text(p, "spec"), p.name), p.name), p.parent)


_PATH_PREFIXES = ("hf:", "ort:", "ov:")
_MODEL_SUFFIXES = (".onnx", ".pt", ".pth", ".ts", ".torchscript", ".jit", ".pt2")


def model_beside_spec(workload: Workload, spec_dir: Path) -> Workload:
    """``workload`` with a relative model path that is not in the working directory but is next to the spec
    rewritten to that file's absolute path. One rule for every plan: `hf:./dir` in a generative spec was read
    next to the spec, in an online spec from the working directory ("not found" from another folder)."""
    ref = workload.model
    prefix = next((x for x in _PATH_PREFIXES if ref.startswith(x)), "")
    rest = ref[len(prefix) :]
    if not rest or not (prefix or "/" in rest or rest.endswith(_MODEL_SUFFIXES)):
        _check_factory_importable(ref, spec_dir)
        return workload  # a zoo name or package.module:factory
    try:
        here = Path(rest)
        if here.is_absolute() or here.exists() or not (spec_dir / here).exists():
            return workload
        return workload.model_copy(update={"model": prefix + str((spec_dir / here).resolve())})
    except OSError:  # a name too long for a path: resolving the model reports it
        return workload


def _check_factory_importable(ref: str, spec_dir: Path) -> None:
    """A ``module:factory`` whose module sits next to the spec but is not importable names that folder: the
    import error said only "check PYTHONPATH" (`rightsize` does not import from a spec's folder, as `python
    script.py` would from the script's)."""
    top = ref.partition(":")[0].split(".")[0]
    if ":" not in ref or not top.isidentifier():
        return
    try:
        beside = (spec_dir / f"{top}.py").is_file() or (spec_dir / top / "__init__.py").is_file()
        if not beside or spec_dir.resolve() == Path.cwd().resolve() or importlib.util.find_spec(top) is not None:
            return
    except (OSError, ImportError, ValueError):
        return  # resolving the model reports it
    folder = spec_dir.resolve()
    raise NotFoundError(f"model: module {top!r} is next to the spec in {folder}, which is not on the import path; "
                        f"run with PYTHONPATH={folder}")  # fmt: skip
