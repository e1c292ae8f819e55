"""Every command, given arguments it cannot take, exits 2 with an error and no traceback."""

from __future__ import annotations

import json
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
        (["bench", "examples/quick.yaml", "--memory-limit", ""], "--memory-limit: is empty"),  # had run uncapped
        (["results", ""], "RUN: is empty"),  # had listed every run
        (["plan", "examples/quick.yaml", "--top", "nan"], "--top"),
        (["loadtest", "http://127.0.0.1:9/", "--rate", "nan"], "--rate"),
        (["loadtest", "http://127.0.0.1:99999", "--rate", "2"], "URL: cannot read"),
        (["loadtest", "http://127.0.0.1:99999", "--generate", "--rate", "2"], "URL: cannot read"),
        (["loadtest", "http://[::1", "--generate", "--rate", "2"], "Invalid IPv6 URL"),
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
        # an option typed at its default value was served (or sent) silently, as if it applied
        (["serve", "gpt2", "--generate", "--size", "tiny", "--max-batch", "8"], "--max-batch: only applies to a"),
        (["loadtest", "http://127.0.0.1:9/", "--generate", "--rate", "2", "--samples", "1"], "--samples: only applies"),
        (["loadtest", "http://127.0.0.1:9/", "--generate", "--rate", "2", "--samples", "4"], "--samples: only applies"),
        (["loadtest", "http://127.0.0.1:9/", "--generate", "--find-knee", "--slo-p95", "100"], "--find-knee: the knee"),
        (["loadtest", "http://127.0.0.1:9/", "--generate", "--rate", "2", "--prompt-tokens", "10-"], "--prompt-tokens"),
        (["loadtest", "http://127.0.0.1:9/", "--rate", "2", "--output-tokens", "9"], "--output-tokens: only applies"),
        (
            ["serve", "gpt2", "--generate", "--max-prompt-tokens", "5000"],
            "--max-prompt-tokens: --max-prompt-tokens 5000",
        ),
        # an output path that cannot be written: refused before the work (export, a pipeline run, a plan)
        (["results", "--export", "/proc/nope/x.csv"], "--export: cannot write '/proc/nope/x.csv'"),
        (
            ["pipeline", "examples/batch-embedding.yaml", "--items", "4", "--output", "/proc/nope/x.jsonl"],
            "--output: cannot write",
        ),
        (["plan", "examples/sentiment-api.yaml", "--report", "/proc/nope/r.html"], "--report: cannot write"),
        (["report", "-o", "/proc/nope/r.html"], "--output: cannot write"),
        (["results", "--store", "/tmp"], "--store: '/tmp' is a directory, not a store file"),
        # a method or URL that would break the request line (urlsplit drops CR/LF silently)
        (["loadtest", "http://127.0.0.1:9/", "--rate", "1", "--method", "GE T"], "--method: 'GE T' is not an HTTP"),
        (["loadtest", "http://127.0.0.1:9/", "--rate", "1", "--method", ""], "--method: '' is not an HTTP method"),
        (["loadtest", "http://127.0.0.1:9/a\r\nX-Inj: y", "--rate", "1"], "holds whitespace or a control character"),
        # a token with a line break would end the Authorization header and inject another
        (["loadtest", "http://127.0.0.1:9/", "--rate", "5", "--token", "a\r\nX-Injected: 1"], "--token: must be one"),
        # a zoo model's input is --seq / --image: --shape and --vocab were ignored without a word
        (["memory", "resnet50", "--shape", "3,64,64"], "--shape: sets a user model's input; 'resnet50' takes --image"),
        (["serve", "distilbert", "--vocab", "100"], "--vocab: sets a user model's input"),
    ],
)
def test_bad_invocations_exit_2_without_a_traceback(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = _run(argv, capsys)
    assert code == 2 and says in err and "Traceback" not in err
    if argv:  # one line, as every bad input gets: click's usage errors were four (usage, hint, blank, Error:)
        assert err.startswith("error: ") and err.count("\n") == 1, err


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (
            ["results", "--limit", "0"],
            "error: --limit: Input should be greater than or equal to 1 (options: rightsize results --help)",
        ),
        (["plan", "examples/quick.yaml", "--nope"], "error: No such option: --nope"),
        (["plan"], "error: Missing argument 'spec' (options: rightsize plan --help)"),
        # a range refusing nan had said "Input should be greater than or equal to 0": nan is not below 0
        (["serve", "simplenet", "--max-wait-ms", "nan"], "error: --max-wait-ms: nan is not a number; give a number"),
        (["results", "--limit=NaN"], "error: --limit: nan is not a number; give a number in the range --help shows"),
        # a whole-number option given e-notation (as --tokens takes) had read "Input should be a valid integer, unable
        # to parse string as an integer": the value in digits instead, for every command
        (
            ["finetune", "llama-7b", "--tokens", "50e6", "--seq", "4e3"],
            "error: --seq: takes a whole number in digits, not '4e3'; give --seq 4000 (options: rightsize finetune",
        ),
        (
            ["finetune", "llama-7b", "--tokens", "50e6", "--seq=1e9"],
            "error: --seq: takes a whole number in digits, not '1e9', and 1000000000 is past its range (1 to 10000000)",
        ),
        (
            ["memory", "gpt2", "--batch", "4.5"],
            "error: --batch: '4.5' is not a whole number; give --batch 4 or --batch 5",
        ),
        (
            ["finetune", "llama-7b", "--tokens", "1e6", "--batch", "x"],
            "error: --batch: 'x' is not a whole number; give one in digits, e.g. --batch 4",
        ),
        (["results", "--limit", "1e2"], "error: --limit: takes a whole number in digits, not '1e2'; give --limit 100"),
        (["results", "--limit", "1e999"], "error: --limit: '1e999' is not a whole number; give one in digits"),
    ],
)
def test_a_usage_error_is_one_line_naming_the_option(
    argv: list[str], line: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = _run(argv, capsys)
    assert code == 2 and err.startswith(line) and err.count("\n") == 1, err


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
    assert code == 2 and err.startswith("error: --rank: must be <= the model's hidden size 4096")


def test_check_writable_leaves_no_probe_and_keeps_an_existing_file(tmp_path: Path) -> None:
    from rightsize.cli._common import check_writable
    from rightsize.errors import SpecError

    new = tmp_path / "made" / "out.csv"
    check_writable(new, "--export")
    assert not new.parent.exists()  # the probe file and its folder are gone (the writer makes the folder)
    old = tmp_path / "old.csv"
    old.write_text("kept")
    check_writable(old, "--export")
    assert old.read_text() == "kept"
    with pytest.raises(SpecError, match=r"--export: cannot write .* \(is a directory\)"):
        check_writable(tmp_path, "--export")


def test_check_writable_refuses_the_store_a_fifo_and_a_name_too_long(tmp_path: Path) -> None:
    import os

    from rightsize.cli._common import check_writable
    from rightsize.errors import SpecError

    store = tmp_path / "st.json"  # a store may have any name: a report or export onto it would destroy it
    store.write_bytes(b"SQLite format 3\x00")
    for path in (store, tmp_path / "." / "st.json", Path(f"{store}-wal")):
        with pytest.raises(SpecError, match=r"it is the results store"):
            check_writable(path, "--output", store)
    fifo = tmp_path / "out.html"
    os.mkfifo(fifo)  # writing it would block for ever
    with pytest.raises(SpecError, match=r"--output: cannot write .* \(is not a regular file\)"):
        check_writable(fifo, "--output", store)
    with pytest.raises(SpecError, match=r"--output: cannot write '.{40,80}' \(File name too long\)"):
        check_writable(tmp_path / ("x" * 300 + ".html"), "--output", store)
    check_writable(tmp_path / "fine.html", "--output", store)


@pytest.mark.slow  # a real store and three commands
def test_an_export_or_import_onto_the_store_exits_2_and_keeps_every_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from rightsize.store import Store

    store = tmp_path / "runs.json"  # named like an export: the mistake this guards against
    with Store(store) as db:
        db.finish_run(db.start_run("bench", name="kept", model="simplenet"))
    before = store.read_bytes()
    code, err = _run(["results", "--store", str(store), "--export", str(store)], capsys)
    assert code == 2 and "it is the results store" in err and "Traceback" not in err
    monkeypatch.setenv("RIGHTSIZE_STORE", str(store))  # catalog import has no --store: the default one is kept
    code, err = _run(["catalog", "import", str(tmp_path), "-o", str(store), "--force"], capsys)
    assert code == 2 and "it is the results store" in err
    assert store.read_bytes() == before
    with Store(store, read_only=True) as db:
        assert [r.name for r in db.runs()] == ["kept"]
    export = tmp_path / "e.csv"
    (tmp_path / "e-plans.csv").mkdir()  # the plans file beside it cannot be written: refused before any file is
    code, err = _run(["results", "--store", str(store), "--export", str(export)], capsys)
    assert code == 2 and "e-plans.csv" in err and not export.exists()


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--targets", ",,,"], "--targets: names no layer"),
        # an empty value (or a script's quotes passed through) read "names no layer (got '""')"
        (["--targets", ""], "--targets: is empty; pass q,k,v,o,gate,up,down or all-linear"),
        (["--targets", '""'], "--targets: is empty; pass"),
        (["--targets", "all-linear,lm_head"], "--targets: 'all-linear' takes no other names"),
        (["--method", "full", "--rank", "8"], "--rank: applies to --method lora or qlora only"),
        (["--tokens", "1e-300"], "--tokens: must be a finite number >= 1"),
        (["--mfu", "1e-300"], "--mfu: must be a finite number >= 0.01"),
        (["--framework", "peft"], "--framework: unknown framework 'peft'; choose one of hf, torchtune, litgpt"),
        (["--framework", "HF"], "Did you mean 'hf'?"),
        (["--method", "bogus"], "--method: unknown method 'bogus'"),
        (
            ["--precision", "BF16"],
            "--precision: unknown precision 'BF16'; choose one of fp32, bf16, fp16, amp_bf16, "
            "amp_fp16. Did you mean 'bf16'?",
        ),
        (["--targets", "q,zz"], "--targets: unknown target 'zz'"),
        (["--rank", "5000"], "--rank: must be <= the model's hidden size 2048"),
    ],
)
def test_finetune_refuses_values_that_plan_nothing(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["finetune", "llama-1b", "--tokens", "1e6"]
    code, err = _run(base + argv, capsys)
    assert code == 2 and says in err and "Traceback" not in err


def test_finetune_refuses_a_sequence_past_gpt2s_position_table(capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _run(["finetune", "gpt2", "--tokens", "1e6", "--seq", "100000"], capsys)
    assert code == 2 and "the learned position table of 'gpt2' holds 1024" in err


def test_finetune_refuses_an_encoder_config_and_says_when_nothing_holds_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "bert", "hidden_size": 768, "num_hidden_layers": 12,
                                                     "num_attention_heads": 12, "intermediate_size": 3072,
                                                     "vocab_size": 30522}))  # fmt: skip
    code, err = _run(["finetune", f"hf:{tmp_path}", "--tokens", "1e6", "--seq", "512"], capsys)
    assert code == 2 and "an encoder, not a decoder" in err and "Traceback" not in err
    code, err = _run(["finetune", "bert-base", "--tokens", "1e6"], capsys)
    assert code == 2 and "bert-base is an encoder, not a decoder" in err
    assert "to fine-tune bert-base, `rightsize plan` a spec with mode: training" in err  # the route that plans it
    with pytest.raises(SystemExit) as exc:
        main(["finetune", "llama-7b", "--tokens", "1e10", "--no-checkpointing", "--batch", "1000000", "--seq", "4096",
              "--json"])  # fmt: skip
    got = json.loads(capsys.readouterr().out)
    assert int(exc.value.code or 0) == 0 and got["options"] == [] and len(got["notes"]) == 1
    assert got["notes"][0].startswith("no catalog GPU instance holds it: activations and logits take ")
    assert got["notes"][0].endswith("no sharding splits them: try --checkpointing, a smaller --batch or --seq")


def test_bench_refuses_what_it_cannot_measure_before_measuring(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A --ray address Ray cannot parse (a traceback), more threads than any machine here has (measured, flagged
    contended, measured again on every run), a sequence past the model's positions (every config failed)."""
    monkeypatch.setenv("RIGHTSIZE_STORE", str(tmp_path / "store.sqlite"))

    def spec(**over: object) -> str:
        path = tmp_path / f"spec{len(list(tmp_path.glob('spec*')))}.yaml"
        path.write_text(json.dumps({"model": "simplenet", "tiny": True, "batch_sizes": [1]} | over))
        return str(path)

    for argv, says in [
        (["bench", spec(), "--ray", "bogus"], "error: --ray: must be 'auto' or a cluster address HOST:PORT"),
        (["bench", spec(threads=[4096]), "--json"], "error: threads[0]: 4096 is more than the "),
        (["bench", spec(model="distilbert", tiny=False, input={"seq_len": 100000})], "error: input.seq_len: 100000 is"),
    ]:
        code, err = _run(argv, capsys)
        assert code == 2 and err.startswith(says) and err.count("\n") == 1, (argv, err)


def test_a_comma_separated_provider_list_is_split(capsys: pytest.CaptureFixture[str]) -> None:
    """`catalog --provider aws,gcp` was one provider named 'aws,gcp': "Did you mean 'gcp'?"."""
    from cli_kit import run_cli

    rc, out, err = run_cli(["catalog", "--provider", "aws,gcp", "--gpu", "--json"], capsys)
    assert rc == 0, err
    assert {r["provider"] for r in json.loads(out)["instances"]} == {"aws", "gcp"}


def test_a_provider_list_that_names_nothing_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    """`finetune --provider ,` (an empty variable joined by a script) had meant every provider, silently."""
    for argv in (["finetune", "llama-7b", "--tokens", "1e8", "--provider", ","], ["catalog", "--region", " , "]):
        code, err = _run(argv, capsys)
        flag = argv[-2]
        assert code == 2 and err.startswith(f"error: {flag}: ") and "names nothing" in err, (argv, err)
        assert ("e.g. --region us-east-1" in err) == (flag == "--region"), err
        assert err.count("\n") == 1, err


def test_the_output_probe_leaves_no_folders_behind(tmp_path: Path) -> None:
    """`report --output new/dirs/<300-char name>` was refused but left new/ and new/dirs/ behind."""
    from rightsize.cli._common import check_writable
    from rightsize.errors import SpecError

    with pytest.raises(SpecError, match=r"File name too long"):
        check_writable(tmp_path / "new" / "dirs" / ("x" * 300 + ".html"), "--output")
    assert list(tmp_path.iterdir()) == []
    check_writable(tmp_path / "kept" / "out.html", "--output")  # accepted: the writer makes the folder
    assert list(tmp_path.iterdir()) == []  # `report RUN -o new/x.html` with no such RUN had left new/ behind
