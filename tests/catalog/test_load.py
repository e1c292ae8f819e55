"""Shipped catalog data loads, has what the issue asks for, and user files override by key."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_kit import run_cli

from rightsize.catalog import load_catalog
from rightsize.errors import NotFoundError, SpecError

HEADER = (
    "provider,region,instance_type,vcpus,ram_gib,cpu_family,accelerator,accelerator_count,"
    "on_demand_usd_per_hour,spot_usd_per_hour,spot_interruption,price_date,source\n"
)


def test_shipped_catalog_has_forty_priced_dated_sourced_instances() -> None:
    cat = load_catalog("")
    assert len(cat.instances) >= 40
    assert {i.provider for i in cat.instances} == {"aws", "gcp", "azure"}
    for i in cat.instances:
        assert i.on_demand_usd_per_hour > 0 and i.price_date[:2] == "20" and i.source
        assert i.cpu_family in cat.cpus
        assert i.accelerator is None or i.accelerator in cat.accelerators
    gpus = {i.accelerator for i in cat.instances if i.accelerator}
    assert {"T4", "A10G", "L4", "V100-16GB", "A100-40GB", "A100-80GB", "H100", "H200"} <= gpus
    cpu_types = {i.instance_type.split(".")[0] for i in cat.instances if i.provider == "aws" and not i.accelerator}
    assert {"c6i", "c7i", "m7i", "r7i"} <= cpu_types
    for a in cat.accelerators.values():
        assert a.source and a.date and a.memory_gib > 0 and a.bandwidth_gbps > 0
    # Spot is cheaper than on-demand wherever it is listed.
    assert all(i.spot_usd_per_hour < i.on_demand_usd_per_hour for i in cat.instances if i.spot_usd_per_hour)


def test_reference_numbers_survive_loading() -> None:
    cat = load_catalog("")
    h100 = cat.accelerators["H100"]
    assert h100.bandwidth_gbps == 3350 and h100.tflops["bf16"] == 989 and h100.peak_flops_per_s("fp32") == 67e12
    assert cat.accelerators["T4"].tflops["bf16"] == 0.0  # no native bf16 on Turing
    g5 = next(i for i in cat.instances if i.instance_type == "g5.xlarge")
    assert (g5.vcpus, g5.accelerator, g5.on_demand_usd_per_hour, g5.device_class) == (4, "A10G", 1.006, "gpu")
    c7a = next(i for i in cat.instances if i.instance_type == "c7a.2xlarge")
    assert c7a.cores == 8  # no SMT
    assert next(i for i in cat.instances if i.instance_type == "c7i.2xlarge").cores == 4


def test_user_file_replaces_same_key_and_adds_new(tmp_path: Path) -> None:
    f = tmp_path / "mine.csv"
    f.write_text(
        HEADER
        + "aws,us-east-1,g5.xlarge,4,16,amd-rome,A10G,1,0.70,,,2025-09,negotiated\n"
        + "onprem,lab,box-a100,32,256,amd-milan,A100-80GB,4,2.0,,,,\n"
    )
    base = load_catalog("")
    cat = load_catalog(f)
    assert len(cat.instances) == len(base.instances) + 1
    g5 = [i for i in cat.instances if i.instance_type == "g5.xlarge"]
    assert len(g5) == 1 and g5[0].on_demand_usd_per_hour == 0.70 and g5[0].source == "negotiated"
    assert g5[0].price_usd_per_hour("spot") is None
    box = cat.instances[-1]
    assert box.provider == "onprem" and box.source == "user catalog mine.csv" and len(box.price_date) == 10


def test_env_var_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "acc.csv"
    f.write_text(
        "name,memory_gib,bandwidth_gbps,fp32_tflops,tf32_tflops,fp16_tflops,bf16_tflops,int8_tops,tdp_w,source,date\n"
        "MI300X,192,5300,163,653,1307,1307,2615,750,AMD datasheet,2025-01\n"
    )
    monkeypatch.setenv("RIGHTSIZE_CATALOG", str(f))
    assert load_catalog().accelerators["MI300X"].memory_gib == 192


def test_a_header_with_a_trailing_comma_loads(tmp_path: Path) -> None:
    """A spreadsheet's header ending in "," names no column: its full rows were refused as short, naming column ''."""
    f = tmp_path / "trail.csv"
    f.write_text(HEADER.rstrip("\n") + ",\n" + "aws,us-east-1,ok1,4,16,amd-rome,,0,1.0,,,2025-01,s\n")
    assert any(i.instance_type == "ok1" for i in load_catalog(f).instances)


@pytest.mark.parametrize(
    ("row", "line", "column", "hint"),
    [
        ("aws,us-east-1,x1,4,16,amd-rome,,0,abc,,,2025-01,s", 3, "on_demand_usd_per_hour", "number"),
        ("aws,us-east-1,x1,4,16,amd-rome,A10GG,1,1.0,,,2025-01,s", 3, "accelerator", "Did you mean 'A10G'"),
        ("aws,us-east-1,x1,4,16,amd-rome,,0,1.0,,30%,2025-01,s", 3, "spot_interruption", "<5%"),
        ("aws,us-east-1,x1,four,16,amd-rome,,0,1.0,,,2025-01,s", 3, "vcpus", "whole number"),
        ("aws,us-east-1,x1,4,16,amd-rome,,0,1.0,,,June 2025,s", 3, "price_date", "YYYY-MM"),
        ("aws,us-east-1,x1,4,16,amd-rome,,0,inf,,,2025-01,s", 3, "on_demand_usd_per_hour", "finite"),
        ("aws,us-east-1,x1,4,16,amd-rome,,0,NaN,,,2025-01,s", 3, "on_demand_usd_per_hour", "must be a finite number"),
        ("aws,us-east-1,x1,4,16,amd-rome,FOO9000,1,1.0,,,2025-01,s", 3, "accelerator", ". Known: A"),  # names, a fix
        ("aws,us-east-1,x1,4", 3, "ram_gib", "is missing: the row has 4 of the header's 13 cells"),  # was "empty"
        ("aws,us-east-1,x1,4,16,amd-rome,,0,1.0,,,2025-01", 3, "source", "the row has 12 of the header's 13 cells"),
        ("aws,us-east-1,x1,100000000000000000000,16,amd-rome,,0,1.0,,,2025-01,s", 3, "vcpus", "whole number"),
        ("aws,us-east-1,x1,4,16,amd-rome,,0,1.0,,,2025-13-45,s", 3, "price_date", "YYYY-MM"),
        ("aws,us-east-1,x1,4,16,amd-rome,,0,1.0,,,2025-01,=HYPERLINK(x)", 3, "source", "formula"),
        ("aws,us-east-1,x1,4,16,amd-rome,,0,1.0,,,2025-01,-2+3+cmd|' /C calc'!A0", 3, "source", "formula"),  # DDE
    ],
)
def test_bad_user_row_names_file_line_and_column(tmp_path: Path, row: str, line: int, column: str, hint: str) -> None:
    f = tmp_path / "bad.csv"
    f.write_text(HEADER + "aws,us-east-1,ok1,4,16,amd-rome,,0,1.0,,,2025-01,s\n" + row + "\n")
    with pytest.raises(SpecError) as exc:
        load_catalog(f)
    msg = str(exc.value)
    assert str(f) in msg and f"line {line}" in msg and f"column {column!r}" in msg and hint in msg


def test_missing_column_and_missing_file(tmp_path: Path) -> None:
    f = tmp_path / "cols.csv"
    f.write_text("provider,region,instance_type\naws,x,y\n")
    with pytest.raises(SpecError, match=r"line 1.*missing column"):
        load_catalog(f)
    with pytest.raises(NotFoundError, match="does not exist"):
        load_catalog(tmp_path / "nope.csv")


def test_a_non_utf8_catalog_is_a_one_line_error(tmp_path: Path) -> None:
    f = tmp_path / "latin.csv"
    f.write_bytes((HEADER + "aws,us-east-1,caf\xe9,4,16,amd-rome,,0,1.0,,,2025-01,s\n").encode("latin-1"))
    with pytest.raises(SpecError, match="not UTF-8"):
        load_catalog(f)


@pytest.mark.slow  # ~2 s on 2 cores: kept out of make test-fast
def test_fuzzed_catalog_rows_load_or_name_file_line_and_column(tmp_path: Path) -> None:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    cell = st.one_of(
        st.sampled_from(["", "1", "0", "-1", "inf", "nan", "1e20", "2025-13-45", "2025-06", "=cmd()", "@x", "aws",
                         "amd-rome", "A10G", "<5%", "4", "0.5"]),
        st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters=',"\r\n'), max_size=12),
    )  # fmt: skip

    @settings(max_examples=200, deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
    @given(row=st.lists(cell, min_size=13, max_size=13))
    def check(row: list[str]) -> None:
        f = tmp_path / "fuzz.csv"
        f.write_text(HEADER + ",".join(row) + "\n", encoding="utf-8")
        try:
            cat = load_catalog(f)
        except SpecError as exc:
            assert str(f) in str(exc) and "\n" not in str(exc)
        else:
            for i in cat.instances:
                assert 0 < i.on_demand_usd_per_hour <= 1e9 and 1 <= i.vcpus <= 100_000

    check()


def test_a_spreadsheets_trailing_empty_columns_and_signed_free_text_still_load(tmp_path: Path) -> None:
    """The checks above must not refuse what loaded before: a header ending in ",," and a note like "+1 GPU spare"."""
    f = tmp_path / "ok.csv"
    f.write_text(HEADER.rstrip("\n") + ",,\n" + "aws,us-east-1,x1,4,16,amd-rome,,0,1.0,,,2025-01,+1 GPU spare,,\n"
                 "aws,us-east-1,x2,4,16,amd-rome,,0,1.0,,,2025-01,-10% negotiated,,\n")  # fmt: skip
    assert {"x1", "x2"} <= {i.instance_type for i in load_catalog(f).instances}


def test_an_unclosed_quote_or_a_doubled_column_is_refused_not_swallowed(tmp_path: Path) -> None:
    """An unclosed quote in row 2 took the rows after it into its source cell: two priced instances vanished, exit
    0. A header naming a column twice let the last one's cells win."""
    f = tmp_path / "swallow.csv"
    f.write_text(HEADER + 'aws,us-east-1,box1,4,16,amd-rome,,0,2.0,,,2025-01,"my note\n'
                 "aws,us-east-1,box2,4,16,amd-rome,,0,1.0,,,2025-01,s\n")  # fmt: skip
    with pytest.raises(SpecError, match=r"swallow.csv line 2.*a cell runs over several lines \(an unclosed quote"):
        load_catalog(f)
    g = tmp_path / "twice.csv"
    g.write_text(HEADER.rstrip("\n") + ",source\n" + "aws,us-east-1,x1,4,16,amd-rome,,0,1.0,,,2025-01,s,t\n")
    with pytest.raises(SpecError, match=r"twice.csv line 1.*column 'source' is in the header twice"):
        load_catalog(g)


def test_exposed_memory_is_optional_and_never_above_the_nominal(tmp_path: Path) -> None:
    """exposed_gib: what the driver exposes (an A10G's 22.49 of 24); blank or absent = the nominal size."""
    cat = load_catalog("")
    assert cat.accelerators["A10G"].usable_memory_gib == 22.49 and cat.accelerators["H100"].exposed_gib == 79.18
    assert cat.accelerators["T4"].exposed_gib == 14.56 and cat.accelerators["V100-16GB-PCIe"].exposed_gib is None
    assert cat.accelerators["V100-16GB-PCIe"].usable_memory_gib == 16
    head = "name,memory_gib,bandwidth_gbps,fp32_tflops,tf32_tflops,fp16_tflops,bf16_tflops,int8_tops,tdp_w,source,date"
    f = tmp_path / "acc.csv"
    f.write_text(head + "\nMI300X,192,5300,163,653,1307,1307,2615,750,AMD datasheet,2025-01\n")  # no such column
    assert load_catalog(f).accelerators["MI300X"].usable_memory_gib == 192
    f.write_text(head + ",exposed_gib\nMI300X,192,5300,163,653,1307,1307,2615,750,AMD datasheet,2025-01,200\n")
    with pytest.raises(SpecError, match=r"column 'exposed_gib': must be a finite number <= 192, got '200'"):
        load_catalog(f)


def test_a_cell_a_terminal_would_obey_is_refused(tmp_path: Path) -> None:
    """An instance type holding ESC[31m was accepted and `rightsize catalog` printed it raw, recolouring the
    terminal."""
    f = tmp_path / "ctrl.csv"
    f.write_text(HEADER + "aws,us-east-1,x\x1b[31mRED,4,16,amd-rome,,0,1.0,,,2025-01,s\n")
    with pytest.raises(SpecError, match=r"ctrl.csv line 2, column 'instance_type': holds the control character "
                       r"'\\x1b' at position 1 .*; write plain text"):  # fmt: skip
        load_catalog(f)
    f.write_text(HEADER + "aws,us-east-1,box1,4,16,amd-rome,,0,1.0,,,2025-01,my \u202enote\n")
    with pytest.raises(SpecError, match=r"column 'source': holds the control character '\\u202e' at position 3"):
        load_catalog(f)


def test_a_cell_past_csvs_field_limit_is_a_one_line_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A 3,000,000-character instance type, a 140,000-character column name or an unclosed quote running the rest
    of the file into one cell stopped every command with `_csv.Error: field larger than field limit (131072)` and
    a traceback. A grid file ending its lines in a bare CR was a csv.Error too; it loads."""
    fix = ("a cell is over 131072 characters (a catalog cell holds at most 1000); shorten it, or close its quote if "
           "one is left open (an unclosed quote runs the lines after it into one cell)")  # fmt: skip
    row = "aws,us-east-1,{},4,16,amd-rome,,0,1.0,,,2025-01,s\n"
    f = tmp_path / "huge.csv"
    cases = [
        (HEADER + row.format("z" * 3_000_000), 2),
        (HEADER.rstrip("\n") + "," + "q" * 140_000 + "\n" + row.format("x").rstrip("\n") + ",\n", 1),
        (HEADER + row.format("ok") + 'aws,us-east-1,x,4,16,amd-rome,,0,1.0,,,2025-01,"s\n' + row.format("y") * 5000, 3),
    ]
    for text, line in cases:
        f.write_text(text)
        with pytest.raises(SpecError) as exc:
            load_catalog(f)
        assert str(exc.value) == f"{f} line {line}: {fix}"
        rc, out, err = run_cli(["catalog", "--catalog", str(f)], capsys)
        assert (rc, out, err) == (2, "", f"error: {f} line {line}: {fix}\n")
    g = tmp_path / "grid.csv"
    g.write_text("provider,region,pue,kg_co2e_per_kwh,source,date\raws,us-east-1,1.5,0.05,my utility,2025-01\r")
    assert load_catalog(g).power.grid[("aws", "us-east-1")] == (1.5, 0.05)


def test_an_unknown_column_is_refused_naming_it_and_the_columns_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`exposed_gb` for exposed_gib was dropped, silently: the row replaced the shipped T4 and its exposed memory went
    back to the nominal 16 GiB, exit 0. `physical_core` for physical_cores was dropped the same way."""
    head = "name,memory_gib,bandwidth_gbps,fp32_tflops,tf32_tflops,fp16_tflops,bf16_tflops,int8_tops,tdp_w,source,date"
    f = tmp_path / "acctypo.csv"
    f.write_text(head + ",fp32_dual_issue,exposed_gb\nT4,16,320,8.1,8.1,65,0,130,70,mine,2025-06,,10\n")
    msg = (f"{f} line 1: unknown column 'exposed_gb'. Did you mean 'exposed_gib'? Rename it to one of the columns "
           f"this table reads ({head.replace(',', ', ')}, fp32_dual_issue, exposed_gib) or delete it")  # fmt: skip
    with pytest.raises(SpecError) as exc:
        load_catalog(f)
    assert str(exc.value) == msg
    assert run_cli(["catalog", "--catalog", str(f), "--gpu"], capsys) == (2, "", f"error: {msg}\n")
    g = tmp_path / "cores.csv"
    g.write_text(HEADER.rstrip("\n") + ",physical_core\n" + "aws,us-east-1,x1,4,16,amd-rome,,0,1.0,,,2025-01,s,2\n")
    msg = (f"{g} line 1: unknown column 'physical_core'. Did you mean 'physical_cores'? Rename it to one of the "
           f"columns this table reads ({HEADER.strip().replace(',', ', ')}, physical_cores) or delete it")  # fmt: skip
    assert run_cli(["catalog", "--catalog", str(g)], capsys) == (2, "", f"error: {msg}\n")
    g.write_text(HEADER.rstrip("\n") + ",physical_cores\n" + "aws,us-east-1,x1,4,16,amd-rome,,0,1.0,,,2025-01,s,2\n")
    assert [i.physical_cores for i in load_catalog(g).instances if i.instance_type == "x1"] == [2]


@pytest.mark.parametrize(
    ("rows", "where"),
    [
        ([b"aws,us-east-1,g5.xlarge,4,16,amd-rome,,0,1.0,,,2025-01,caf\xe9 \xff"], "line 2, column 'source'"),
        (
            [
                b"aws,us-east-1,g5.xlarge,4,16,amd-rome,,0,1.0,,,2025-01,s",
                b"\xe9aws,x,y,4,16,amd-rome,,0,1,,,2025-01,s",
            ],
            "line 3, column 'provider'",
        ),
        ([b'aws,us-east-1,"g5\n.\xe9xlarge",4,16,amd-rome,,0,1.0,,,2025-01,s'], "line 3, column 'instance_type'"),
    ],
)
def test_a_byte_that_is_not_utf8_is_named_by_line_and_column(tmp_path: Path, rows: list[bytes], where: str) -> None:
    f = tmp_path / "latin.csv"
    f.write_bytes(b"\xef\xbb\xbf" + HEADER.encode() + b"\n".join(rows) + b"\n")
    with pytest.raises(SpecError) as exc:
        load_catalog(f)
    byte = next(b for b in b"".join(rows) if b >= 0x80)
    assert str(exc.value) == f"{f} {where}: is not UTF-8 text (byte 0x{byte:02x}); save the file as UTF-8"
    f.write_bytes(HEADER.replace("source", "sourc\xe9").encode("latin-1"))  # the header: its line
    with pytest.raises(SpecError, match=r"latin\.csv line 1: is not UTF-8 text \(byte 0xe9\); save the file as UTF-8$"):
        load_catalog(f)
