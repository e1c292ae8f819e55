"""`pipeline --input`: the file's read is split into its fixed cost (imports, the reader's setup) and its cost per
item, and only the per-item part is scaled to the full job."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest

from rightsize.cluster import engines
from rightsize.cluster.items import ItemSpec
from rightsize.spec import parse_spec

IMPORTS_S = 0.3  # the first read's one-time cost: pyarrow's import took 0.36 CPU s in the probe


def _burn(seconds: float) -> None:
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def _slow_reader(monkeypatch: pytest.MonkeyPatch, per_read_s: float, per_row_s: float) -> None:
    """``read_table`` costing IMPORTS_S on its first call, then ``per_read_s`` + ``per_row_s`` a row (CPU time)."""
    real, calls = engines.read_table, []

    def read(path: str | Path, spec: ItemSpec) -> Any:
        table = real(path, spec)
        _burn((0.0 if calls else IMPORTS_S) + per_read_s + per_row_s * table.num_rows)
        calls.append(path)
        return table

    monkeypatch.setattr(engines, "read_table", read)


def _items(path: Path, n: int) -> Path:
    path.write_text("".join(json.dumps({"id": 7 * i + 3, "text": f"review number {i}"}) + "\n" for i in range(n)))
    return path


def _read(path: Path) -> engines.EngineRun:
    from rightsize.cluster.pipeline import make_plan

    w = parse_spec({"model": "distilbert", "tiny": True, "batch_sizes": [8], "input": {"seq_len": 8}})
    plan = make_plan(w, items=1, input_path=str(path), ray=False, workers=1, batch_size=None, device=None,
                     precision=None)  # fmt: skip
    run = engines.EngineRun("local", 1, 0.0)
    assert engines.read_input(plan, run).num_rows == len(path.read_text().splitlines())
    return run


def test_a_files_one_time_read_cost_is_not_charged_per_item(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A 60-row file read at 5,924 µs/item (0.36 CPU s of imports over 60 rows), a 600-row one at 603: the plan for
    5M items took that as the host's feed rate, and a T4 at 2.81 h beat the L4 at 1.18 h."""
    _slow_reader(monkeypatch, per_read_s=0.002, per_row_s=200e-6)
    run = _read(_items(tmp_path / "in.jsonl", 600))
    per_item = run.driver_stages["read"]["cpu_s"] / 600
    assert per_item == pytest.approx(200e-6, abs=40e-6)  # not (0.3 + 0.002) / 600 + 200 µs = 703 µs
    assert run.fixed_stages["read"]["cpu_s"] >= IMPORTS_S + 0.002  # and pyarrow's own import, if it is the first
    assert not run.notes  # 120 ms of rows against 2 ms a read: told apart


def test_a_file_too_small_to_tell_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _slow_reader(monkeypatch, per_read_s=0.005, per_row_s=0.0)
    run = _read(_items(tmp_path / "in.jsonl", 60))
    assert run.driver_stages["read"]["cpu_s"] / 60 < 50e-6  # the 5 ms a read is not 83 µs an item
    assert run.fixed_stages["read"]["cpu_s"] >= IMPORTS_S
    (note,) = run.notes
    assert re.match(r"input stages: the 60-row file is too small to tell its read cost per item \(one row reads in "
                    r"[5-9]\.\d ms, all 60 in [5-9]\.\d ms of CPU, after 0\.\d\d CPU s once", note)  # fmt: skip
    assert note.endswith("µs/item: give --input thousands of rows to measure it")
