"""A user's ``--catalog`` reaches every consumer: the memory tiers, a stored plan's report, the dashboard's
report page and its prices. Each command loads the catalog once and passes it down; nothing below reads it."""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path

import pytest
from report_kit import build_store

from rightsize.catalog import load_catalog
from rightsize.cli.app import main
from rightsize.report.dashboard import running_dashboard

ACCELERATORS = (
    "name,memory_gib,bandwidth_gbps,fp32_tflops,tf32_tflops,fp16_tflops,bf16_tflops,int8_tops,tdp_w,source,date\n"
    "Z9,5,900,40,80,160,160,320,200,a test accelerator,2026-11\n"
)
INSTANCES = (
    "provider,region,instance_type,vcpus,ram_gib,cpu_family,accelerator,accelerator_count,on_demand_usd_per_hour,"
    "spot_usd_per_hour,spot_interruption,price_date,source\n"
    "aws,us-east-1,zz.reach,4,16,amd-rome,A10G,1,0.011,,,2026-11,a test row\n"
)


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    with pytest.raises(SystemExit) as done:
        main(list(args))
    out = capsys.readouterr()
    return int(done.value.code or 0), out.out, out.err


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.read().decode()


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, Path]:
    monkeypatch.setenv("RIGHTSIZE_CATALOG", "")
    monkeypatch.setenv("COLUMNS", "200")
    acc, inst = tmp_path / "acc.csv", tmp_path / "inst.csv"
    acc.write_text(ACCELERATORS)
    inst.write_text(INSTANCES)
    store = tmp_path / "store.sqlite"
    build_store(store)
    return acc, inst, store


@pytest.mark.slow  # seconds: make test runs it, make test-fast skips it
def test_memory_tiers_come_from_the_users_catalog(
    files: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    acc, _, _ = files
    rc, out, err = _run(capsys, "memory", "distilbert", "--tiny", "--device", "cuda", "--catalog", str(acc), "--json")
    assert rc == 0, err
    tiers = {t["memory_gib"]: t for t in json.loads(out)["tiers"]}
    assert 5 in tiers and "Z9" in json.dumps(tiers[5])
    rc, out, _ = _run(capsys, "memory", "distilbert", "--tiny", "--device", "cuda", "--json")
    assert rc == 0 and 5 not in {t["memory_gib"] for t in json.loads(out)["tiers"]}


def test_report_and_dashboard_use_the_users_catalog(
    files: tuple[Path, Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    acc, inst, store = files
    out = tmp_path / "r.html"
    rc, _, err = _run(capsys, "report", "--store", str(store), "-o", str(out), "--catalog", str(acc))
    assert rc == 0, err
    assert "Z9 5 GiB" in out.read_text()
    rc, _, err = _run(capsys, "report", "--store", str(store), "-o", str(out))
    assert rc == 0 and "Z9" not in out.read_text()
    with running_dashboard(store, catalog=load_catalog(acc)) as url:
        report_id = re.findall(r'href="/report/(\w+)"', _get(url + "/"))[0]
        assert "Z9 5 GiB" in _get(f"{url}/report/{report_id}")
    with running_dashboard(store, catalog=load_catalog(inst)) as url:
        assert "zz.reach" in _get(url + "/cost?device_class=gpu")  # the cheapest single-A10G instance now
    with running_dashboard(store, catalog=load_catalog("")) as url:
        assert "zz.reach" not in _get(url + "/cost?device_class=gpu")


def test_a_bad_catalog_file_is_a_one_line_error(
    files: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    _, _, store = files
    for args in (["report", "--store", str(store)], ["dashboard", "--store", str(store), "--port", "0"]):
        rc, _, err = _run(capsys, *args, "--catalog", "/nonexistent/cat.csv")
        assert rc == 2 and "catalog file" in err and "Traceback" not in err
