"""`rightsize results --export`: measurements (extra kept), plans and load tests, as JSON or CSV files."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from cli_kit import run_cli as _run
from report_kit import build_store

from rightsize.store import Store

LOADTEST = {"name": "lt", "url": "http://127.0.0.1:1/v1/predict", "mode": "open", "valid": True,
            "latency_ms": {"p50": 1.0, "p95": 2.0, "p99": 3.0}}  # fmt: skip


def test_export_everything(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "s.sqlite"
    build_store(store)
    with Store(store) as st:
        st.save_artifact(None, "loadtest", LOADTEST)
        n_measurements = len(st.measurements())
    out = tmp_path / "all.json"
    rc, _, err = _run(["results", "--store", str(store), "--model", "distilbert", "--export", str(out)], capsys)
    assert rc == 0, err
    data = json.loads(out.read_text())
    assert data["measurements"] and all("extra" in m for m in data["measurements"])
    assert data["plans"] and all(p["kind"] == "plan" for p in data["plans"])
    csv_out = tmp_path / "all.csv"
    rc, _, err = _run(["results", "--store", str(store), "--model", "distilbert", "--export", str(csv_out)], capsys)
    assert rc == 0 and "plan(s) to" in err
    rows = list(csv.DictReader(csv_out.open()))
    assert len(rows) == len(data["measurements"]) <= n_measurements
    assert json.loads(rows[0]["extra"]) == data["measurements"][0]["extra"]  # extra survives as JSON text
    plans = list(csv.DictReader((tmp_path / "all-plans.csv").open()))
    assert len(plans) == len(data["plans"]) and plans[0]["instance"]


def test_loadtests_exported_with_a_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "s.sqlite"
    with Store(store) as st:
        art = st.save_artifact(None, "loadtest", LOADTEST)
        run_id = st.artifacts(kind="loadtest")[0]["run_id"]
    csv_out = tmp_path / "lt.csv"
    rc, _, err = _run(["results", run_id, "--store", str(store), "--export", str(csv_out)], capsys)
    assert rc == 0, err
    rows = list(csv.DictReader((tmp_path / "lt-loadtests.csv").open()))
    assert [r["id"] for r in rows] == [art] and rows[0]["p95_ms"] == "2.0"


def test_a_run_that_measured_nothing_shows_what_it_stored(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "s.sqlite"
    with Store(store) as st:
        run_id = st.start_run("loadtest", name="lt")
        art = st.save_artifact(run_id, "loadtest", {**LOADTEST, "offered_rate_per_s": 5.0, "achieved_rate_per_s": 4.9})
    rc, out, err = _run(["results", run_id, "--store", str(store)], capsys)
    assert rc == 0, err
    assert "measured nothing itself" in out and f"load test {art}: 4.9/s achieved of 5.0/s offered" in out
    assert "p99 3.0 ms, valid" in out
    rc, out, err = _run(["results", run_id, "--store", str(store), "--json"], capsys)
    assert rc == 0 and json.loads(out) == []  # the measurements, none; what it stored is named on stderr (was silent)
    assert f"run {run_id} measured nothing itself; it stored: load test {art}: 4.9/s achieved" in err


def test_generative_plans_are_exported_and_the_newest_ones_report_needs_its_stored_state(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "s.sqlite"
    build_store(store)
    gen = {"kind": "generative-plan", "name": "chat", "model": "llama-7b", "purchase": "on_demand",
           "target": {"rate_per_s": 2.0}, "ttft_percentile": 95.0, "tpot_percentile": 50.0,
           "recommendation": {"provider": "aws", "instance": "g5.xlarge", "usd_per_hour": 1.0, "ttft_ms": 300.0,
                              "tpot_ms": 30.0, "usd_per_m_output_tokens": 12.0}}  # fmt: skip
    with Store(store) as st:
        st.save_artifact(None, "generative-plan", gen)
    out = tmp_path / "all.json"
    rc, _, err = _run(["results", "--store", str(store), "--export", str(out)], capsys)
    assert rc == 0 and "1 generative plan(s)" in err
    assert [g["payload"]["name"] for g in json.loads(out.read_text())["generative_plans"]] == ["chat"]
    rc, _, err = _run(["results", "--store", str(store), "--export", str(tmp_path / "all.csv")], capsys)
    rows = list(csv.DictReader((tmp_path / "all-generative.csv").open()))
    assert rc == 0 and [(r["name"], r["instance"], r["tpot_percentile"]) for r in rows] == [
        ("chat", "g5.xlarge", "50.0")
    ]
    rc, _, err = _run(["report", "--store", str(store), "-o", str(tmp_path / "r.md")], capsys)
    assert rc == 2 and "was stored before its report could be written from the store" in err  # no report_state


@pytest.mark.slow  # a few seconds: make test runs it, test-fast does not
def test_report_writes_a_stored_generative_plans_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`rightsize report RUN` writes a generative plan's page from the state stored with it, as --report did."""
    spec = tmp_path / "chat.yaml"
    spec.write_text(
        "name: chat\nmodel: llama-1b\ntargets:\n  instances: [g5.xlarge, c7i.2xlarge]\n  generative:\n"
        "    rate_per_s: 1\n    prompt_tokens: 256\n    output_tokens: 64\n"
        "    ttft: {percentile: 95, bound_ms: 3000}\n    tpot: {percentile: 50, bound_ms: 100}\n"
    )
    store, first = tmp_path / "s.sqlite", tmp_path / "at-plan.md"
    rc, _, err = _run(["plan", str(spec), "--store", str(store), "--report", str(first)], capsys)
    assert rc == 0, err
    run = Store(store).artifacts(kind="generative-plan")[0]["run_id"]
    for ref in ([run[:8]], []):
        out = tmp_path / f"later{len(ref)}.md"
        rc, _, err = _run(["report", *ref, "--store", str(store), "-o", str(out)], capsys)
        assert rc == 0 and "generative plan" in err, err
        assert out.read_text() == first.read_text()


def test_an_earlier_exports_sibling_csv_is_named_not_passed_off(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A later export with no plans left the earlier all-plans.csv beside it, as if it were this export's."""
    store = tmp_path / "s.sqlite"
    build_store(store)
    csv_out = tmp_path / "all.csv"
    assert _run(["results", "--store", str(store), "--export", str(csv_out)], capsys)[0] == 0
    assert (tmp_path / "all-plans.csv").exists()
    with Store(store) as st:
        st.save_artifact(None, "loadtest", LOADTEST)
        run_id = st.artifacts(kind="loadtest")[0]["run_id"]
    rc, _, err = _run(["results", run_id, "--store", str(store), "--export", str(csv_out)], capsys)
    err = " ".join(err.split())  # the console wraps long lines where the temporary path's length puts the break
    assert rc == 0 and "left as they were (not from this export" in err and "all-plans.csv" in err


def test_a_dangling_symlink_output_is_written_through_not_replaced(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The writability probe created the link's target empty, then deleted the link itself."""
    store = tmp_path / "s.sqlite"
    build_store(store)
    (tmp_path / "sub").mkdir()
    link = tmp_path / "dl.json"
    link.symlink_to(tmp_path / "sub" / "target.json")
    rc, _, err = _run(["results", "--store", str(store), "--export", str(link)], capsys)
    assert rc == 0, err
    assert link.is_symlink() and json.loads((tmp_path / "sub" / "target.json").read_text())["measurements"]


def test_a_csv_export_that_fails_part_way_names_the_files_it_rewrote(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """It said "nothing was changed" after all.csv and all-plans.csv had been replaced."""
    import rightsize.cli.results as results
    from rightsize.errors import SpecError

    store = tmp_path / "s.sqlite"
    build_store(store)
    with Store(store) as st:
        st.save_artifact(None, "loadtest", LOADTEST)
    real = results.write_whole

    def full_at_loadtests(path: Path, text: str, option: str) -> None:
        if path.name.endswith("-loadtests.csv"):
            raise SpecError(option, f"cannot write {str(path)!r} (No space left on device); it was left as it was")
        real(path, text, option)

    monkeypatch.setattr(results, "write_whole", full_at_loadtests)
    out = tmp_path / "all.csv"
    rc, _, err = _run(["results", "--store", str(store), "--export", str(out)], capsys)
    assert rc == 2 and "(No space left on device)" in err
    assert f"already rewritten by this export: {out}, {tmp_path / 'all-plans.csv'}" in err


def test_a_file_rightsize_did_not_write_is_never_replaced(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`results --export data.csv` replaced a user's data.csv and data-plans.csv, and `report -o mine.html` a user's
    own page, silently: an existing file is replaced only when it is one of ours (an earlier export or report)."""
    store = tmp_path / "s.sqlite"
    build_store(store)
    mine = {tmp_path / "data.csv": "a,b\n1,2\n", tmp_path / "data-plans.csv": "x\n", tmp_path / "mine.html": "<p>",
            tmp_path / "mine.json": '{"mine": 1}'}  # fmt: skip
    for path, text in mine.items():
        path.write_text(text)
    for argv, victim in ((["results", "--export", str(tmp_path / "data.csv")], tmp_path / "data.csv"),
                         (["results", "--export", str(tmp_path / "mine.json")], tmp_path / "mine.json"),
                         (["report", "-o", str(tmp_path / "mine.html")], tmp_path / "mine.html")):  # fmt: skip
        rc, out, err = _run([*argv, "--store", str(store)], capsys)
        assert rc == 2 and out == "" and err.count("\n") == 1, err
        assert f"{victim.name}' exists and was not written by rightsize; its contents would be lost: choose" in err
    (tmp_path / "data.csv").unlink()  # the sibling still blocks the export
    rc, _, err = _run(["results", "--export", str(tmp_path / "data.csv"), "--store", str(store)], capsys)
    assert rc == 2 and "data-plans.csv' exists and was not written by rightsize" in err
    assert all(p.read_text() == text for p, text in mine.items() if p.exists())  # every byte kept
    for out_file in (tmp_path / "r.html", tmp_path / "r.md", tmp_path / "e.json", tmp_path / "e.csv"):
        argv = ["report", "-o"] if out_file.suffix in (".html", ".md") else ["results", "--export"]
        for _ in range(2):  # ours: written again in place
            rc, _, err = _run([*argv, str(out_file), "--store", str(store)], capsys)
            assert rc == 0, err


def test_the_ours_check_reads_stamps_not_any_mention(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Round 2 of the replace rule: a user's notes quoting "rightsize 1.0" were replaced; an export of a run with no
    measurements (its CSV is the header "model" alone) was refused the second time; a sibling this export does not
    write blocked it."""
    from rightsize.cli._common import written_by_rightsize

    notes = tmp_path / "notes.md"
    notes.write_text("# My notes\nWe upgraded to rightsize 1.0 last week; keep these numbers!\n")
    plan_only = tmp_path / "p.csv"
    plan_only.write_bytes(b"model\r\n")
    assert not written_by_rightsize(notes) and written_by_rightsize(plan_only)
    store = tmp_path / "s.sqlite"
    build_store(store)
    with Store(store) as st:
        plan_id = st.artifacts(kind="plan")[0]["id"]
    rc, _, err = _run(["report", plan_id, "-o", str(notes), "--store", str(store)], capsys)
    assert rc == 2 and "was not written by rightsize" in err and "keep these numbers" in notes.read_text()
    (tmp_path / "f-loadtests.csv").write_text("my,plans\n1,2\n")  # the store has no load tests: never written
    rc, _, err = _run(["results", "--export", str(tmp_path / "f.csv"), "--store", str(store)], capsys)
    assert rc == 0, err
    assert (tmp_path / "f-loadtests.csv").read_text() == "my,plans\n1,2\n" and "none of theirs" in err


def test_a_generation_load_test_shows_its_ttft_and_tpot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It read "0.0/s achieved of 0.0/s offered, p50 0.0 ms": the online load test's keys, which it has not."""
    store = tmp_path / "s.sqlite"
    gen = {"kind": "loadtest-generate", "url": "http://127.0.0.1:9/v1/generate", "rate_per_s": 3.0, "sent": 60,
           "answered": 60, "ttft_ms": {"p50": 28.4, "p95": 51.0}, "tpot_ms": {"p50": 6.61}, "valid": True,
           "output_tokens_per_s": 75.2}  # fmt: skip
    with Store(store) as st:
        run_id = st.start_run("loadtest", name="lt")
        art = st.save_artifact(run_id, "loadtest", gen)
    rc, out, err = _run(["results", run_id, "--store", str(store)], capsys)
    assert rc == 0, err
    assert f"generation load test {art}: 3/s offered, 60 sent, 60 answered, TTFT p50 28.4 ms, p95 51.0 ms" in out
    assert "TPOT p50 6.61 ms, 75.2 output tokens/s, valid" in out and "achieved" not in out


def test_a_load_test_that_is_not_valid_says_why(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A load test's line read "NOT valid" and nothing more; the reasons were stored (online) or are read from the
    stored numbers (generation)."""
    store = tmp_path / "s.sqlite"
    gen = {"kind": "loadtest-generate", "rate_per_s": 3.0, "sent": 60, "answered": 57, "ttft_ms": {"p50": 28.4},
           "tpot_ms": {"p50": 6.61}, "valid": False, "send_lag_p99_ms": 2.0, "output_tokens_per_s": 75.2}  # fmt: skip
    online = {"achieved_rate_per_s": 9.1, "offered_rate_per_s": 10.0, "latency_ms": {"p50": 12.0, "p99": 40.0},
              "valid": False, "problems": ["send lag p99 31.0 ms > 10 ms"]}  # fmt: skip
    with Store(store) as st:
        run_id = st.start_run("loadtest", name="lt")
        st.save_artifact(run_id, "loadtest", gen)
        st.save_artifact(run_id, "loadtest", online)
    rc, out, err = _run(["results", run_id, "--store", str(store)], capsys)
    assert rc == 0, err
    flat = " ".join(out.split())
    assert "75.2 output tokens/s, NOT valid: 3 of 60 requests unanswered" in flat
    assert "p99 40.0 ms, NOT valid: send lag p99 31.0 ms > 10 ms" in flat
