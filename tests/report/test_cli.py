"""`rightsize report` and `rightsize dashboard` through the real CLI entry point."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from cli_kit import run_cli as _run


def test_report_renders_the_newest_stored_plan_with_its_profile(
    two_run_store: tuple[Path, str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store, _, _ = two_run_store
    out_html = tmp_path / "r.html"
    rc, out, _ = _run(["report", "-o", str(out_html), "--store", str(store), "--json"], capsys)
    info = json.loads(out)
    assert rc == 0 and info["format"] == "html" and info["path"] == str(out_html)
    # the newest plan was made on box-b: its profile has 8 cpu + 5 cuda inference points
    assert info["environment"] == "envbbbb22222" and info["measured_points"] == 13
    html = out_html.read_text()
    assert "2 × c7i.2xlarge" in html and "NVIDIA A10G" in html and 'data-chart="latency-batch"' in html


def test_report_by_run_prefix_to_markdown(
    two_run_store: tuple[Path, str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from rightsize.store import Store

    store, _, _ = two_run_store
    with Store(store) as st:
        first_plan = st.artifacts(kind="plan")[-1]  # the oldest: planned on box-a
    rc, _, err = _run(["report", first_plan["run_id"][:6], "-o", str(tmp_path / "r.md"), "--store", str(store)], capsys)
    assert rc == 0 and "wrote" in err
    md = (tmp_path / "r.md").read_text()
    assert md.startswith("# rightsize: text-classification-api") and "AMD EPYC 9B14 (test A)" in md


@pytest.mark.slow  # > 1.6 s: make test runs it, make test-fast skips it
def test_report_errors_exit_2_and_never_create_a_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "none.sqlite"
    rc, _, err = _run(["report", "-o", str(tmp_path / "r.html"), "--store", str(missing)], capsys)
    assert rc == 2 and "no results store" in err and not missing.exists()
    rc, _, err = _run(["report", "-o", str(tmp_path / "r.pdf"), "--store", str(missing)], capsys)
    assert rc == 2 and "--output: must end in .html or .md" in err
    empty = tmp_path / "empty.sqlite"
    empty.touch()
    rc, _, err = _run(["report", "-o", str(tmp_path / "r.html"), "--store", str(empty)], capsys)
    assert rc == 2 and "is empty, not yet a rightsize store" in err and empty.stat().st_size == 0  # no schema written


def test_report_unknown_run_exit_2(
    two_run_store: tuple[Path, str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store, _, _ = two_run_store
    rc, _, err = _run(["report", "zzzzzz", "-o", str(tmp_path / "r.html"), "--store", str(store)], capsys)
    assert rc == 2 and "no plan with run or artifact id 'zzzzzz'" in err


def test_dashboard_command_serves_until_interrupted(two_run_store: tuple[Path, str, str]) -> None:
    store, a, _ = two_run_store
    cmd = [sys.executable, "-m", "rightsize", "dashboard", "--store", str(store), "--port", "0", "--json"]
    # As from a terminal: SIGINT at its default even when pytest itself runs as a background job
    # (a non-interactive shell starts those with SIGINT ignored, and children inherit that).
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        url = json.loads(proc.stdout.readline())["url"]
        assert url.startswith("http://127.0.0.1:")
        with urllib.request.urlopen(url + "/", timeout=10) as r:
            assert r.status == 200 and a in r.read().decode()
    finally:
        os.kill(proc.pid, signal.SIGINT)  # Ctrl-C: the command stops cleanly
        _, err = proc.communicate(timeout=20)
    assert proc.returncode == 130 and "stopped" in err  # Ctrl-C's exit code, as serve's (was 0)


def test_a_report_path_without_a_report_suffix_is_quoted_as_given() -> None:
    """`report RUN -o /dev/full` read "got 'full'": the file name alone, not the path the user typed."""
    import pytest

    from rightsize.errors import SpecError
    from rightsize.report import check_report_path

    with pytest.raises(SpecError, match=r"^--output: must end in \.html or \.md, got '/dev/full'$"):
        check_report_path(Path("/dev/full"), "--output")
    check_report_path(Path("out/r.MD"), "--report")
