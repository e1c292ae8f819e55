"""Reading one catalog CSV table: each row's cells checked (plain decimals, whole numbers, dates not in the future
for a user's file, no spreadsheet formulas or control characters, names the catalog knows), every error naming the
file, line and column (``SpecError``)."""

from __future__ import annotations

import csv
import datetime as dt
import io
import re
from collections.abc import Iterator
from pathlib import Path

from rightsize.errors import SpecError, did_you_mean
from rightsize.inputfile import MAX_FILE_BYTES, decimal, read_user_text, short, unprintable

__all__ = ["MAX_COUNT", "MAX_NUMBER", "Row", "csv_rows", "read_table", "today", "user_text"]

_DATE = re.compile(r"^\d{4}-\d{2}(-\d{2})?$")
_FORMULA = re.compile(r"^[=@]|^[+-][^0-9.]")  # a cell a spreadsheet would evaluate
_DDE = re.compile(r"[|!=(]")  # after a leading sign: a formula's pipe, sheet reference, comparison or call
MAX_NUMBER = 1e9  # any price, rate, bandwidth or size in the catalog (docs/catalog.md, "Limits")
MAX_COUNT = 100_000  # vCPUs, cores, accelerators per instance
MAX_CELL_CHARS = 1000


class Row:
    """One CSV row with typed getters whose errors name file, line and column."""

    def __init__(
        self, cells: dict[str, str], where: str, line: int, defaults: dict[str, str], user: bool = False,
        header: tuple[str, ...] = (),
    ) -> None:  # fmt: skip
        self.cells = cells
        self.where = where
        self.line = line
        self.defaults = defaults
        self.user = user  # a user's file: its written dates may not lie in the future
        self.header = header  # the file's columns: the cells of a short row are absent from ``cells``

    def _fail(self, column: str, problem: str) -> SpecError:
        return SpecError(f"{self.where} line {self.line}, column {column!r}", problem)

    def text(self, column: str, required: bool = True) -> str:
        value = (self.cells.get(column) or "").strip() or self.defaults.get(column, "")
        if required and not value:
            if column not in self.cells:  # a short row: "is empty" pointed at the cell, not at the missing commas
                given = sum(1 for c in self.cells if c in self.header)
                raise self._fail(column, f"is missing: the row has {given} of the header's {len(self.header)} "
                                 "cells; write the row in full (empty cells as ,,)")  # fmt: skip
            raise self._fail(column, "is empty; fill it in")
        if _FORMULA.match(value) or (value[:1] in ("+", "-") and _DDE.search(value)):  # -2+3+cmd|' /C calc'!A0
            raise self._fail(column, f"looks like a spreadsheet formula ({short(value)}); write the plain value")
        if len(value) > MAX_CELL_CHARS:
            raise self._fail(column, f"is {len(value)} characters long; at most {MAX_CELL_CHARS}")
        if (why := unprintable(value)) is not None:  # an ESC in an instance type recoloured `rightsize catalog`
            raise self._fail(column, f"{why}; write plain text")
        return value

    def number(
        self, column: str, required: bool = True, minimum: float = 0.0, maximum: float = MAX_NUMBER
    ) -> float | None:
        raw = self.text(column, required=required)
        if not raw:
            return None
        try:
            value = decimal(raw)
        except ValueError:
            raise self._fail(column, f"must be a plain decimal number, got {short(raw)}") from None
        if value != value:  # NaN: "must be >= 1e-09, got 'NaN'" read as a bound problem
            raise self._fail(column, f"must be a finite number, got {short(raw)}")
        if not value >= minimum:
            raise self._fail(column, f"must be >= {minimum:g}, got {short(raw)}")
        if not value <= maximum:  # also rejects inf
            raise self._fail(column, f"must be a finite number <= {maximum:g}, got {short(raw)}")
        return value

    def price(self, column: str, fix: str, required: bool = True) -> float | None:
        """A price per hour: more than 0. A free row is refused, not planned: every replica count of it would cost $0
        (the cost ranking ties them all) and the plans' cost ratios ("2.5x the cost") divide by it. ``fix``: what
        to write instead."""
        value = self.number(column, required=required, minimum=-MAX_NUMBER)
        if value is not None and value <= 0:
            raise self._fail(column, f"must be more than 0 (a price per hour), got {short(self.text(column))}; {fix}")
        return value

    def num(self, column: str, minimum: float = 0.0) -> float:
        value = self.number(column, required=True, minimum=minimum)
        assert value is not None
        return value

    def integer(self, column: str, required: bool = True, minimum: int = 0) -> int | None:
        raw = self.text(column, required=required)
        if not raw:
            return None
        if not re.fullmatch(r"\d{1,9}", raw) or not minimum <= int(raw) <= MAX_COUNT:
            raise self._fail(column, f"must be a whole number from {minimum} to {MAX_COUNT}, got {short(raw)}")
        return int(raw)

    def date(self, column: str) -> str:
        raw = self.text(column)
        try:
            dt.date.fromisoformat(raw if len(raw) == 10 else f"{raw}-01")
            ok = bool(_DATE.match(raw))
        except ValueError:
            ok = False
        if not ok:
            raise self._fail(column, f"must be a date YYYY-MM or YYYY-MM-DD, got {short(raw)}")
        written = (self.cells.get(column) or "").strip()  # a default (the file's date) is not checked
        if self.user and written and dt.date.fromisoformat(raw if len(raw) == 10 else f"{raw}-01") > today():
            raise self._fail(column, f"is {raw}, after today ({today().isoformat()}); write the date the values "
                             "were read, or leave it empty for the file's date")  # fmt: skip
        return raw

    def choice(self, column: str, choices: tuple[str, ...]) -> str | None:
        raw = self.text(column, required=False)
        if raw and raw not in choices:
            raise self._fail(column, f"must be one of {', '.join(choices)}, got {raw!r}")
        return raw or None

    def ref(self, column: str, known: dict[str, object], required: bool = True) -> str | None:
        raw = self.text(column, required=required)
        if raw and raw not in known:
            several = _expansions(raw, known)
            if len(several) > 1:
                raise self._fail(column, f"{raw!r} is ambiguous: {', '.join(several)}; write one of them")
            hint = f" Did you mean {several[0]!r}?" if several else did_you_mean(raw, known)
            if not hint:  # nothing close: the names it takes, so the fix is in the message
                names = sorted(known)
                hint = f" Known: {', '.join(names[:12])}{', ...' if len(names) > 12 else ''}."
                table = {"accelerator": "accelerators (bandwidth_gbps, ...)", "cpu_family": "CPU families "
                         "(sustained_ghz, ...)"}.get(column)  # fmt: skip
                if table:  # new hardware: its row comes from a second file
                    hint += f" New hardware: add its row in a file of {table} and pass both files (docs/catalog.md)"
            raise self._fail(column, f"unknown name {raw!r}.{hint}")
        return raw or None


def today() -> dt.date:
    """Today in UTC, or the local date when that is later (east of UTC, a user's today is already tomorrow)."""
    return max(dt.datetime.now(dt.timezone.utc).date(), dt.date.today())


def _expansions(raw: str, known: dict[str, object]) -> list[str]:
    """Names that ``raw`` is a short form of: it matches their leading words ('A100' -> A100-40GB, A100-80GB;
    'a10' is no short form of 'A100-40GB'). A name differing only in case is not listed (did_you_mean says it)."""
    want = raw.strip().lower()
    if not want or any(k.lower() == want for k in known):
        return []
    return sorted(k for k in known if (kl := k.lower()).startswith(want) and len(kl) > len(want)
                  and not kl[len(want)].isalnum())  # fmt: skip


def user_text(path: Path) -> str:
    """A user's CSV text (``read_user_text``: a regular file, size-capped, UTF-8); a byte that is not UTF-8 is named by
    line and column, as every other bad cell is (the file's byte offset alone left it to be counted by hand)."""
    try:
        return read_user_text(path, "catalog CSV")
    except SpecError as exc:
        if not path.is_file() or path.stat().st_size > MAX_FILE_BYTES:
            raise
        raw = path.read_bytes().removeprefix(b"\xef\xbb\xbf")  # a BOM: utf-8-sig's offsets would skip it
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as bad:
            raise _bad_byte(path, raw, bad.start) from None
        raise exc from None


def _bad_byte(path: Path, raw: bytes, start: int) -> SpecError:
    """Where the byte at ``start`` (the first that is not UTF-8) lies: its line, and its cell's column."""
    line = raw[:start].count(b"\n") + 1
    where, problem = f"{path} line {line}", f"is not UTF-8 text (byte 0x{raw[start]:02x}); save the file as UTF-8"
    text = raw[:start].decode("utf-8")  # the first bad byte: all before it decodes
    try:  # the bad byte as a cell's text, so that one at a cell's start still makes its row
        rows = list(csv.reader(io.StringIO(text + "\udc80", newline="")))
    except csv.Error:  # a cell past csv's field limit: the line alone
        return SpecError(where, problem)
    header = next(csv.reader(io.StringIO(raw.decode("utf-8", "replace"), newline="")), [])
    if line > 1 and rows and len(rows[-1]) <= len(header):  # a header's bad byte names the line only
        column = header[len(rows[-1]) - 1].strip()
        return SpecError(f"{where}, column {short(column)}", problem)
    return SpecError(where, problem)


def csv_rows(path: Path, text: str) -> list[list[str]]:
    """The rows of a user's CSV ``text``; what csv cannot read (a cell past its field limit, which an unclosed quote
    also reaches by running the rest of the file into one cell) raises SpecError naming the file and the line its row
    starts on. Read the text this way first: the later readers of the same text parse it alike and cannot fail."""
    reader = csv.reader(io.StringIO(text, newline=""))
    rows: list[list[str]] = []
    start = 1  # the line the next row starts on: a quoted cell may span lines
    try:
        for row in reader:
            rows.append(row)
            start = reader.line_num + 1
    except csv.Error as exc:
        if "field limit" in str(exc):  # "_csv.Error: field larger than field limit (131072)" had been a traceback
            raise SpecError(f"{path} line {start}", f"a cell is over {csv.field_size_limit()} characters (a catalog "
                            f"cell holds at most {MAX_CELL_CHARS}); shorten it, or close its quote if one is left "
                            "open (an unclosed quote runs the lines after it into one cell)") from None  # fmt: skip
        raise SpecError(f"{path} line {start}", f"is not a readable CSV ({exc}); save it as comma-separated text "
                        "(docs/catalog.md)") from None  # fmt: skip
    return rows


def read_table(
    path: Path, text: str, required: tuple[str, ...], defaults: dict[str, str] | None = None, user: bool = False,
    optional: tuple[str, ...] = (),
) -> Iterator[Row]:  # fmt: skip
    """Yield the data rows of CSV ``text`` (line numbers count the header as line 1); ``user``: a user's file.
    The header may name ``required`` and ``optional`` columns only: any other is refused (it was ignored)."""
    reader = csv.DictReader(io.StringIO(text, newline=""))
    header = [h.strip() for h in (reader.fieldnames or [])]
    reader.fieldnames = header
    missing = [c for c in required if c not in header and c not in (defaults or {})]
    if missing:
        more = f", and may add {', '.join(optional)}" if optional else ""  # physical_cores: c7a.large has no SMT
        raise SpecError(
            f"{path} line 1", f"missing column(s) {', '.join(missing)}; the header needs {', '.join(required)}{more}"
        )
    # a column named twice let the last one's cells win, silently; a spreadsheet's trailing ",," is not a name
    if twice := sorted({h for h in header if h and header.count(h) > 1}):
        raise SpecError(f"{path} line 1", f"column {twice[0]!r} is in the header twice; keep one")
    known = (*required, *optional)
    if unknown := [h for h in header if h and h not in known]:  # `exposed_gb` for exposed_gib: its values dropped,
        hint = did_you_mean(unknown[0], known)  # the row replaced a shipped one with the nominal memory, exit 0
        raise SpecError(f"{path} line 1", f"unknown column {short(unknown[0])}.{hint} Rename it to one of the columns "
                        f"this table reads ({', '.join(known)}) or delete it")  # fmt: skip
    first = 2  # the line a row starts on: a quoted cell may span lines
    for row in reader:
        start, first = first, reader.line_num + 1
        if None in row:  # more cells than header columns
            raise SpecError(f"{path} line {reader.line_num}", f"has more cells than the header's {len(header)} columns")
        if any("\n" in v or "\r" in v for v in row.values() if v):  # the rows after it went into one cell
            raise SpecError(f"{path} line {start}", "a cell runs over several lines (an unclosed quote?); close the "
                            "quote or take the line break out")  # fmt: skip
        if not any((v or "").strip() for v in row.values()):
            continue
        absent = [k for k, v in row.items() if v is None and k]  # a trailing "," in the header names no column
        if user and absent:  # refused as a longer row is: a dropped comma shifts every cell after it (a row short of
            given = len(header) - len(absent)  # an optional column, e.g. its source, had passed)
            where = f"{path} line {reader.line_num}, column {absent[0]!r}"
            raise SpecError(where, f"is missing: the row has {given} of the header's {len(header)} cells; write the "
                            "row in full (empty cells as ,,)")  # fmt: skip
        cells = {k: v or "" for k, v in row.items() if v is not None}
        yield Row(cells, str(path), reader.line_num, defaults or {}, user, tuple(header))
