"""Request lengths of a generative spec: fixed, uniform, or resampled from a column of the user's CSV.

    sample_lengths(Lengths(csv="lengths.csv", column="output"), 600, rng, base_dir=spec_folder)

The CSV is read through the user-file boundary (``rightsize.inputfile``); every refusal is one SpecError naming
``field``.csv or ``field``.column, the row and the fix.
"""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path

import numpy as np

from rightsize.errors import NotFoundError, SpecError
from rightsize.inputfile import decimal, read_user_text, short
from rightsize.spec.targets import Lengths

__all__ = ["MAX_CSV_TOKENS", "sample_lengths", "sample_with_longest"]

MAX_CSV_TOKENS = 1_000_000  # a token count read from a lengths CSV: the cap of Lengths.fixed (spec/targets.py)


def sample_lengths(
    spec: Lengths, n: int, rng: np.random.Generator, base_dir: Path | None = None, field: str = "lengths"
) -> np.ndarray:
    """``(n,)`` token counts from a spec's lengths: fixed, uniform [lo, hi], or resampled from a CSV column
    (an unreadable or invalid one raises SpecError naming ``field``.csv / ``field``.column)."""
    return sample_with_longest(spec, n, rng, base_dir, field)[0]


def sample_with_longest(
    spec: Lengths, n: int, rng: np.random.Generator, base_dir: Path | None = None, field: str = "lengths"
) -> tuple[np.ndarray, int, float]:
    """``sample_lengths``, the most tokens ``spec`` can give one request (fixed; uniform's hi; a CSV's largest,
    from the one read): the context check's worst case, not the largest of a random sample (a uniform range past
    the context had planned on most seeds), and the spec's mean (fixed; the middle of a uniform range; the mean of
    the CSV's rows): tokens served and $/1M tokens from the draws' mean had moved with --seed (0.6% low for a
    uniform [80, 240]; 1-3% for a 500-row CSV)."""
    if spec.fixed is not None:
        return np.full(n, spec.fixed, dtype=np.int64), spec.fixed, float(spec.fixed)
    if spec.uniform is not None:
        lo, hi = spec.uniform
        return rng.integers(lo, hi + 1, size=n, dtype=np.int64), hi, (lo + hi) / 2.0
    assert spec.csv is not None
    path = Path(spec.csv) if base_dir is None or Path(spec.csv).is_absolute() else base_dir / spec.csv
    values = _csv_column(path, spec.column, field)
    return rng.choice(values, size=n, replace=True), int(values.max()), float(values.mean())


def _csv_column(path: Path, column: str | None, field: str = "lengths") -> np.ndarray:
    """The token counts of ``column`` (or the only column) of a CSV read through the user-file boundary (regular
    file, <= 4 MiB, UTF-8, BOM dropped). The first non-blank row is a header only when one of its cells is not a
    number at all; every other value must be a whole number from 1 to MAX_CSV_TOKENS, else SpecError naming the
    row (1-based, as a spreadsheet numbers it). Blank rows are skipped."""
    shown = repr(str(path)) if len(str(path)) <= 160 else short(str(path))
    fix = f"To fix: give whole token counts from 1 to {MAX_CSV_TOKENS}, one per row (a header row first is optional)."
    try:
        if "\x00" in str(path):  # pathlib would raise ValueError (embedded null byte) or call the file missing
            raise ValueError("embedded null byte")
        text = read_user_text(path, what="lengths CSV")
    except NotFoundError:
        raise SpecError(f"{field}.csv", f"cannot read {shown}: no such file. To fix: give the path of a CSV of "
                        "token counts, absolute or relative to the spec's folder.") from None  # fmt: skip
    except SpecError as e:  # not a regular file (directory, FIFO, device), too large, or not UTF-8
        problem, _, how = e.problem.partition("; ")
        raise SpecError(
            f"{field}.csv", f"cannot read {shown}: it {problem}." + (f" To fix: {how}." if how else "")
        ) from None
    except OSError as e:
        raise SpecError(
            f"{field}.csv", f"cannot read {shown}: {e.strerror or e}. To fix: give a readable CSV of token counts."
        ) from None
    except ValueError:
        raise SpecError(f"{field}.csv", f"the path {shown} holds a NUL byte. To fix: give the file's path.") from None

    def is_number(cell: str) -> bool:
        try:
            decimal(cell)
        except ValueError:
            return False
        return True

    def count(cell: str, row_no: int) -> int:
        try:
            value = decimal(cell)  # "100.0" is 100; "1e30", "inf" and "nan" are numbers, refused below; not "1_000"
        except ValueError:
            value = math.nan
        if 1 <= value <= MAX_CSV_TOKENS and value.is_integer():
            return int(value)
        where = f"{shown} row {row_no}"
        if not cell:
            problem = f"has no value in column {col + 1}"
        elif math.isnan(value):
            problem = f"{short(cell)} is not a number"
        elif value > MAX_CSV_TOKENS:
            problem = f"{short(cell)} is more than {MAX_CSV_TOKENS} tokens"
        elif value < 1:
            problem = f"{short(cell)} is below 1 token"
        else:
            problem = f"{short(cell)} is not a whole number of tokens"
        raise SpecError(f"{field}.csv", f"{where}{' ' if not cell else ': '}{problem}. {fix}")

    col: int = 0
    width, header = 1, False  # the cells a row may hold: the header's, else one ("1,000" is 2 cells, not 1000 tokens)
    first = True  # the first non-blank row: a header or data
    values: list[int] = []
    try:
        for row_no, row in enumerate(csv.reader(io.StringIO(text, newline="")), start=1):
            cell = row[col].strip() if len(row) > col else ""
            if not cell and not any(c.strip() for c in row):
                continue  # a blank row
            if first:
                first = False
                cells = [c.strip() for c in row]
                if any(c and not is_number(c) for c in cells):  # a header row
                    names = ", ".join(map(short, cells[:10])) + (", ..." if len(cells) > 10 else "")
                    if column is not None and column not in cells:
                        raise SpecError(f"{field}.column", f"{short(column)} is not a column of {shown} (columns: "
                                        f"{names}). To fix: name one of them.")  # fmt: skip
                    if column is None and sum(1 for c in cells if c) > 1:  # which one is meant: say, never guess
                        raise SpecError(f"{field}.column", f"{shown} has several columns ({names}) and the spec "
                                        "names none. To fix: add column: with the one that holds these token "
                                        "counts.")  # fmt: skip
                    col = cells.index(column) if column is not None else 0
                    width, header = len(cells), True
                    continue
                if column is None and sum(1 for c in row if c.strip()) > 1:
                    raise SpecError(f"{field}.csv", f"{shown} row {row_no} has {len(row)} values and no header row "
                                    "names them. To fix: give one count per row, or a header row and column: naming "
                                    "the one to read.")  # fmt: skip
                if column is not None:
                    raise SpecError(f"{field}.column", f"{short(column)} names a column, but {shown} has no header "
                                    f"row (row {row_no} is data). To fix: add a header row naming the columns, or "
                                    "drop column: to read the first column.")  # fmt: skip
            elif any(c.strip() for c in row[width:]):
                names = f"the header row names {width}" if header else "no header row names them"
                raise SpecError(f"{field}.csv", f"{shown} row {row_no} has {len(row)} values and {names}. To fix: "
                                "one count per row (no thousands separators), or a header row and column: naming "
                                "the one to read.")  # fmt: skip
            values.append(count(cell, row_no))
    except csv.Error as e:
        raise SpecError(f"{field}.csv", f"{shown} is not a valid CSV ({e}). {fix}") from None
    if not values:
        raise SpecError(f"{field}.csv", f"{shown} holds no token counts. {fix}")
    return np.array(values, dtype=np.int64)
