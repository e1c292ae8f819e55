"""`rightsize catalog import PATH`: prices from a SkyPilot catalog directory, dated and sourced per row."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from cli_kit import run_cli as _run

from rightsize.catalog import load_catalog
from rightsize.store import Store

HEADER = (
    "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,GpuInfo,Price,SpotPrice,Region,AvailabilityZone\n"
)


@pytest.fixture
def skypilot(tmp_path: Path) -> Path:
    root = tmp_path / "skypilot-catalog"
    old = root / "catalogs" / "v7" / "aws"
    old.mkdir(parents=True)
    (old / "vms.csv").write_text(HEADER + "c6i.2xlarge,,,8,16,,9.99,9.99,us-east-1,us-east-1a\n")
    aws = root / "catalogs" / "v8" / "aws"
    aws.mkdir(parents=True)
    (aws / "vms.csv").write_text(
        HEADER
        + "c6i.2xlarge,,,8,16,,0.36,0.15,us-east-1,us-east-1a\n"
        + "c6i.2xlarge,,,8,16,,0.36,0.17,us-east-1,us-east-1b\n"
        + "c6i.2xlarge,,,8,16,,0.40,0.20,eu-west-1,eu-west-1a\n"  # another region: not ours
        + "g5.xlarge,A10G,1,4,16,\"{'Gpus': []}\",1.10,,us-east-1,us-east-1a\n"
        + "c6i.4xlarge,,,16,32,,nan,,us-east-1,us-east-1a\n"  # no usable price: keeps the shipped one
    )
    gcp = root / "catalogs" / "v8" / "gcp"
    gcp.mkdir(parents=True)
    (gcp / "vms.csv").write_text(
        HEADER + "n1-highcpu-8,,,8,7.2,,0.30,0.07,us-central1,us-central1-a\n"
        ",T4,1,,,,0.40,0.12,us-central1,us-central1-a\n"
        ",T4,2,,,,0.80,0.24,us-central1,us-central1-a\n"
    )
    return root


def test_import_reprices_known_rows_from_the_newest_tables(
    skypilot: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "prices.csv"
    rc, stdout, err = _run(["catalog", "import", str(skypilot), "-o", str(out), "--date", "2026-11", "--json"], capsys)
    assert rc == 0, err
    report = json.loads(stdout)
    assert report["updated"] == 3 and report["tables"]["aws"].endswith("v8/aws/vms.csv")
    cat = load_catalog(out)
    rows = {(i.provider, i.instance_type): i for i in cat.instances}
    c6i = rows[("aws", "c6i.2xlarge")]
    assert (c6i.on_demand_usd_per_hour, c6i.spot_usd_per_hour) == (0.36, 0.16)  # spot: mean of the region's zones
    assert c6i.price_date == "2026-11" and "skypilot catalog import of catalogs/v8/aws/vms.csv" in c6i.source
    assert c6i.cpu_family == "intel-icelake"  # hardware facts stay ours
    g5 = rows[("aws", "g5.xlarge")]
    assert g5.on_demand_usd_per_hour == 1.10 and g5.spot_usd_per_hour is None and g5.accelerator == "A10G"
    t4 = rows[("gcp", "n1-highcpu-8+t4")]
    assert t4.on_demand_usd_per_hour == pytest.approx(0.70) and t4.spot_usd_per_hour == pytest.approx(0.19)
    shipped = {(i.provider, i.instance_type): i for i in load_catalog("").instances}
    assert rows[("aws", "c6i.4xlarge")] == shipped[("aws", "c6i.4xlarge")]  # "nan" is not a price


def test_import_refuses_to_overwrite_and_bad_input_exits_2(
    skypilot: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "prices.csv"
    out.write_text("keep me\n")
    rc, _, err = _run(["catalog", "import", str(skypilot), "-o", str(out)], capsys)
    assert rc == 2 and "--force" in err and out.read_text() == "keep me\n"
    rc, _, err = _run(["catalog", "import", str(skypilot), "-o", str(tmp_path / "x.csv"), "--date", "Nov"], capsys)
    assert rc == 2 and "--date" in err
    rc, _, err = _run(["catalog", "import", str(tmp_path / "empty"), "-o", str(tmp_path / "y.csv")], capsys)
    assert rc == 2 and "not a directory" in err
    (tmp_path / "empty").mkdir()
    rc, _, err = _run(["catalog", "import", str(tmp_path / "empty"), "-o", str(tmp_path / "y.csv")], capsys)
    assert rc == 2 and "no <cloud>/vms.csv" in err
    rc, stdout, err = _run(["catalog", "import", str(skypilot), "-o", str(out), "--force"], capsys)
    assert rc == 0 and "re-priced 3 catalog rows" in stdout and "median on-demand change" in stdout


def test_import_refuses_odd_outputs_dates_and_tables(
    skypilot: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fifo = tmp_path / "fifo.csv"
    os.mkfifo(fifo)  # a FIFO (or /dev/null) would be replaced by the atomic rename, or hang a plain write
    rc, _, err = _run(["catalog", "import", str(skypilot), "-o", str(fifo), "--force"], capsys)
    assert rc == 2 and "not a regular file" in err and stat.S_ISFIFO(fifo.stat().st_mode)
    rc, _, err = _run(
        ["catalog", "import", str(skypilot), "-o", str(tmp_path / "d.csv"), "--date", "2026-02-30"], capsys
    )
    assert rc == 2 and "--date: must be a date" in err and not (tmp_path / "d.csv").exists()
    real = tmp_path / "real.csv"
    real.write_text("old\n")
    link = tmp_path / "link.csv"
    link.symlink_to(real)
    rc, _, err = _run(["catalog", "import", str(skypilot), "-o", str(link), "--force", "--date", "2026-11"], capsys)
    assert rc == 0 and link.is_symlink() and real.read_text().startswith("provider,")  # the file it names is replaced
    odd = tmp_path / "odd"
    (odd / "aws" / "vms.csv").mkdir(parents=True)  # a folder named vms.csv is not a table
    rc, _, err = _run(["catalog", "import", str(odd), "-o", str(tmp_path / "o.csv")], capsys)
    assert rc == 2 and "no <cloud>/vms.csv" in err and "Traceback" not in err
    wide = tmp_path / "wide" / "aws"
    wide.mkdir(parents=True)
    (wide / "vms.csv").write_text("InstanceType,Price,Region\n" + '"' + "x" * 200_000 + '",1,us-east-1\n')
    rc, _, err = _run(["catalog", "import", str(tmp_path / "wide"), "-o", str(tmp_path / "w.csv")], capsys)
    assert rc == 2 and "is not a readable CSV" in err and "line" in err


def test_import_names_bad_prices_and_never_writes_over_a_database(
    skypilot: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the fixture's c6i.4xlarge row lists "nan": the summary says why it kept its shipped price
    rc, stdout, _ = _run(["catalog", "import", str(skypilot), "-o", str(tmp_path / "p.csv"), "--json"], capsys)
    assert rc == 0 and json.loads(stdout)["bad_prices"] == ["aws:us-east-1:c6i.4xlarge 'nan'"]
    bad = tmp_path / "bad" / "aws"
    bad.mkdir(parents=True)
    (bad / "vms.csv").write_text(HEADER + "c6i.2xlarge,,,8,16,,-0.5,,us-east-1,us-east-1a\n")
    rc, _, err = _run(["catalog", "import", str(tmp_path / "bad"), "-o", str(tmp_path / "b.csv")], capsys)
    assert rc == 2 and err.startswith("error: path: 1 of the catalog's instances are listed under ")
    assert "with no valid Price (e.g. aws:us-east-1:c6i.2xlarge '-0.5')" in err and not (tmp_path / "b.csv").exists()
    # another results store (not the configured one) is an SQLite file: --force does not write over it
    other = tmp_path / "other-store"
    with Store(other) as st:
        st.save_artifact(None, "note", {"name": "keep"})
    before = other.read_bytes()
    rc, _, err = _run(["catalog", "import", str(skypilot), "-o", str(other), "--force"], capsys)
    assert rc == 2 and "it is an SQLite database" in err and other.read_bytes() == before


def test_import_reads_a_bom_refuses_its_own_catalog_and_keeps_prices_the_loader_takes(
    skypilot: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A vms.csv with a byte-order mark was "needs columns InstanceType, Price, Region"; `-o mine.csv --force` with
    RIGHTSIZE_CATALOG=mine.csv dropped the file's own rows; a 1e-10 price was written, then refused by every
    command reading the file."""
    vms = skypilot / "catalogs" / "v8" / "aws" / "vms.csv"
    vms.write_bytes(b"\xef\xbb\xbf" + vms.read_bytes().replace(b"0.36,0.15", b"0.0000000001,0.15"))
    out = tmp_path / "o.csv"
    rc, _, err = _run(["catalog", "import", str(skypilot), "-o", str(out)], capsys)
    assert rc == 0, err
    load_catalog(out)  # every written price is one the loader takes
    mine = tmp_path / "mine.csv"
    mine.write_text(out.read_text())
    rc, _, err = _run(["catalog", "import", str(skypilot), "-o", str(mine), "--force", "--catalog", str(mine)], capsys)
    assert rc == 2 and "--output: is the catalog being read" in err


def test_import_of_one_cloud_says_the_other_clouds_rows_keep_their_shipped_prices(
    skypilot: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An aws-only folder said "N rows not listed there keep their shipped price" and nothing of gcp / azure."""
    import shutil

    shutil.rmtree(skypilot / "catalogs" / "v8" / "gcp")
    rc, out, err = _run(
        ["catalog", "import", str(skypilot), "-o", str(tmp_path / "p.csv"), "--date", "2026-11"], capsys
    )
    shipped = load_catalog("").instances
    counts = {p: sum(i.provider == p for i in shipped) for p in ("gcp", "azure")}
    text = " ".join(out.split())
    assert rc == 0, err
    assert f"gcp ({counts['gcp']} rows) and azure ({counts['azure']} rows) not in the import" in text
    assert "their rows keep their shipped prices" in text and "aws (" not in text.split("rows not listed there")[1]


def test_import_reads_only_where_a_skypilot_catalog_keeps_its_tables(
    skypilot: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`catalog import /` walked the whole tree (rglob, no depth limit) and built prices from any test fixture's
    aws/vms.csv, exit 0, its "version" a /v(N)/ anywhere in the path; now only the catalog's own layouts."""
    deep = tmp_path / "home" / "v99" / "project" / "tests" / "fixtures" / "aws"
    deep.mkdir(parents=True)
    (deep / "vms.csv").write_text(HEADER + "c6i.2xlarge,,,8,16,,0.01,0.01,us-east-1,us-east-1a\n")
    out = tmp_path / "o.csv"
    rc, stdout, err = _run(["catalog", "import", str(tmp_path / "home"), "-o", str(out)], capsys)
    assert rc == 2 and not out.exists() and err.count("\n") == 1 and "Traceback" not in err, err
    assert f"no <cloud>/vms.csv for aws, gcp, azure in {tmp_path / 'home'}" in err
    assert "catalogs/v<N>/<cloud>/vms.csv" in err
    # the catalogs folder, or one of its versions, is a catalog too; the version is the v<N> folder's own
    rc, stdout, _ = _run(["catalog", "import", str(skypilot / "catalogs"), "-o", str(out), "--json"], capsys)
    assert rc == 0 and json.loads(stdout)["tables"]["aws"].endswith("v8/aws/vms.csv")
    rc, stdout, _ = _run(["catalog", "import", str(skypilot / "catalogs" / "v7"), "-o", str(out), "--json", "--force"],
                         capsys)  # fmt: skip
    assert rc == 0 and json.loads(stdout)["tables"]["aws"].endswith("v7/aws/vms.csv")
