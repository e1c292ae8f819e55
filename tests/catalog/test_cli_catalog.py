"""`rightsize catalog` through the real CLI entry point."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_kit import run_cli as _run


def test_catalog_json_lists_forty_instances(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = _run(["catalog", "--json", "--catalog", ""], capsys)
    data = json.loads(out)
    assert rc == 0 and data["count"] >= 40 and len(data["instances"]) == data["count"]
    row = data["instances"][0]
    assert {"on_demand_usd_per_hour", "price_date", "source", "device_class"} <= row.keys()
    assert any(a["name"] == "H200" for a in data["accelerators"])


def test_catalog_filters(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = _run(["catalog", "--json", "--gpu", "--provider", "gcp"], capsys)
    rows = json.loads(out)["instances"]
    assert rc == 0 and rows and all(r["provider"] == "gcp" and r["accelerator"] for r in rows)
    rc, out, _ = _run(["catalog", "--cpu"], capsys)
    assert rc == 0 and "c7i.48xlarge" in out and "g5.xlarge" not in out


def test_catalog_bad_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "x.csv"
    f.write_text("name,bandwidth_gbps\nX,1\n")
    rc, _, err = _run(["catalog", "--catalog", str(f)], capsys)
    assert rc == 2 and "error:" in err and "line 1" in err
