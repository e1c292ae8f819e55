"""Token lengths from a CSV (``prompt_tokens: {csv: FILE, column: NAME}``): hostile files give one SpecError
naming the field, the file, the row and the fix; valid files (header + column, headerless, BOM) keep working."""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from rightsize.errors import SpecError
from rightsize.inputfile import MAX_FILE_BYTES
from rightsize.llm.lengths import MAX_CSV_TOKENS, sample_lengths
from rightsize.spec.targets import Lengths

ROOT = Path(__file__).resolve().parents[2]
FIELD = "targets.generative.prompt_tokens"


def _lengths(tmp_path: Path, csv: str, column: str | None = None, n: int = 400) -> np.ndarray:
    return sample_lengths(Lengths(csv=csv, column=column), n, np.random.default_rng(0), tmp_path, FIELD)


def _sqlite(path: Path) -> None:
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE t (x INTEGER)")
    con.commit()
    con.close()


BAD: list[tuple[str, bytes | None, str | None, str]] = [
    # (id, file content (None: a SQLite database), column, regex the message must match after the field name)
    ("inf", b"100\ninf", None, r"\.csv: .* row 2: 'inf' is more than 1000000 tokens\. To fix:"),
    ("1e30", b"100\n1e30", None, r"\.csv: .* row 2: '1e30' is more than 1000000 tokens\. To fix:"),
    ("int64-max", b"100\n9223372036854775807", None, r"\.csv: .* row 2: '9223372036854775807' is more than"),
    ("over-cap", b"100\n1000000000000000\n", None, r"\.csv: .* row 2: .* more than 1000000 tokens"),
    ("cap+1", b"prompt\n1000001\n", None, r"\.csv: .* row 2: '1000001' is more than 1000000 tokens"),
    ("nan", b"100\nnan\n", None, r"\.csv: .* row 2: 'nan' is not a number\. To fix:"),
    ("not-utf8", b"100\n\xff\xfe200", None, r"\.csv: cannot read .*: it is not UTF-8 text .* To fix: save it as UTF-8"),
    ("sqlite", None, None, r"\.csv: cannot read .*: it is not UTF-8 text"),
    (
        "too-big",
        b"100\n" * (MAX_FILE_BYTES // 4 + 1),
        None,
        r"\.csv: cannot read .*: it is 4\.0 MiB\. To fix: .* 4 MiB",
    ),
    ("negative-first", b"-5\n100\n", None, r"\.csv: .* row 1: '-5' is below 1 token\. To fix:"),
    ("zero", b"prompt\n100\n0\n", None, r"\.csv: .* row 3: '0' is below 1 token"),
    ("fraction-first", b"100.9\n200\n", None, r"\.csv: .* row 1: '100\.9' is not a whole number of tokens\. To fix:"),
    ("word", b"prompt\n100\nlots\n", None, r"\.csv: .* row 3: 'lots' is not a number"),
    ("underscore", b"100\n1_000\n", None, r"\.csv: .* row 2: '1_000' is not a number"),  # float() reads 1000
    ("row-after-blank", b"100\n\n\n7.5\n", None, r"\.csv: .* row 4: '7\.5' is not a whole number"),
    ("missing-cell", b"prompt,output\n100,5\n300\n", "output", r"\.csv: .* row 3 has no value in column 2"),
    ("header-only", b"prompt,output\n", "output", r"\.csv: .* holds no token counts\. To fix:"),
    # Two columns and no column: named: which one holds these counts is the user's to say, never guessed (the
    # first column of prompt,output read as output lengths planned 3.6x the output tokens, silently).
    (
        "columns-unnamed",
        b"prompt,output\n100,5\n",
        None,
        r"\.column: .* has several columns \('prompt', 'output'\) and the spec names none\. To fix: add column:",
    ),
    ("values-unnamed", b"100,5\n300,9\n", None, r"\.csv: .* row 1 has 2 values and no header row names them\."),
    # "1,000" after the first row had been read as 1 token (the first cell), silently
    ("thousands-later", b"100\n1,000\n", None, r"\.csv: .* row 2 has 2 values and no header row names them\."),
    ("thousands-header", b"p\n1,000\n", None, r"\.csv: .* row 2 has 2 values and the header row names 1\."),
    ("extra-cell", b"a,b\n1,2\n3,4,5\n", "b", r"\.csv: .* row 3 has 3 values and the header row names 2\."),
    ("empty", b"", None, r"\.csv: .* holds no token counts"),
    ("blank-lines", b"\n \n\n", None, r"\.csv: .* holds no token counts"),
    ("huge-field", b"1" * 200_000 + b"\n", None, r"\.csv: .* is not a valid CSV \(field larger than field limit"),
    ("column-no-header", b"100\n200\n", "bogus", r"\.column: 'bogus' names a column, but .* has no header row"),
    (
        "column-not-in-header",
        b"prompt,output\n1,2\n",
        "bogus",
        r"\.column: 'bogus' is not a column of .*'prompt', "
        r"'output'\)\. To fix: name one of them",
    ),
]


@pytest.mark.parametrize(("content", "column", "pattern"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_a_bad_lengths_csv_is_one_spec_error_naming_the_field(
    tmp_path: Path, content: bytes | None, column: str | None, pattern: str
) -> None:
    path = tmp_path / "lens.csv"
    if content is None:
        _sqlite(path)
    else:
        path.write_bytes(content)
    with pytest.raises(SpecError) as info:
        _lengths(tmp_path, "lens.csv", column)
    msg = str(info.value)
    assert re.match(rf"^{re.escape(FIELD)}{pattern}", msg), msg  # the field (.csv or .column) first
    assert "\n" not in msg and "To fix:" in msg, msg


@pytest.mark.parametrize(
    ("csv", "pattern"),
    [
        ("a\x00b.csv", r"\.csv: the path .*a\\x00b\.csv' holds a NUL byte\. To fix:"),
        ("missing.csv", r"\.csv: cannot read .*missing\.csv': no such file\. To fix:"),
        (".", r"\.csv: cannot read .*: it is not a regular file\. To fix:"),
        ("x" * 300 + ".csv", r"\.csv: cannot read .*: File name too long\. To fix:"),
    ],
    ids=["nul-byte", "missing", "directory", "name-too-long"],
)
def test_an_unreadable_path_is_a_spec_error(tmp_path: Path, csv: str, pattern: str) -> None:
    with pytest.raises(SpecError, match=rf"^{re.escape(FIELD)}{pattern}"):
        _lengths(tmp_path, csv)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_is_refused_at_once_not_read(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "lens.csv")
    result: list[BaseException | None] = []

    def read() -> None:
        try:
            _lengths(tmp_path, "lens.csv")
            result.append(None)
        except BaseException as e:  # handed to the test thread
            result.append(e)

    t0 = time.monotonic()
    worker = threading.Thread(target=read, daemon=True)  # a hang must fail the test, not the whole run
    worker.start()
    worker.join(timeout=10)
    assert not worker.is_alive(), "reading a FIFO hung"
    assert time.monotonic() - t0 < 5
    assert isinstance(result[0], SpecError)
    assert str(result[0]).startswith(f"{FIELD}.csv: cannot read ") and "not a regular file" in str(result[0])


def test_the_cap_is_the_cap_of_a_fixed_length(tmp_path: Path) -> None:
    le = [m.le for m in Lengths.model_fields["fixed"].metadata if hasattr(m, "le")]
    assert le == [MAX_CSV_TOKENS]
    (tmp_path / "lens.csv").write_text(f"1\n{MAX_CSV_TOKENS}\n")
    assert set(_lengths(tmp_path, "lens.csv").tolist()) == {1, MAX_CSV_TOKENS}


@pytest.mark.parametrize(
    ("content", "column", "expected"),
    [
        (b"prompt,output\n100,5\n300,9\n", "output", {5, 9}),
        (b"prompt,output\n100,5\n300,9\n", "prompt", {100, 300}),
        (b"prompt\n100\n300\n", None, {100, 300}),  # a one-column header, no column: that column
        (b"100\n200\n300\n", None, {100, 200, 300}),  # headerless: every row is data, the first one too
        (b"100\n200", None, {100, 200}),  # no final newline
        (b"\xef\xbb\xbfprompt,output\r\n100,5\r\n300,9\r\n", "prompt", {100, 300}),  # BOM + CRLF (Excel)
        (b"\xef\xbb\xbf100\n200\n", None, {100, 200}),  # BOM, headerless
        (b"100.0\n200\n", None, {100, 200}),  # a whole number written as a float
        (b" prompt , output \n 100 , 5 \n\n 2e2 , 9 \n", "output", {5, 9}),  # spaces, a blank row
        (b"p\n1e2\n", None, {100}),
        (b"100,\n200,\n", None, {100, 200}),  # a spreadsheet's empty trailing column is not a header
    ],
    ids=[
        "column",
        "column-first",
        "header-first-column",
        "headerless",
        "no-newline",
        "bom-crlf",
        "bom-headerless",
        "100.0",
        "spaces",
        "exponent",
        "trailing-comma",
    ],
)
def test_valid_lengths_csvs_give_their_counts(
    tmp_path: Path, content: bytes, column: str | None, expected: set[int]
) -> None:
    (tmp_path / "lens.csv").write_bytes(content)
    got = _lengths(tmp_path, "lens.csv", column)
    assert got.dtype == np.int64 and got.shape == (400,)
    assert set(got.tolist()) == expected


@pytest.mark.slow  # ~2 s: a subprocess that imports the planner
def test_a_bad_lengths_csv_exits_2_with_one_line_through_the_cli(tmp_path: Path) -> None:
    spec = (ROOT / "examples" / "llama-7b-chat.yaml").read_text()
    assert "prompt_tokens: {uniform: [200, 800]}" in spec
    (tmp_path / "spec.yaml").write_text(
        spec.replace("prompt_tokens: {uniform: [200, 800]}", "prompt_tokens: {csv: f.csv}")
    )
    (tmp_path / "f.csv").write_bytes(b"100\ninf\n")
    env = {**os.environ, "RIGHTSIZE_STORE": str(tmp_path / "store")}
    out = subprocess.run(
        [sys.executable, "-m", "rightsize", "plan", str(tmp_path / "spec.yaml")],
        capture_output=True, text=True, timeout=120, cwd=ROOT, env=env,
    )  # fmt: skip
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr + out.stdout
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {FIELD}.csv: "), out.stderr
    assert "row 2: 'inf' is more than 1000000 tokens" in lines[0]
