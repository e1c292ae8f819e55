"""`rightsize diagnose`'s command line and ``rs.diagnose()``: JSON on a clean stdout, the program's exit code passed
on, the usage line, and the context manager that keeps working after ``import rightsize.diagnose``."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

import rightsize
import rightsize.diagnose
import rightsize.diagnose.run
from rightsize.cli.app import main
from rightsize.cli.diagnose import exit_code
from rightsize.diagnose import LoopFacts, diagnose
from rightsize.diagnose.probe import LoaderInfo
from rightsize.diagnose.run import Stop, run_watched

FACTS = LoopFacts(wall_s=2.0, loop_s=2.0, data_wait_s=0.1, batches=10, steps=10, cpu_s=1.0, logical_cores=2,
                  loaders=[LoaderInfo(0, False, 32)])  # fmt: skip


def _cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """``rightsize ARGS`` in this process: exit code, stdout, stderr."""
    with pytest.raises(SystemExit) as done:
        main(args)
    out, err = capsys.readouterr()
    return int(done.value.code or 0), out, err


def _watched(monkeypatch: pytest.MonkeyPatch, rc: int, facts: LoopFacts | None, stopped: Stop) -> list[bool]:
    """Make ``run_watched`` return what a program that ended so would; the list records its ``stdout_to_stderr``."""
    seen: list[bool] = []

    def fake(
        cmd: list[str], timeout_s: float | None = None, stdout_to_stderr: bool = False
    ) -> tuple[int, LoopFacts | None, Stop]:
        seen.append(stdout_to_stderr)
        return rc, facts, stopped

    monkeypatch.setattr(rightsize.diagnose.run, "run_watched", fake)
    return seen


def test_json_mode_sends_the_programs_stdout_to_our_stderr(capfd: pytest.CaptureFixture[str]) -> None:
    code = "print('done', flush=True)"
    assert run_watched([sys.executable, "-c", code], stdout_to_stderr=True) == (0, None, None)
    out, err = capfd.readouterr()
    assert out == "" and "done" in err
    run_watched([sys.executable, "-c", code])  # without --json the program's output stays on stdout
    out, err = capfd.readouterr()
    assert "done" in out and "done" not in err


@pytest.mark.slow  # ~2 s (the program imports torch); test_json_mode_sends_... covers the fd quickly
def test_json_on_stdout_parses_when_the_program_prints_and_fails(tmp_path: Path) -> None:
    """The whole path, for real: the program prints to stdout and exits 3; stdout is one JSON document, we exit 3."""
    prog = tmp_path / "fail.py"
    prog.write_text("import torch\nprint('done')\nraise SystemExit(3)\n")
    run = subprocess.run([sys.executable, "-m", "rightsize", "diagnose", "--json", "--", sys.executable, str(prog)],
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert run.returncode == 3, run.stderr[-600:]
    report = json.loads(run.stdout)
    assert report["exit_code"] == 3 and report["findings"]
    assert "done" in run.stderr and "note: the program exited with code 3" in run.stderr


def test_a_failed_program_gives_its_exit_code_after_the_diagnosis(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    seen = _watched(monkeypatch, 3, FACTS, None)
    code, out, err = _cli(["diagnose", "--", "python", "fail.py"], capsys)
    assert code == 3 and seen == [False]
    assert out.startswith("watched 2.0 s: 10 batches") and "fix:" in out
    assert "note: the program exited with code 3" in err
    seen = _watched(monkeypatch, 3, FACTS, None)
    code, out, err = _cli(["diagnose", "--json", "--", "python", "fail.py"], capsys)
    assert code == 3 and seen == [True] and json.loads(out)["exit_code"] == 3


def test_a_healthy_program_exits_0(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    _watched(monkeypatch, 0, FACTS, None)
    code, out, err = _cli(["diagnose", "--", "python", "ok.py"], capsys)
    assert code == 0 and out.startswith("watched") and "note:" not in err


def test_timeout_exits_124_with_the_diagnosis(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _watched(monkeypatch, 128 + 15, FACTS, "timeout")  # the boot module's SystemExit on SIGTERM
    code, out, err = _cli(["diagnose", "--json", "--timeout", "5", "--", "python", "forever.py"], capsys)
    assert code == 124 and json.loads(out)["facts"]["steps"] == 10
    assert "stopped after --timeout 5 s" in err and "(exit code 124)" in err
    _watched(monkeypatch, 128 + 15, None, "timeout")  # stopped before it imported torch: no report, still 124
    code, out, err = _cli(["diagnose", "--timeout", "5", "--", "python", "forever.py"], capsys)
    assert code == 124 and out == "" and err.startswith("error: the program was stopped after --timeout 5 s")


def test_ctrl_c_without_timeout_exits_130(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    _watched(monkeypatch, 128 + 15, FACTS, "interrupt")  # before, the note formatted timeout=None and crashed
    code, out, err = _cli(["diagnose", "--", "python", "train.py"], capsys)
    assert code == 130 and out.startswith("watched") and "interrupted" in err


def test_no_report_is_the_programs_code_or_1(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _watched(monkeypatch, 5, None, None)
    code, out, err = _cli(["diagnose", "--", "python", "x.py"], capsys)
    assert code == 5 and out == ""
    assert err == "error: the program exited 5 without the probe's report: it never imported torch, or it was killed\n"
    _watched(monkeypatch, 0, None, None)  # the program succeeded, we could not diagnose it: a failed run (1)
    code, out, err = _cli(["diagnose", "--", "python", "x.py"], capsys)
    assert code == 1 and out == "" and err.startswith("error: the program exited 0 without")


def test_json_without_a_report_is_still_one_json_document(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    _watched(monkeypatch, 5, None, None)
    code, out, err = _cli(["diagnose", "--json", "--", "python", "x.py"], capsys)
    doc = json.loads(out)  # stdout was empty: a script reading it got nothing to parse
    assert code == 5 and doc["facts"] is None and doc["findings"] == [] and doc["exit_code"] == 5
    assert doc["error"].startswith("the program exited 5 without the probe's report") and err.startswith("error: ")


def test_exit_codes() -> None:
    assert [exit_code(0, None), exit_code(3, None), exit_code(-9, None)] == [0, 3, 137]
    assert [exit_code(143, "timeout"), exit_code(0, "timeout"), exit_code(1, "interrupt")] == [124, 124, 130]


def test_usage_line_shows_the_command(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _cli(["diagnose", "--help"], capsys)
    assert code == 0 and " diagnose [OPTIONS] -- CMD [ARGS]...\n" in out  # "Usage: rightsize diagnose ..."
    assert "124" in out and "stderr" in out  # the exit codes and where --json sends the program's output


def test_a_directory_as_cmd_says_it_is_a_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`diagnose -- ./adir` said "cannot run './adir' (Permission denied)", which reads as a permissions problem."""
    (tmp_path / "adir").mkdir()
    monkeypatch.chdir(tmp_path)
    code, out, err = _cli(["diagnose", "--", "./adir"], capsys)
    assert code == 2 and out == ""
    assert err == "error: CMD: './adir' is a directory; give a Python program, e.g. python train.py\n"


@pytest.mark.parametrize(
    ("value", "problem"),
    [("nan", "nan is not a number"), ("NaN", "nan is not a number"), ("0", "0 s is under 1 s"),
     ("-inf", "-inf s is under 1 s")],
)  # fmt: skip
def test_timeout_that_is_not_seconds_is_one_line(
    value: str, problem: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """--timeout nan said "Input should be greater than or equal to 1"; the program must not start."""
    seen = _watched(monkeypatch, 0, FACTS, None)
    code, out, err = _cli(["diagnose", "--timeout", value, "--", "python", "x.py"], capsys)
    assert code == 2 and out == "" and seen == []
    assert err == f"error: --timeout: {problem}; give seconds, e.g. --timeout 600 (inf: no limit)\n"


def test_timeout_inf_is_no_limit(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    limits: list[float | None] = []

    def fake(
        cmd: list[str], timeout_s: float | None = None, stdout_to_stderr: bool = False
    ) -> tuple[int, LoopFacts | None, Stop]:
        limits.append(timeout_s)
        return 0, FACTS, None

    monkeypatch.setattr(rightsize.diagnose.run, "run_watched", fake)
    for args in (["--timeout", "inf"], [], ["--timeout", "5"]):
        code, _, _ = _cli(["diagnose", *args, "--", "python", "ok.py"], capsys)
        assert code == 0
    assert limits == [None, None, 5.0]
    code, out, _ = _cli(["diagnose", "--help"], capsys)
    assert "inf, the default: no limit" in " ".join(out.split())


def _fresh(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """``rightsize`` as a fresh interpreter has it: ``rightsize.diagnose`` not imported yet (undone after the test)."""
    for name in [m for m in sys.modules if m == "rightsize.diagnose" or m.startswith("rightsize.diagnose.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.delattr(rightsize, "diagnose")
    return rightsize


def _twice(rs: ModuleType) -> None:
    """The README's block, run twice (the second failed with "'module' object is not callable")."""
    for _ in range(2):
        with rs.diagnose() as w:
            pass
        assert isinstance(w, rightsize.diagnose.Watch) and "fix:" in w.report()


def test_rs_diagnose_stays_callable_when_used_first(monkeypatch: pytest.MonkeyPatch) -> None:
    rs = _fresh(monkeypatch)
    assert "diagnose" not in vars(rs)
    _twice(rs)
    import rightsize.diagnose  # explicitly, after: the name stays callable and keeps the package's contents

    _twice(rs)
    assert rs.diagnose is sys.modules["rightsize.diagnose"] and callable(rightsize.diagnose.watch)


def test_rs_diagnose_is_callable_when_the_subpackage_was_imported_first(monkeypatch: pytest.MonkeyPatch) -> None:
    rs = _fresh(monkeypatch)
    importlib.import_module("rightsize.diagnose")
    _twice(rs)
    from rightsize import diagnose as named

    with named() as w:
        pass
    assert w.facts.batches == 0


def _cpu(batch: int, threads: int | None) -> LoopFacts:
    """A CPU loop keeping 1 of 8 cores busy, not starving."""
    return LoopFacts(wall_s=10, loop_s=10, data_wait_s=0.1, batches=100, steps=100, cpu_s=10, loop_cpu_s=10,
                     logical_cores=8, torch_threads=threads, loaders=[LoaderInfo(2, False, batch)])  # fmt: skip


def test_cpu_utilization_fix_is_a_sentence_in_every_branch() -> None:
    [all_threads] = [f for f in diagnose(_cpu(64, 8)) if f.check == "CPU utilization"]
    assert all_threads.fix.startswith("run k worker processes x t threads") and " or " in all_threads.fix
    assert all_threads.evidence.endswith("; torch uses 8 thread(s)")
    for batch, threads in ((4, 8), (64, None)):
        [f] = [f for f in diagnose(_cpu(batch, threads)) if f.check == "CPU utilization"]
        assert f.fix.startswith("raise the batch size") and "; or run k worker processes" in f.fix
        assert not f.evidence.endswith(("; ", ";"))
    [f] = [f for f in diagnose(_cpu(64, 2)) if f.check == "CPU utilization"]  # 2 threads, 1 core busy: set them
    assert f.fix.startswith("torch.set_num_threads(8): torch runs 2 thread(s) on 8 cores; or run k worker processes")
    for f in (f for batch in (4, 64) for t in (None, 2, 8) for f in diagnose(_cpu(batch, t))):
        assert not f.fix.startswith("or ") and f.fix[0].islower()


def test_json_exit_code_is_the_one_diagnose_exits_with(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    _watched(monkeypatch, -9, None, None)  # SIGKILL: subprocess says -9, a shell (and diagnose) 137
    code, out, _ = _cli(["diagnose", "--json", "--", "python", "x.py"], capsys)
    doc = json.loads(out)
    assert code == 137 and doc["exit_code"] == 137
    assert doc["error"] == "the program was killed by signal 9 before the probe reported"
    _watched(monkeypatch, -15, FACTS, "timeout")
    code, out, _ = _cli(["diagnose", "--json", "--timeout", "5", "--", "python", "x.py"], capsys)
    assert code == 124 and json.loads(out)["exit_code"] == 124
    _watched(monkeypatch, 0, None, None)  # a program that never imported torch: the JSON said 0, diagnose exited 1
    code, out, _ = _cli(["diagnose", "--json", "--", "python", "x.py"], capsys)
    assert code == 1 and json.loads(out)["exit_code"] == 1


def test_python_minus_i_or_e_is_named_as_why_the_probe_never_reported(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`diagnose -- python -I x.py` said the program never imported torch, though it did: -I ignores PYTHONPATH."""
    _watched(monkeypatch, 3, None, None)
    for flags in (["-I"], ["-E"], ["-u", "-IB"]):
        code, _, err = _cli(["diagnose", "--", "python3", *flags, "x.py"], capsys)
        assert code == 3 and err.rstrip().endswith("python -I or -E ignores PYTHONPATH, through which the probe "
                                                   "loads: drop that flag"), flags  # fmt: skip
    code, _, err = _cli(["diagnose", "--", "python", "x.py", "-I"], capsys)  # the script's own option
    assert "PYTHONPATH" not in err


def test_a_launcher_whose_ranks_went_unwatched_is_named(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`diagnose -- torchrun ... ddp.py`: the probe watched the launcher, both ranks trained unwatched, and the verdict
    was only 'no DataLoader batch and no optimizer step was seen: wrap your loop in watch()'."""
    _watched(monkeypatch, 0, LoopFacts(wall_s=4.2, logical_cores=2), None)
    for cmd in (["torchrun", "--nproc_per_node", "2", "ddp.py"], ["python", "-m", "torch.distributed.run", "ddp.py"]):
        code, _, err = _cli(["diagnose", "--", *cmd], capsys)
        note = ("starts the training in worker processes the probe does not follow; diagnose one rank directly "
                "(python train.py, on one device)")  # fmt: skip
        assert code == 0 and note in " ".join(err.split()), cmd
    _, _, err = _cli(["diagnose", "--", "python", "train.py"], capsys)  # no launcher: no such note
    assert "worker processes the probe" not in err
