"""The one boundary user files cross: size-capped, UTF-8, YAML without surprises, short error values; and the
files we write for them, whole or not at all.

    text = read_user_text(path, what="spec")          # SpecError on a directory, > cap, not UTF-8
    data = load_yaml(text, source="spec.yaml")         # SpecError on bad syntax, duplicate keys, several
                                                       # documents, deep nesting, too many aliases or
                                                       # aliases that expand too far; numbers
                                                       # are decimal (`1:30`, `0x10`, `017`, `1_000`: text)
    yaml11_number(value)                               # why text in a number field is refused, if YAML 1.1
                                                       # reads it as a number
    short(value)                                       # a repr() that never expands a huge value
    write_whole(path, text, "--output")                # a temp file renamed over PATH: old file kept on failure

Every number in a spec is then checked by the schema (finite, bounded: ``spec/schema.py``). Limits are
documented in docs/spec.md ("Limits").
"""

from __future__ import annotations

import errno
import math
import os
import re
import reprlib
import tempfile
import unicodedata
from pathlib import Path
from typing import Any

import yaml

from rightsize.errors import NotFoundError, SpecError, first_line

__all__ = [
    "MAX_ALIASES",
    "MAX_DEPTH",
    "MAX_EXPANDED",
    "MAX_FILE_BYTES",
    "check_finite",
    "decimal",
    "load_yaml",
    "read_user_text",
    "short",
    "write_whole",
    "yaml11_number",
]

_DECIMAL = re.compile(r"[+-]?(?:(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?|inf|infinity|nan)", re.ASCII | re.IGNORECASE)


def decimal(text: str) -> float:
    """A CSV cell's number as a spreadsheet writes it (``1``, ``2.5``, ``.5``, ``1e3``; ``inf`` and ``nan`` too, for the
    caller's range check to name); ValueError for what ``float`` takes besides: ``1_000``, and digits of other
    scripts (``١٢``)."""
    if not _DECIMAL.fullmatch(text.strip()):
        raise ValueError(f"{text!r} is not a plain decimal number")
    return float(text)


MAX_FILE_BYTES = 4 * 1024 * 1024  # a spec or catalog CSV is kilobytes; 4 MiB is far past any real one
MAX_DEPTH = 32  # nesting of mappings/lists; a spec needs 4
MAX_ALIASES = 64  # YAML aliases (*name): enough to share a block
MAX_EXPANDED = 100_000  # values aliases add once written out (a spec has hundreds); 64 aliases nest to millions

_repr = reprlib.Repr()
_repr.maxstring = 60
_repr.maxother = 60
_repr.maxlist = _repr.maxdict = _repr.maxtuple = _repr.maxset = 6
_repr.maxlevel = 2


def short(value: Any) -> str:
    """``repr(value)`` cut to at most 80 characters and two levels: safe for any input in a message."""
    text = _repr.repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


# Bidirectional embeddings, overrides and isolates (Unicode's Trojan Source set, CVE-2021-42574): printed, they
# reorder the text around them
_BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def unprintable(text: str) -> str | None:
    """Why ``text`` cannot be printed as it is (a control character such as ESC, which a terminal obeys, or a bidi
    override), naming the first such character and its position; None when it can."""
    for i, c in enumerate(text):
        if unicodedata.category(c) == "Cc" or c in _BIDI_CONTROLS:
            return f"holds the control character {c!r} at position {i} (printed, a terminal would obey it)"
    return None


def shown(text: object) -> str:
    """A stored name as it can be shown: written out as Python would (``'red\\x1b[31m'``) when it holds a control
    character. An older version stored such names; raw, a terminal obeyed the ESC and a page hid it."""
    value = "" if text is None else str(text)
    return value if unprintable(value) is None else repr(value)


def not_a_file(p: Path) -> str:
    """Why ``p`` is no readable regular file, in words to follow its name: "not found", "is a symbolic link loop
    ...", a link to nothing, "is not a regular file" (a symbolic link loop had read "not found")."""
    try:
        os.stat(p)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "is a symbolic link loop (its links lead back to themselves, never to a file)"
        try:
            if p.is_symlink():
                return f"is a symbolic link to {os.readlink(p)!r}, which does not exist"
        except OSError:
            pass
        return "not found"
    return "is not a regular file"


def read_user_text(path: str | Path, what: str, max_bytes: int = MAX_FILE_BYTES) -> str:
    """The text of a user file: must exist, be a regular file of at most ``max_bytes``, and be UTF-8
    (a UTF-8 byte-order mark is dropped)."""
    p = Path(path)
    if not p.exists():
        raise NotFoundError(f"{what} file {str(p)!r} {not_a_file(p)}; check the path")
    if not p.is_file():
        raise SpecError(str(p), f"is not a regular file; pass the path of a {what} file")
    size = p.stat().st_size
    if size > max_bytes:
        raise SpecError(str(p), f"is {size / 2**20:.1f} MiB; a {what} file may be at most {max_bytes // 2**20} MiB")
    raw = p.read_bytes()[: max_bytes + 1]
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise SpecError(str(p), f"is not UTF-8 text (byte {exc.start}); save it as UTF-8") from None


class _Loader(yaml.CSafeLoader if hasattr(yaml, "CSafeLoader") else yaml.SafeLoader):  # type: ignore[misc]
    """Safe loader (libyaml when present) that refuses duplicate keys instead of keeping the last, and reads only
    decimal numbers as numbers (YAML 1.2's rule: below)."""


_INT_TAG = "tag:yaml.org,2002:int"
_FLOAT_TAG = "tag:yaml.org,2002:float"
_YAML11 = yaml.resolver.Resolver.yaml_implicit_resolvers  # PyYAML's YAML 1.1 rules, which its loaders use
# YAML 1.1 reads `1:30` as 90 (base 60), `0x10` as 16, `017` as 15 (octal), `0b11` as 3 and `1_000` as 1000:
# `deadline_hours: 1:30` planned a 90-hour deadline. Here a number is decimal, as in YAML 1.2 (and, as before,
# `1.5e+3`, `.inf` and `.nan`; `1e6` stays text, which number fields read); the rest stays text, and a number
# field refuses it with what YAML 1.1 made of it (yaml11_number).
_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in rules if tag not in (_INT_TAG, _FLOAT_TAG)]
    for first, rules in _YAML11.items()
}
_FLOAT_RE = (  # PyYAML's, less base 60 and `_`: 1.5, 1., .5, 1.5e+3 (an exponent needs its sign), .inf, .nan
    r"^(?:[-+]?[0-9]+\.[0-9]*(?:[eE][-+][0-9]+)?|\.[0-9]+(?:[eE][-+][0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
)
_Loader.add_implicit_resolver(_INT_TAG, re.compile(r"^[-+]?(?:0|[1-9][0-9]*)$"), list("-+0123456789"))
_Loader.add_implicit_resolver(_FLOAT_TAG, re.compile(_FLOAT_RE), list("-+0123456789."))


def _yaml11_reading(text: str) -> int | float | None:
    """The number YAML 1.1 reads ``text`` as where this loader reads text; None where both read the same."""
    if any(tag in (_INT_TAG, _FLOAT_TAG) and regexp.match(text) for tag, regexp in
           _Loader.yaml_implicit_resolvers.get(text[:1], [])):  # fmt: skip
        return None
    for tag, regexp in _YAML11.get(text[:1], []):
        if tag in (_INT_TAG, _FLOAT_TAG) and regexp.match(text):
            node = yaml.ScalarNode(tag, text)
            make = yaml.constructor.SafeConstructor()
            number: int | float = make.construct_yaml_int(node) if tag == _INT_TAG else make.construct_yaml_float(node)
            return number
    return None


def _plain(x: float) -> str:
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e15 else f"{x:.6g}"


def yaml11_number(value: object) -> str | None:
    """Why ``value``, text in a number field, is refused: YAML 1.1 reads it as a number in another notation
    (``1:30`` base 60 is 90, ``0x10`` 16, ``017`` octal 15, ``0b11`` 3, ``1_000`` 1000), which the spec loader
    leaves as text; or it is YAML 1.2's octal ``0o17``. The problem names the decimal to write; None for any other
    value."""
    if not isinstance(value, str) or len(text := value.strip()) > 40:  # longer: the field's own check names it
        return None
    sign, body = ("-", text[1:]) if text.startswith("-") else ("", text.removeprefix("+"))
    if re.fullmatch(r"0o[0-7]+", body):
        return f"{short(value)} is read by YAML 1.2 as {sign}{int(body, 8)} (octal); write {sign}{int(body, 8)}"
    try:
        reading = _yaml11_reading(text)
    except (ValueError, OverflowError):
        return None
    if reading is None:
        return None
    shown = _plain(reading)
    if ":" in body:
        parts = [float(p) for p in body.replace("_", "").split(":")]
        terms = " + ".join([_plain(parts[0])] + [f"{_plain(p)}/{60**i}" for i, p in enumerate(parts[1:], 1)])
        in_decimal = sum(p / 60**i for i, p in enumerate(parts))
        what, fix = "base 60", f"{sign}{_plain(in_decimal)} for {f'-({terms})' if sign else terms}, or {shown}"
    elif body[:2] in ("0x", "0b"):
        what, fix = "hexadecimal" if body[1] == "x" else "binary", shown
    elif isinstance(reading, int) and len(body) > 1 and body[0] == "0":
        as_decimal = f"{sign}{int(body.replace('_', ''))}"
        what, fix = "octal", shown if as_decimal == shown else f"{shown}, or {as_decimal} without the leading zero"
    else:
        what, fix = "digits grouped by _", shown
    return f"{short(value)} is read by YAML 1.1 as {shown} ({what}); write {fix}"


_MERGE_TAG = "tag:yaml.org,2002:merge"


def _construct_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    """The mapping, refusing a key written twice; a merge key (``<<: *base``) brings in the keys of ``base`` that
    the mapping does not write itself (its own keys override the merged ones, as YAML's merge type says)."""
    seen: set[Any] = set()
    for key_node, _ in node.value:
        # `<<` had been built as a key before the merge was done: "no constructor", read as "not valid YAML"
        key = "<<" if key_node.tag == _MERGE_TAG else loader.construct_object(key_node, deep=deep)
        try:
            duplicate = key in seen
            seen.add(key)
        except TypeError:
            raise SpecError(f"line {key_node.start_mark.line + 1}", "a key must be a plain value") from None
        if duplicate:
            raise SpecError(f"line {key_node.start_mark.line + 1}", f"duplicate key {short(key)}; keep one of them")
    return loader.construct_mapping(node, deep=deep)  # SafeConstructor's: merges first, then the mapping's own keys


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
_Loader.add_constructor(_MERGE_TAG, yaml.constructor.SafeConstructor.construct_scalar)  # `name: <<` is the text


def _check_shape(text: str, source: str) -> int:
    """Refuse nesting deeper than MAX_DEPTH, more than MAX_ALIASES aliases and aliases that add more than
    MAX_EXPANDED values once written out, from the event stream (before anything is composed, so neither recursion
    nor expansion can run away); the values the document stands for. An alias count does not bound expansion:
    8 levels of 8 aliases are 64 aliases, and 16 million values that every reader of the data walks."""
    depth = aliases = written = 0
    open_anchors: list[str | None] = []  # the anchors of the collections being read, outermost first
    sizes: list[int] = [0]  # values of each collection being read, aliases written out (outermost: the document)
    anchored: dict[str, int] = {}  # an anchor's values (a later `&name` replaces an earlier one, as YAML's)
    for event in yaml.parse(text, Loader=_Loader):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            open_anchors.append(event.anchor)
            sizes.append(1)
            written += 1
            if depth > MAX_DEPTH:
                line = event.start_mark.line + 1 if event.start_mark else 0
                raise SpecError(source, f"nests deeper than {MAX_DEPTH} levels (line {line}); flatten it")
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1
            anchor, size = open_anchors.pop(), sizes.pop()
            if anchor is not None:
                anchored[anchor] = size
            sizes[-1] += size
        elif isinstance(event, yaml.ScalarEvent):
            sizes[-1] += 1
            written += 1
            if event.anchor is not None:
                anchored[event.anchor] = 1
        elif isinstance(event, yaml.AliasEvent):
            aliases += 1
            if aliases > MAX_ALIASES:
                raise SpecError(source, f"uses more than {MAX_ALIASES} YAML aliases (*name); write the values out")
            if event.anchor in open_anchors:  # `a: &a [*a]`: a value holding itself sent every reader into recursion
                line = event.start_mark.line + 1 if event.start_mark else 0
                raise SpecError(source, f"an alias (*{event.anchor}) refers to the value it is inside (line "
                                f"{line}); write the values out")  # fmt: skip
            sizes[-1] += anchored.get(event.anchor or "", 1)  # an undefined anchor: the composer names it
    added = sizes[0] - written  # what the aliases stand for; a long file written out is bounded by its size
    if added > MAX_EXPANDED:
        raise SpecError(source, f"has YAML aliases (*name) that expand to {added:,} values (limit "
                        f"{MAX_EXPANDED:,}); write the values out")  # fmt: skip
    return sizes[0]


def _text_at(text: str, mark: Any) -> str:
    """What ``text`` holds from a YAML error's mark to the end of that line ("" without a mark)."""
    if mark is None:
        return ""
    lines = text.splitlines()
    return lines[mark.line][mark.column :] if mark.line < len(lines) else ""


def load_yaml(text: str, source: str) -> Any:
    """Parse YAML ``text`` with the boundary's rules; errors name ``source`` and the line."""
    try:
        _check_shape(text, source)
        return yaml.load(text, Loader=_Loader)  # _Loader is a SafeLoader
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        if "nesting depth" in str(getattr(exc, "problem", "")):  # PyYAML >= 6.0.4 stops deep flow nesting itself
            raise SpecError(source, f"nests deeper than {MAX_DEPTH} levels{where.replace(' at', ' (at')}"
                            f"{')' if where else ''}; flatten it") from None  # fmt: skip
        if "another document" in str(getattr(exc, "problem", "")):  # valid YAML: a second `---` and more
            raise SpecError(source, f"holds several YAML documents (another starts{where}); a spec is one document: "
                            "remove the extra '---' and what follows, or split the file") from None  # fmt: skip
        if "for merging" in str(getattr(exc, "problem", "")):  # `<<: 5`
            raise SpecError(source, f"has a merge key (<<){where} that names no mapping; merge a mapping "
                            "(`<<: *base`) or write the keys out") from None  # fmt: skip
        at = _text_at(text, mark)
        if at.startswith("\t") and mark is not None:  # "found character that cannot start any token": a tab
            raise SpecError(source, f"is not valid YAML{where}, column {mark.column + 1}: a tab character, which "
                            "YAML does not allow there (it indents with spaces only); replace it with "
                            "spaces") from None  # fmt: skip
        if "undefined alias" in str(getattr(exc, "problem", "")):  # `*base` with no `&base` before it
            found = re.match(r"\*([^\s,\[\]{}]+)", at)
            name = found[1] if found else ""
            alias = f"the alias *{name}" if name else "an alias (*name)"
            raise SpecError(source, f"is not valid YAML{where}: {alias} names no anchor; define "
                            f"`&{name or 'name'}` on a value before it, or write the value out") from None  # fmt: skip
        raise SpecError(source, f"is not valid YAML{where}; fix the syntax") from None
    except SpecError as exc:
        if exc.field.startswith("line "):
            raise SpecError(f"{source} {exc.field}", exc.problem) from None
        raise
    except (RecursionError, MemoryError):
        raise SpecError(source, "is too deeply nested or too large to read; simplify it") from None
    except ValueError as exc:  # a whole number of over 4,300 digits: Python's int() limit, a traceback before
        if "digits" in str(exc):
            raise SpecError(source, "holds a whole number of more than 4,300 digits, past what Python reads; write "
                            "it shorter, e.g. 5e6") from None  # fmt: skip
        raise SpecError(source, f"holds a value YAML cannot read ({first_line(exc, 80)}); fix it") from None


def check_finite(option: str, value: float | None, low: float, high: float, low_open: bool = True) -> None:
    """Refuse NaN, infinities and values outside (low, high] (``low_open=False``: [low, high]) for a CLI
    option: click's float ranges let NaN through, and NaN passes every comparison downstream."""
    if value is None:
        return
    above = value > low if low_open else value >= low
    if not (math.isfinite(value) and above and value <= high):
        side = ">" if low_open else ">="
        raise SpecError(option, f"must be a finite number {side} {low:g} and <= {high:g}, got {value}")


def write_whole(path: Path, text: str, option: str) -> None:
    """Write ``text`` to ``path`` through a temp file beside it, renamed over it when complete: a full disk or a
    Ctrl-C leaves the previous file as it was (writing in place had truncated it). A symlink's target is
    replaced, not the link. SpecError naming ``option`` when it cannot be written."""
    target = path.resolve()
    if target.is_dir():  # os.replace's "Is a directory" had been answered "free some space"
        raise SpecError(option, f"{str(path)!r} is a directory; pass the path of a file (in it, or beside it)")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".partial", dir=target.parent)
    except OSError as exc:
        raise SpecError(option, f"cannot write {str(path)!r} ({exc.strerror or exc}); pass a writable path") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        mode = target.stat().st_mode & 0o7777 if target.exists() else 0o666 & ~_umask()
        os.chmod(tmp, mode)  # mkstemp's 0600 would hide a shared report from the others who read the old one
        os.replace(tmp, target)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError):
            full = exc.errno in (errno.ENOSPC, errno.EDQUOT)
            raise SpecError(
                option,
                f"cannot write {str(path)!r} ({exc.strerror or exc}); it was left as it was: "
                + ("free some space or pass another path" if full else "pass another path"),
            ) from None
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
