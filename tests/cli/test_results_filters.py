"""`rightsize results` filters: a --model with no measurements says so, --limit caps what --model / RUN show, and a run
id prefix shorter than the minimum is named as too short."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_kit import run_cli as _run
from report_kit import build_store

from rightsize.errors import NotFoundError
from rightsize.store import Store
from rightsize.store.db import MIN_RUN_PREFIX


def _bench_runs(store: Path) -> list[str]:
    """The ids of the store's bench runs, newest first."""
    with Store(store, read_only=True) as st:
        return [r.id for r in st.runs(kind="bench")]


@pytest.fixture
def store(tmp_path: Path) -> Path:
    path = tmp_path / "s.sqlite"
    build_store(path)  # distilbert: 8 + 13 measurements in two runs
    build_store(path, "resnet18")
    return path


def test_a_model_with_no_measurements_is_named_with_the_ones_there_are(
    store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # was an empty table, exit 0, no word
    rc, out, err = _run(["results", "--store", str(store), "--model", "nope"], capsys)
    assert rc == 2 and not out and err.count("\n") == 1, err
    assert err.startswith(f"error: --model: no measurements of model 'nope' in the store '{store}'.")
    assert "Measured models: distilbert (21), resnet18 (21)" in err
    rc, _, err = _run(["results", "--store", str(store), "--model", "distilbrt", "--json"], capsys)
    assert rc == 2 and "Did you mean 'distilbert'?" in err
    run_id = _bench_runs(store)[-1]  # the oldest: distilbert's CPU run
    rc, _, err = _run(["results", run_id, "--store", str(store), "--model", "resnet18"], capsys)
    assert rc == 2 and f"no measurements of model 'resnet18' in run {run_id}. Measured models: distilbert (8)" in err


def test_an_export_of_a_model_with_plans_but_no_measurements_still_writes_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "s.sqlite"
    with Store(path) as st:
        st.save_artifact(None, "plan", {"name": "p", "model": "xgb"})
    out = tmp_path / "x.json"
    rc, _, err = _run(["results", "--store", str(path), "--model", "xgb", "--export", str(out)], capsys)
    assert rc == 0 and "1 plan(s)" in err, err
    assert json.loads(out.read_text())["plans"][0]["payload"]["model"] == "xgb"
    rc, _, err = _run(["results", "--store", str(path), "--model", "xgb"], capsys)
    assert rc == 2 and "in the store" in err and "which has none" in err


def test_limit_caps_the_measurements_of_a_model_or_run(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with Store(store, read_only=True) as st:
        newest = [m.batch_size for m in st.measurements(model="distilbert")][-2:]
    rc, out, err = _run(["results", "--store", str(store), "--model", "distilbert", "--limit", "2", "--json"], capsys)
    assert rc == 0 and [r["batch_size"] for r in json.loads(out)] == newest  # was all 21
    assert "showing the newest 2 of 21 measurements" in err
    rc, out, _ = _run(["results", "--store", str(store), "--model", "distilbert", "--json"], capsys)
    assert rc == 0 and len(json.loads(out)) == 21  # no --limit: every measurement, as before
    run_id = _bench_runs(store)[-1]
    rc, out, _ = _run(["results", run_id, "--store", str(store), "--limit", "3", "--json"], capsys)
    assert rc == 0 and len(json.loads(out)) == 3
    rc, out, _ = _run(["results", "--store", str(store), "--limit", "2", "--json"], capsys)
    assert rc == 0 and len(json.loads(out)) == 2  # runs, as before
    rc, out, _ = _run(["results", "--store", str(store), "--json"], capsys)
    assert rc == 0 and len(json.loads(out)) == 8  # 8 runs, under the default 20


def test_limit_never_shortens_an_export(store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "x.json"
    rc, _, err = _run(["results", "--store", str(store), "--model", "distilbert", "--limit", "1", "--export",
                       str(out)], capsys)  # fmt: skip
    assert rc == 0 and "showing" not in err
    assert len(json.loads(out.read_text())["measurements"]) == 21


def test_a_run_prefix_shorter_than_the_minimum_says_so(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_id = _bench_runs(store)[0]
    short = run_id[: MIN_RUN_PREFIX - 1]
    rc, _, err = _run(["results", short, "--store", str(store)], capsys)
    assert rc == 2 and err.count("\n") == 1, err
    assert f"run {short!r} is too short for a run id prefix: give the full id or its first {MIN_RUN_PREFIX}+" in err
    rc, _, err = _run(["results", run_id[:MIN_RUN_PREFIX], "--store", str(store), "--json"], capsys)
    assert rc == 0 or "prefix of" in err  # the minimum works (unless two runs share it: then they are named)
    rc, _, err = _run(["results", "zz", "--store", str(store)], capsys)
    assert rc == 2 and "run 'zz' is not in the store: give the full id or its first 4+ characters" in err


def test_a_prefix_of_several_runs_is_never_guessed(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    with Store(path) as st:
        ids = [st.start_run("bench", name=n) for n in ("a", "b")]
        st._conn.execute("UPDATE runs SET id = ? WHERE id = ?", ("abcd11111111", ids[0]))
        st._conn.execute("UPDATE runs SET id = ? WHERE id = ?", ("abcd22222222", ids[1]))
        with pytest.raises(
            NotFoundError, match=r"'abcd' is a prefix of 2 runs: .*abcd11111111.*; give more characters"
        ):
            st.run("abcd")
        assert st.run("abcd2").id == "abcd22222222"


def test_a_table_of_several_inputs_or_models_names_them_per_row() -> None:
    """`results --model mobilenet_v2` mixed 96 px and 80 px rows with no column to tell them apart."""
    from rich.console import Console

    from rightsize.cli.bench import sweep_table
    from rightsize.profile import Measurement

    def m(model: str, size: int) -> Measurement:
        return Measurement.from_dict({"model": model, "mode": "inference", "device": "cpu", "precision": "fp32",
                                      "batch_size": 1, "threads": None, "input": {"image_size": size},
                                      "status": "ok"})  # fmt: skip

    console = Console(width=200, record=True)
    console.print(sweep_table([m("mobilenet_v2", 96), m("mobilenet_v2", 80)], "model mobilenet_v2"))
    text = console.export_text()
    assert "image_size 96" in text and "image_size 80" in text
    console.print(sweep_table([m("mobilenet_v2", 96), m("resnet18", 96)], "run x"))
    both = console.export_text()
    assert "resnet18" in both and "image_size 96" not in both  # one input: no input column


def test_one_runs_table_names_its_kind_and_status(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`results RUN` of a killed sweep showed its few rows under "run ID" alone: nothing said it was cut short."""
    run_id = _bench_runs(store)[0]
    with Store(store) as st:
        st._conn.execute("UPDATE runs SET status = 'interrupted' WHERE id = ?", (run_id,))
        st._conn.commit()
        name = st.run(run_id).name
    rc, out, _ = _run(["results", run_id, "--store", str(store)], capsys)
    assert rc == 0 and out.splitlines()[0].strip() == f"run {run_id} (bench{' ' + name if name else ''}, interrupted)"
