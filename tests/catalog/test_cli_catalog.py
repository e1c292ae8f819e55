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


def test_catalog_table_marks_prices_not_read_off_a_price_list(capsys: pytest.CaptureFixture[str]) -> None:
    """p5e.48xlarge's $43.26 (a Capacity Block rate) and g5.2xlarge's (an estimate) read like list prices in the
    on-demand column; the --json keys stay as they were."""
    from rightsize.catalog.model import is_unverified

    rc, out, _ = _run(["catalog", "--json", "--gpu", "--provider", "aws"], capsys)
    rows = {r["instance_type"]: r for r in json.loads(out)["instances"]}
    assert rc == 0 and is_unverified(rows["p5e.48xlarge"]["source"]) and is_unverified(rows["g5.2xlarge"]["source"])
    assert not is_unverified(rows["g5.xlarge"]["source"])
    rc, out, _ = _run(["catalog", "--gpu", "--provider", "aws"], capsys)
    lines = {line.split()[2]: line for line in out.splitlines() if line.strip().startswith("aws ")}
    assert rc == 0 and "43.26*" in lines["p5e.48xlarge"] and "1.212*" in lines["g5.2xlarge"]
    assert "*" not in lines["g5.xlarge"]
    assert "* price not read off a price list" in out and "rightsize catalog --json" in out
