"""--catalog reaches the energy and network tables too: power, grid and link rows merge over the shipped ones."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from cli_kit import run_cli
from plan_fixtures import cpu_curve, small_catalog

from rightsize.catalog import load_catalog
from rightsize.errors import SpecError
from rightsize.plan import plan
from rightsize.spec import Workload


def test_grid_power_and_link_rows_merge(tmp_path: Path) -> None:
    grid = tmp_path / "grid.csv"
    grid.write_text("provider,region,pue,kg_co2e_per_kwh,source,date\naws,us-east-1,1.5,0.05,my utility,2026-11\n")
    cat = load_catalog(grid)
    assert cat.power is not None and cat.power.site("aws", "us-east-1")[:2] == (1.5, 0.05)
    assert cat.power.site("gcp", "us-central1")[:2] == (1.11, 0.454)  # the rest is still shipped
    links = tmp_path / "links.csv"
    links.write_text("provider,instance_type,network_gbps,gpu_link_gbytes_per_s,source,date\n"
                     "aws,g4dn.xlarge,1,0,measured iperf3,2026-11\n")  # fmt: skip
    cat = load_catalog(links)
    assert cat.links[("aws", "g4dn.xlarge")].network_gbps == 1
    assert any(i.instance_type == "g4dn.xlarge" for i in cat.instances)  # not read as instance rows
    power = tmp_path / "power.csv"
    power.write_text("kind,key,min_w,max_w,source,date\ngpu,T4,10,80,my meter,2026-11\n")
    assert load_catalog(power).power.gpu["T4"] == (10.0, 80.0)  # type: ignore[union-attr]


def test_bad_numbers_are_refused(tmp_path: Path) -> None:
    grid = tmp_path / "grid.csv"
    grid.write_text("provider,region,pue,kg_co2e_per_kwh,source,date\naws,us-east-1,nan,0.05,x,2026-11\n")
    with pytest.raises(SpecError, match=r"grid.csv line 2, column 'pue': must be a finite number, got 'nan'"):
        load_catalog(grid)


def test_a_misspelt_column_of_a_power_grid_or_link_file_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`sorce` for source had been dropped unsaid (exit 0), as `exposed_gb` once was in an accelerator file."""
    cases = [
        ("kind,key,min_w,max_w,source,dte\ngpu,T4,10,80,my meter,2026-11\n", "dte", "date",
         "kind, key, min_w, max_w, source, date"),
        ("provider,region,pue,kg_co2e_per_kwh,sorce,date\naws,us-east-1,1.5,0.05,my utility,2026-11\n", "sorce",
         "source", "provider, region, pue, kg_co2e_per_kwh, source, date"),
        ("provider,instance_type,network_gbps,gpu_link_gbytes_per_s,source,date,notes\naws,g4dn.xlarge,1,0,iperf,"
         "2026-11,x\n", "notes", None, "provider, instance_type, network_gbps, gpu_link_gbytes_per_s, source, date"),
    ]  # fmt: skip
    f = tmp_path / "mine.csv"
    for text, bad, meant, known in cases:
        f.write_text(text)
        hint = f" Did you mean {meant!r}?" if meant else ""
        msg = (f"{f} line 1: unknown column {bad!r}.{hint} Rename it to one of the columns this table reads ({known}) "
               "or delete it")  # fmt: skip
        with pytest.raises(SpecError) as exc:
            load_catalog(f)
        assert str(exc.value) == msg
        assert run_cli(["catalog", "--catalog", str(f)], capsys) == (2, "", f"error: {msg}\n")


def test_the_planner_uses_the_catalogs_grid(tmp_path: Path) -> None:
    grid = tmp_path / "grid.csv"
    grid.write_text("provider,region,pue,kg_co2e_per_kwh,source,date\naws,us-east-1,1.0,0.01,green,2026-11\n")
    cat = dataclasses.replace(small_catalog(), power=load_catalog(grid).power)
    workload = Workload.model_validate({
        "model": "distilbert", "targets": {"online": {"rate_per_s": 10, "latency": {"percentile": 95, "bound_ms": 80}}},
    })  # fmt: skip
    rec = plan(workload, [cpu_curve("c.2x", 20.0, 15.0)], cat).recommendation
    assert rec is not None and rec.energy is not None
    assert (rec.energy.pue, rec.energy.grid_kg_per_kwh) == (1.0, 0.01)


def test_a_catalog_path_that_is_a_folder_or_fifo_is_named_as_such(tmp_path: Path) -> None:
    import os

    from rightsize.errors import NotFoundError

    fifo = tmp_path / "rows.csv"
    os.mkfifo(fifo)  # reading it would block for ever
    for path in (tmp_path, fifo):
        with pytest.raises(SpecError, match="is not a regular file"):
            load_catalog(path)
    with pytest.raises(NotFoundError, match="does not exist"):
        load_catalog(tmp_path / "missing.csv")


@pytest.mark.parametrize("kind", ["GPU", "mem", ""])
def test_a_power_row_of_an_unknown_kind_is_refused(tmp_path: Path, kind: str) -> None:
    """A row of kind `GPU` or `mem` had been skipped unsaid: the shipped figure stayed in use."""
    f = tmp_path / "power.csv"
    f.write_text(f"kind,key,min_w,max_w,source,date\n{kind},T4,10,80,my meter,2026-11\n")
    with pytest.raises(SpecError) as exc:
        load_catalog(f)
    want = f"must be one of cpu, gpu, memory, got {kind!r}" if kind else "is empty"
    assert str(exc.value).startswith(f"{f} line 2, column 'kind': ") and want in str(exc.value), str(exc.value)


def test_a_power_row_whose_idle_draw_is_above_its_full_load_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """min_w 5 above max_w 1 was accepted and planned from (docs/catalog.md says power rows are checked)."""
    f = tmp_path / "power.csv"
    f.write_text("kind,key,min_w,max_w,source,date\ngpu,T4,10,80,my meter,2026-11\ncpu,intel-broadwell,5,1,s,2026-01\n")
    with pytest.raises(SpecError) as exc:
        load_catalog(f)
    assert str(exc.value) == (
        f"{f} line 3, column 'max_w': is 1, below min_w 5; max_w is the draw at full load and min_w at idle: swap "
        "them, or fix the one that is wrong"
    )
    code, out, err = run_cli(["plan", "examples/sentiment-api.yaml", "--catalog", str(f)], capsys)
    assert (code, out, err) == (2, "", f"error: {exc.value}\n")
    f.write_text("kind,key,min_w,max_w,source,date\ngpu,T4,80,80,flat,2026-11\n")  # equal: a flat draw is fine
    assert load_catalog(f).power.gpu["T4"] == (80.0, 80.0)  # type: ignore[union-attr]
