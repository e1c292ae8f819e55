"""A user catalog file is refused, with file, line and column, where it was once taken silently: repeated keys,
spot above on-demand, future dates, ambiguous short accelerator names; a region in capitals overrides."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest
from cli_kit import run_cli as _run

from rightsize.catalog import load_catalog
from rightsize.errors import SpecError

HEADER = (
    "provider,region,instance_type,vcpus,ram_gib,cpu_family,accelerator,accelerator_count,"
    "on_demand_usd_per_hour,spot_usd_per_hour,spot_interruption,price_date,source\n"
)
ACCS = "name,memory_gib,bandwidth_gbps,fp32_tflops,tf32_tflops,fp16_tflops,bf16_tflops,int8_tops,tdp_w,source,date\n"
G5 = "aws,us-east-1,g5.xlarge,4,16,amd-rome,A10G,1,{price},{spot},,{date},{source}\n"


def _g5(price: str = "0.70", spot: str = "", date: str = "2025-09", source: str = "ours") -> str:
    return G5.format(price=price, spot=spot, date=date, source=source)


def _refused(tmp_path: Path, text: str) -> str:
    f = tmp_path / "mine.csv"
    f.write_text(text)
    with pytest.raises(SpecError) as exc:
        load_catalog(f)
    msg = str(exc.value)
    assert msg.startswith(f"{f} line ") and "\n" not in msg
    return msg


def test_two_rows_of_the_user_file_with_one_key_are_refused_naming_both_lines(tmp_path: Path) -> None:
    msg = _refused(tmp_path, HEADER + _g5("0.70") + _g5("0.20"))
    assert msg.endswith(
        "mine.csv line 3: repeats line 2's provider, region and instance_type (aws, us-east-1, g5.xlarge); "
        "keep one of the two rows"
    )
    # the key folds provider and region case, so these are the same row too
    msg = _refused(tmp_path, HEADER + _g5() + _g5().replace("aws,us-east-1", "AWS,US-East-1"))
    assert "line 3: repeats line 2's" in msg


def test_repeated_accelerator_cpu_grid_power_and_link_rows_are_refused(tmp_path: Path) -> None:
    acc = "MI300X,192,5300,163,653,1307,1307,2615,750,AMD datasheet,2025-01\n"
    assert "line 3: repeats line 2's name (MI300X)" in _refused(tmp_path, ACCS + acc + acc)
    cpus = "name,vendor,isa,fp32_flop_per_cycle_per_core,bf16_flop_per_cycle_per_core,int8_flop_per_cycle_per_core,"
    cpu = "zen9,amd,avx2,32,32,64,3,100,x,2025-01\n"
    text = cpus + "sustained_ghz,memory_bandwidth_gbps,source,date\n" + cpu + cpu
    assert "line 3: repeats line 2's name (zen9)" in _refused(tmp_path, text)
    grid = "provider,region,pue,kg_co2e_per_kwh,source,date\n"
    text = grid + "aws,us-east-1,1.5,0.05,a,2026-11\naws,us-east-1,1.2,0.05,b,2026-11\n"
    assert "line 3: repeats line 2's provider and region (aws, us-east-1)" in _refused(tmp_path, text)
    power = "kind,key,min_w,max_w,source,date\n"
    text = power + "gpu,T4,10,80,a,2026-11\ncpu,T4,1,2,b,2026-11\ngpu,T4,11,81,c,2026-11\n"
    assert "line 4: repeats line 2's kind and key (gpu, T4)" in _refused(tmp_path, text)
    links = "provider,instance_type,network_gbps,gpu_link_gbytes_per_s,source,date\n"
    text = links + "aws,g5.xlarge,1,0,a,2026-11\naws,g5.xlarge,2,0,b,2026-11\n"
    assert "line 3: repeats line 2's provider and instance_type (aws, g5.xlarge)" in _refused(tmp_path, text)


def test_overriding_a_shipped_row_stays_silent(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "mine.csv"
    f.write_text(HEADER + _g5("0.70"))
    g5 = [i for i in load_catalog(f).instances if i.instance_type == "g5.xlarge"]
    assert [i.on_demand_usd_per_hour for i in g5] == [0.70]
    assert capsys.readouterr() == ("", "")


def test_region_case_is_folded_so_a_capitalised_region_overrides(tmp_path: Path) -> None:
    f = tmp_path / "mine.csv"
    f.write_text(HEADER + _g5("0.70").replace("aws,us-east-1", "AWS,US-EAST-1"))
    base = load_catalog("")
    cat = load_catalog(f)
    g5 = [i for i in cat.instances if i.instance_type == "g5.xlarge"]
    assert len(cat.instances) == len(base.instances)
    assert [(i.provider, i.region, i.on_demand_usd_per_hour) for i in g5] == [("aws", "us-east-1", 0.70)]


def test_spot_above_on_demand_is_refused_naming_the_cell(tmp_path: Path) -> None:
    msg = _refused(tmp_path, HEADER + _g5(price="2", spot="5"))
    assert msg.endswith(
        "mine.csv line 2, column 'spot_usd_per_hour': spot price 5 is above on-demand 2; write the spot price, "
        "or leave it empty when there is no spot offer"
    )
    f = tmp_path / "ok.csv"
    f.write_text(HEADER + _g5(price="2", spot="2"))  # at on-demand: documented as "no spot capacity"
    g5 = next(i for i in load_catalog(f).instances if i.instance_type == "g5.xlarge")
    assert g5.price_usd_per_hour("spot") is None


def test_the_shipped_data_has_no_spot_price_above_on_demand_and_no_future_date() -> None:
    cat = load_catalog("")
    today = dt.datetime.now(dt.timezone.utc).date().isoformat()
    for i in cat.instances:
        assert i.spot_usd_per_hour is None or i.spot_usd_per_hour <= i.on_demand_usd_per_hour, i.key
        assert i.price_date <= today, i.key
    assert all(a.date <= today for a in cat.accelerators.values())


def test_a_future_date_is_refused_naming_the_cell(tmp_path: Path) -> None:
    msg = _refused(tmp_path, HEADER + _g5(date="2030-01"))
    today = max(dt.datetime.now(dt.timezone.utc).date(), dt.date.today()).isoformat()
    assert msg.endswith(
        f"mine.csv line 2, column 'price_date': is 2030-01, after today ({today}); write the date the values were "
        "read, or leave it empty for the file's date"
    )
    tomorrow = (dt.date.fromisoformat(today) + dt.timedelta(days=1)).isoformat()
    assert "column 'price_date': is " in _refused(tmp_path, HEADER + _g5(date=tomorrow))
    assert "column 'date': is 2031-02-03" in _refused(tmp_path, ACCS + "X1,1,1,1,1,1,1,1,1,s,2031-02-03\n")
    f = tmp_path / "ok.csv"
    f.write_text(HEADER + _g5(date=today) + _g5(date="").replace("g5.xlarge", "g5.2xlarge"))
    assert load_catalog(f)  # today, and an empty date (the file's own), load


@pytest.mark.parametrize(
    ("value", "column", "problem"),
    [
        ("A100", "accelerator", "'A100' is ambiguous: A100-40GB, A100-80GB, A100-80GB-PCIe; write one of them"),
        ("a100", "accelerator", "'a100' is ambiguous: A100-40GB, A100-80GB, A100-80GB-PCIe; write one of them"),
        ("V100", "accelerator", "'V100' is ambiguous: V100-16GB, V100-16GB-PCIe; write one of them"),
        ("a10", "accelerator", "unknown name 'a10'. Did you mean 'A10'?"),  # a case slip, not a short name
        ("amd", "cpu_family", "'amd' is ambiguous: amd-genoa, amd-milan, amd-rome, amd-turin; write one of them"),
    ],
)
def test_a_short_accelerator_or_cpu_name_lists_what_it_could_mean(
    tmp_path: Path, value: str, column: str, problem: str
) -> None:
    row = _g5().replace(",A10G,", f",{value},") if column == "accelerator" else _g5().replace("amd-rome", value)
    assert _refused(tmp_path, HEADER + row).endswith(f"mine.csv line 2, column {column!r}: {problem}")


def test_catalog_cli_refuses_the_bad_file_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "mine.csv"
    f.write_text(HEADER + _g5("0.70") + _g5("0.20"))
    rc, out, err = _run(["catalog", "--catalog", str(f)], capsys)
    assert (rc, out) == (2, "") and err.startswith(f"error: {f} line 3: repeats line 2's") and err.count("\n") == 1


def test_import_leaves_spot_empty_when_the_zones_mean_is_above_on_demand(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    aws = tmp_path / "sky" / "catalogs" / "v8" / "aws"
    aws.mkdir(parents=True)
    (aws / "vms.csv").write_text(
        "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,GpuInfo,Price,SpotPrice,Region,AvailabilityZone\n"
        "c6i.2xlarge,,,8,16,,0.36,0.50,us-east-1,us-east-1a\n"
        "c6i.4xlarge,,,16,32,,0.70,0.30,us-east-1,us-east-1a\n"
    )
    out = tmp_path / "prices.csv"
    rc, _, err = _run(["catalog", "import", str(tmp_path / "sky"), "-o", str(out), "--date", "2025-11"], capsys)
    assert rc == 0, err
    rows = {i.instance_type: i for i in load_catalog(out).instances}  # loads: no spot above on-demand written
    assert rows["c6i.2xlarge"].spot_usd_per_hour is None and rows["c6i.4xlarge"].spot_usd_per_hour == 0.30


def test_import_refuses_a_future_date(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["catalog", "import", str(tmp_path), "-o", str(tmp_path / "p.csv"), "--date", "2030-01"]
    rc, out, err = _run(argv, capsys)
    assert (rc, out) == (2, "") and err.startswith("error: --date: 2030-01 is after today (")
    assert err.endswith("); pass the date of the prices, which --catalog refuses in the future\n")


def test_a_filter_that_matches_nothing_exits_2_naming_it(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = _run(["catalog", "--catalog", "", "--region", "nowhere"], capsys)
    assert (rc, out) == (2, "")
    assert err == (
        "error: --region: no instances in region 'nowhere' in the catalog (known: eastus, us-central1, us-east-1, "
        "us-east-2, us-east4). Add rows with --catalog FILE\n"
    )
    rc, _, err = _run(["catalog", "--catalog", "", "--json", "--region", "US-EAST1"], capsys)
    assert rc == 2 and "Did you mean 'us-east-1'?" in err
    rc, out, err = _run(["catalog", "--catalog", "", "--provider", "gcp", "--region", "us-east-1", "--gpu"], capsys)
    assert (rc, out) == (2, "")
    assert err == (
        "error: no instances match --provider gcp --region us-east-1 --gpu (gcp: cpu and gpu in us-central1, "
        "us-east4); drop a filter or add rows with --catalog FILE\n"
    )
    rc, out, _ = _run(["catalog", "--catalog", "", "--json", "--region", "US-EAST-2", "--gpu"], capsys)
    assert rc == 0 and json.loads(out)["count"] >= 1  # case-insensitive, as before


def test_a_long_region_list_is_cut_short(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "mine.csv"
    f.write_text(HEADER + "".join(_g5().replace("us-east-1", f"lab-{n:02d}") for n in range(20)))
    rc, _, err = _run(["catalog", "--catalog", str(f), "--region", "nowhere"], capsys)
    assert rc == 2 and "(known: eastus, lab-00, lab-01," in err and ", … (13 more)). Add rows" in err


def test_more_physical_cores_than_vcpus_is_refused_naming_the_cell(tmp_path: Path) -> None:
    """512 physical cores on a 2-vCPU c7i.large had been taken, and projected it 90x faster."""
    header = HEADER.rstrip("\n") + ",physical_cores\n"
    msg = _refused(tmp_path, header + _g5().rstrip("\n") + ",512\n")
    assert msg.endswith("line 2, column 'physical_cores': is 512, more than the 4 vCPUs; write the physical cores "
                        "behind the vCPUs (vcpus / 2 with SMT), or leave it empty")  # fmt: skip
    ok = tmp_path / "ok.csv"
    ok.write_text(header + _g5().rstrip("\n") + ",2\n")
    assert any(i.physical_cores == 2 for i in load_catalog(ok).instances if i.instance_type == "g5.xlarge")


@pytest.mark.parametrize("cell", ["1_000", "١٢"], ids=["underscore", "arabic-indic-digits"])
def test_a_price_python_reads_but_no_spreadsheet_writes_is_refused(tmp_path: Path, cell: str) -> None:
    msg = _refused(tmp_path, HEADER + _g5(price=cell))
    assert msg.endswith(f"column 'on_demand_usd_per_hour': must be a plain decimal number, got {cell!r}")


@pytest.mark.parametrize(
    ("text", "where", "problem"),
    [
        ("", "", "is empty; a catalog CSV is a header row, then one row per entry (docs/catalog.md)"),
        ("\n\n" + HEADER + _g5(), " line 1", "is blank; the header must be the file's first line"),
        (HEADER, "", "has a header but no rows; add a row per entry"),
        (HEADER + "\n,,,\n", "", "has a header but no rows; add a row per entry"),
    ],
    ids=["empty", "blank-first-line", "header-only", "header-and-blank-rows"],
)
def test_an_empty_or_headless_file_says_so(tmp_path: Path, text: str, where: str, problem: str) -> None:
    """An empty file, or blank lines before the header, read 'line 1: header matches no catalog table'; a header
    alone was taken silently."""
    f = tmp_path / "mine.csv"
    f.write_text(text)
    with pytest.raises(SpecError) as exc:
        load_catalog(f)
    assert str(exc.value) == f"{f}{where}: {problem}"


def test_an_instance_type_that_differs_only_in_case_is_refused(tmp_path: Path) -> None:
    """G5.XLARGE had been added beside the shipped g5.xlarge it was meant to replace: both were planned."""
    msg = _refused(tmp_path, HEADER + _g5().replace("g5.xlarge", "G5.XLARGE"))
    assert msg.endswith("line 2, column 'instance_type': 'G5.XLARGE' differs from 'g5.xlarge' only in case; write "
                        "'g5.xlarge' to replace that row, or a new name to add one")  # fmt: skip


K80 = "K80,12,240,4.37,0,0,0,0,150,NVIDIA Tesla K80 datasheet,2026-11\n"
NC6 = "azure,eastus,Standard_NC6,6,56,intel-cascade-lake,K80,1,0.90,,,2026-11,my quote\n"


def test_new_hardware_comes_in_two_files_given_in_any_order(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An instance with a GPU the catalog lacks needs the GPU's accelerators row too: one file cannot hold both
    tables, and `--catalog a --catalog b` had kept b and dropped a, silently (RIGHTSIZE_CATALOG=a:b: one missing
    file)."""
    accs, vms = tmp_path / "gpus.csv", tmp_path / "vms.csv"
    accs.write_text(ACCS + K80)
    vms.write_text(HEADER + NC6)
    msg = _refused(tmp_path, HEADER + NC6)  # alone: the fix is in the message
    assert "unknown name 'K80'" in msg and "add its row in a file of accelerators" in msg
    for order in ([vms, accs], [accs, vms]):
        cat = load_catalog(order)
        (nc6,) = [i for i in cat.instances if i.instance_type == "Standard_NC6"]
        assert nc6.accelerator == "K80" and cat.accelerators["K80"].bandwidth_gbps == 240
    rc, out, err = _run(["catalog", "--catalog", str(vms), "--catalog", str(accs), "--gpu", "--provider", "azure",
                         "--json"], capsys)  # fmt: skip
    assert rc == 0, err
    assert "Standard_NC6" in {row["instance_type"] for row in json.loads(out)["instances"]}
    monkeypatch.setenv("RIGHTSIZE_CATALOG", f"{vms}:{accs}")
    rc, out, err = _run(["catalog", "--gpu", "--provider", "azure", "--json"], capsys)
    assert rc == 0 and "Standard_NC6" in {row["instance_type"] for row in json.loads(out)["instances"]}, err
    rc, out, err = _run(["catalog", "--catalog", "", "--gpu", "--provider", "azure", "--json"], capsys)
    assert rc == 0 and "Standard_NC6" not in {row["instance_type"] for row in json.loads(out)["instances"]}, err


def test_a_price_only_row_keeps_the_replaced_rows_physical_cores(tmp_path: Path) -> None:
    """c7a.large has 2 cores (no SMT): a row in the docs' old example columns made it 1, and a cheaper price a
    dearer plan (3 replicas); the hardware does not change with the price, and a written value still wins."""
    f = tmp_path / "mine.csv"

    def c7a(text: str) -> tuple[int | None, int, float]:
        f.write_text(text)
        (i,) = [i for i in load_catalog(f).instances if i.key == ("aws", "us-east-1", "c7a.large")]
        return i.physical_cores, i.cores, i.on_demand_usd_per_hour

    assert c7a(HEADER + "aws,us-east-1,c7a.large,2,4,amd-genoa,,0,0.05,,,2026-10,ours\n") == (2, 2, 0.05)
    with_cores = HEADER.replace("source", "physical_cores,source")
    assert c7a(with_cores + "AWS,us-east-1,c7a.large,2,4,amd-genoa,,0,0.05,,,2026-10,,ours\n") == (2, 2, 0.05)
    assert c7a(with_cores + "aws,us-east-1,c7a.large,2,4,amd-genoa,,0,0.05,,,2026-10,1,ours\n") == (1, 1, 0.05)
    # other hardware under the same name: blank is vCPUs/2 again
    assert c7a(HEADER + "aws,us-east-1,c7a.large,4,8,amd-genoa,,0,0.05,,,2026-10,ours\n") == (None, 2, 0.05)
    assert c7a(HEADER + "aws,us-east-1,c7a.large,2,4,intel-icelake,,0,0.05,,,2026-10,ours\n") == (None, 1, 0.05)
    # the missing-column error lists the optional column too, so a header copied from it carries the cores
    msg = _refused(tmp_path, HEADER.replace("on_demand_usd_per_hour,", "") + "aws,us-east-1,c7a.large,2,4,amd-genoa,"
                   ",0,,,2026-10,ours\n")  # fmt: skip
    assert msg.endswith("spot_interruption, price_date, source, and may add physical_cores")


@pytest.mark.parametrize(
    ("on_demand", "spot", "column", "fix"),
    [
        ("0", "", "on_demand_usd_per_hour", "for hardware you own, give its amortised cost per hour"),
        ("-0.05", "", "on_demand_usd_per_hour", "for hardware you own, give its amortised cost per hour"),
        ("0.70", "0", "spot_usd_per_hour", "leave it empty when there is no spot offer"),
    ],
)
def test_a_price_of_0_or_below_is_refused_in_words(tmp_path: Path, on_demand: str, spot: str, column: str,
                                                   fix: str) -> None:  # fmt: skip
    """A free row is not planned (its replica counts would tie at $0, the cost ratios divide by it); the error had
    read "must be >= 1e-09, got '0'"."""
    got = spot or on_demand
    assert _refused(tmp_path, HEADER + _g5(on_demand, spot)).endswith(
        f"mine.csv line 2, column {column!r}: must be more than 0 (a price per hour), got {got!r}; {fix}"
    )


@pytest.mark.parametrize(
    ("on_demand", "spot", "column"),
    [("1e-300", "", "on_demand_usd_per_hour"), ("0.0000009", "", "on_demand_usd_per_hour"),
     ("0.70", "1e-300", "spot_usd_per_hour")],
)  # fmt: skip
def test_a_price_below_a_millionth_of_a_dollar_per_hour_is_refused(tmp_path: Path, on_demand: str, spot: str,
                                                                   column: str) -> None:  # fmt: skip
    """$1e-300/h was planned: "$7e-300/h" and "(526000000.0x the cost)"."""
    msg = _refused(tmp_path, HEADER + _g5(on_demand, spot))
    assert f"mine.csv line 2, column {column!r}: is ${float(spot or on_demand):g} per hour, below $1e-06" in msg
    assert "write the price in USD per hour" in msg
    ok = tmp_path / "ok.csv"
    ok.write_text(HEADER + _g5("0.000001"))
    assert any(i.on_demand_usd_per_hour == 1e-6 for i in load_catalog(ok).instances)
