"""Every command, given arguments it cannot take, exits 2 with an error and no traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from rightsize.cli.app import COMMAND_MODULES, main


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    return int(exc.value.code or 0), capsys.readouterr().err


@pytest.mark.parametrize("command", COMMAND_MODULES)
def test_an_unknown_option_exits_2_for_every_command(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _run([command, "--no-such-option"], capsys)
    assert code == 2 and "No such option" in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        ([], "Usage"),
        (["bogus"], "No such command"),
        (["plan"], "Missing argument"),
        (["plan", "examples/quick.yaml", "--top", "0"], "--top"),
        (["plan", "examples/quick.yaml", "--top", "nan"], "--top"),
        (["loadtest", "http://127.0.0.1:9/", "--rate", "nan"], "--rate"),
        (["loadtest", "http://127.0.0.1:9/", "--rate", "5", "--warmup-s", "-1"], "--warmup-s"),
        (["serve", "simplenet", "--slo-ms", "inf"], "--slo-ms"),
        (["serve", "simplenet", "--max-queue-batches", "nan"], "--max-queue-batches"),
        (["dashboard", "--port", "70000"], "--port"),
        # numbers past any real use: these crashed deep inside torch, numpy or the allocator (or ran for ever)
        (["memory", "distilbert", "--batch", "99999999999999999999"], "--batch"),
        (["serve", "distilbert", "--seq", "99999999999999999999"], "--seq"),
        (["serve", "distilbert", "--workers", "99999999999999999999"], "--workers"),
        (["pipeline", "examples/batch-embedding.yaml", "--items", "99999999999999999999"], "--items"),
        (["validate", "examples/sentiment-api.yaml", "--seed", "-1"], "--seed"),
        (["loadtest", "http://127.0.0.1:9/", "--rate", "5", "--seed", "-1"], "--seed"),
        (["plan", "examples/quick.yaml", "--seed", "-1"], "--seed"),
        (["results", "--limit", "99999999999999999999"], "--limit"),
        (["serve", "gpt2", "--generate", "--size", "tiny", "--seq", "64"], "--seq: only applies to a prediction"),
        # an output path that cannot be written: refused before the work (export, a pipeline run, a plan)
        (["results", "--export", "/proc/nope/x.csv"], "--export: cannot write '/proc/nope/x.csv'"),
        (
            ["pipeline", "examples/batch-embedding.yaml", "--items", "4", "--output", "/proc/nope/x.jsonl"],
            "--output: cannot write",
        ),
        (["plan", "examples/sentiment-api.yaml", "--report", "/proc/nope/r.html"], "--report: cannot write"),
        (["report", "-o", "/proc/nope/r.html"], "--output: cannot write"),
        (["results", "--store", "/tmp"], "--store: '/tmp' is a directory, not a store file"),
        # a token with a line break would end the Authorization header and inject another
        (["loadtest", "http://127.0.0.1:9/", "--rate", "5", "--token", "a\r\nX-Injected: 1"], "--token: must be one"),
        # a zoo model's input is --seq / --image: --shape and --vocab were ignored without a word
        (["memory", "resnet50", "--shape", "3,64,64"], "--shape: sets a user model's input; 'resnet50' takes --seq"),
        (["serve", "distilbert", "--vocab", "100"], "--vocab: sets a user model's input"),
    ],
)
def test_bad_invocations_exit_2_without_a_traceback(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = _run(argv, capsys)
    assert code == 2 and says in err and "Traceback" not in err


@pytest.mark.slow  # > 1.9 s: make test runs it, make test-fast skips it
def test_results_never_creates_a_store_and_unknown_providers_are_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "no" / "store.sqlite"
    code, err = _run(["results", "--store", str(missing)], capsys)
    assert code == 2 and "does not exist" in err and not missing.parent.exists()
    code, err = _run(["catalog", "--provider", "oracle"], capsys)
    assert code == 2 and "known: aws, azure, gcp" in err
    code, err = _run(["finetune", "llama-7b", "--tokens", "1e6", "--provider", "aws2"], capsys)
    assert code == 2 and "known: aws, azure, gcp" in err and "Did you mean 'aws'" in err
    code, err = _run(["finetune", "llama-7b", "--tokens", "1e6", "--rank", "1000000"], capsys)
    assert code == 2 and err.startswith("error: lora_rank: must be <= the model's hidden size 4096")


def test_check_writable_leaves_no_probe_and_keeps_an_existing_file(tmp_path: Path) -> None:
    from rightsize.cli._common import check_writable
    from rightsize.errors import SpecError

    new = tmp_path / "made" / "out.csv"
    check_writable(new, "--export")
    assert new.parent.is_dir() and not new.exists()  # the folder is made, the probe file is gone
    old = tmp_path / "old.csv"
    old.write_text("kept")
    check_writable(old, "--export")
    assert old.read_text() == "kept"
    with pytest.raises(SpecError, match=r"--export: cannot write .* \(is a directory\)"):
        check_writable(tmp_path, "--export")
