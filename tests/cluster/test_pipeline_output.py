"""`pipeline --output`: the file appears whole when the run finishes; a run stopped half-way leaves the old one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rightsize.cluster.pipeline import ResultWriter


@pytest.mark.parametrize("name", ["out.jsonl", "out.parquet"])
def test_an_unfinished_run_leaves_an_existing_output_as_it_was(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    path.write_bytes(b"precious\n")
    writer = ResultWriter(path)
    writer.write({"id": [1, 2], "label": [0, 1], "score": [0.5, 0.25]})
    assert path.read_bytes() == b"precious\n"  # was emptied when the run started
    writer.close()  # Ctrl-C, a crash: not kept
    assert path.read_bytes() == b"precious\n" and [p.name for p in tmp_path.iterdir()] == [name]
    writer = ResultWriter(path)
    writer.write({"id": [1, 2], "label": [0, 1], "score": [0.5, 0.25]})
    writer.close(keep=True)
    assert [p.name for p in tmp_path.iterdir()] == [name]
    if name.endswith(".jsonl"):
        assert [json.loads(line)["id"] for line in path.read_text().splitlines()] == [1, 2]
    else:
        import pyarrow.parquet as pq

        assert pq.read_table(path).column("id").to_pylist() == [1, 2]
