"""``rightsize memory`` through the real entry point, ``rightsize.cli.app.main`` (in-process: the
command imports torch and transformers, which a subprocess per test would pay for again)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from rightsize.cli.app import main


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str


Run = Callable[..., Result]


@pytest.fixture
def rightsize(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Run:
    monkeypatch.setenv("RIGHTSIZE_CATALOG", "")
    monkeypatch.setenv("COLUMNS", "200")

    def run(*args: str) -> Result:
        capsys.readouterr()
        with pytest.raises(SystemExit) as done:
            main(list(args))
        out = capsys.readouterr()
        return Result(int(done.value.code or 0), out.out, out.err)

    return run


@pytest.mark.slow
def test_memory_json_contract(rightsize: Run) -> None:
    out = rightsize("memory", "llama-1b", "--tiny", "--mode", "infer", "--precision", "fp16", "--seq", "16", "--json")
    assert out.returncode == 0, out.stderr
    est = json.loads(out.stdout)
    for key in (
        "breakdown",
        "components",
        "total_bytes",
        "total_gib",
        "tier",
        "fits",
        "advice",
        "assumptions",
        "tiers",
    ):
        assert key in est
    assert sum(est["breakdown"].values()) == est["total_bytes"]
    assert est["breakdown"]["kv_cache"] == 2 * 2 * 2 * 8 * 2 * 1 * 16  # tiny Llama: 2 layers, 2 kv heads, dim 8
    assert est["fits"] and est["tier"]


def test_memory_bad_input_exits_2_naming_the_field(rightsize: Run) -> None:
    out = rightsize("memory", "resnet50", "--batch", "0")
    assert out.returncode == 2
    assert out.stderr.strip() == "error: --batch: must be >= 1, got 0"  # the option's name, as every command
    out = rightsize("memory", "resnet50", "--precision", "fp9")
    assert out.returncode == 2 and out.stderr.startswith("error: --precision: unknown precision 'fp9'")
    out = rightsize("memory", "resnet50", "--mode", "trian")
    assert out.returncode == 2 and "Did you mean 'train'?" in out.stderr


@pytest.mark.slow  # > 1.9 s: make test runs it, make test-fast skips it
def test_memory_takes_the_spec_words_for_its_modes(rightsize: Run) -> None:
    a = rightsize("memory", "resnet50", "--tiny", "--mode", "training", "--batch", "2", "--json")
    b = rightsize("memory", "resnet50", "--tiny", "--mode", "train", "--batch", "2", "--json")
    assert a.returncode == 0 and b.returncode == 0, a.stderr
    assert json.loads(a.stdout)["total_bytes"] == json.loads(b.stdout)["total_bytes"]


@pytest.mark.slow  # > 1.6 s: make test runs it, make test-fast skips it
def test_memory_validate_on_cpu(rightsize: Run) -> None:
    out = rightsize("memory", "resnet50", "--tiny", "--mode", "train", "--batch", "4", "--device", "cpu",
                    "--validate", "--json")  # fmt: skip
    assert out.returncode == 0, out.stderr
    rows = {r["quantity"]: r for r in json.loads(out.stdout)["validation"]["rows"]}
    assert abs(rows["activations (saved for backward)"]["error_pct"]) <= 10
    assert rows["weights (params + buffers)"]["error_pct"] == 0


@pytest.mark.slow  # > 1.9 s: make test runs it, make test-fast skips it
def test_memory_llama_1b_fp16_fits_an_8gb_tier_of_the_builtin_list(rightsize: Run) -> None:
    out = rightsize("memory", "llama-1b", "--mode", "infer", "--precision", "fp16", "--tiers", "builtin", "--json")
    assert out.returncode == 0, out.stderr
    est = json.loads(out.stdout)
    assert est["tier_memory_gib"] == 8 and est["tier"] == "P4 (8 GiB)"
    bad = rightsize("memory", "llama-1b", "--tiers", "8,big")
    assert bad.returncode == 2 and bad.stderr.startswith("error: --tiers: expected 'builtin'")


def test_memory_tiers_refusal_states_the_range_it_accepts(rightsize: Run) -> None:
    for bad in ("0", "8,0", "16385", "-1"):
        out = rightsize("memory", "resnet50", "--tiers", bad)
        assert out.returncode == 2 and out.stdout == ""
        assert out.stderr == (
            "error: --tiers: expected 'builtin' or GiB sizes above 0 and at most 16384, such as '8,16,24', "
            f"got '{bad}'\n"
        )


def test_training_options_on_an_inference_estimate_are_refused(rightsize: Run) -> None:
    """An inference estimate holds no optimizer state: --optimizer sgd and --fused were silently ignored."""
    out = rightsize("memory", "bert-base", "--optimizer", "sgd")
    assert out.returncode == 2 and out.stderr == "error: --optimizer: applies to training only; add --mode train or " \
        "drop it\n"  # fmt: skip
    out = rightsize("memory", "bert-base", "--fused")
    assert out.returncode == 2 and out.stderr.startswith("error: --fused: applies to training only")


def test_bf16_tiers_leave_out_the_gpus_without_bf16() -> None:
    """llama-7b bf16 at 512 tokens "fit" T4/V100-16GB, which cannot run bf16."""
    from rightsize.catalog import gpu_memory_tiers, load_catalog

    cat = load_catalog()
    every = {n for _, names in gpu_memory_tiers(cat) for n in names}
    bf16 = {n for _, names in gpu_memory_tiers(cat, "bf16") for n in names}
    assert {"T4", "V100-16GB"} <= every and not {"T4", "V100-16GB"} & bf16
    assert {"A10G", "L4", "A100-40GB", "H100"} <= bf16 and "P4" not in bf16


def test_a_tiny_estimate_reads_in_mib_not_zeros() -> None:
    """A tiny model's parts all read 0.000 GiB beside shares of 16% and +64%."""
    from rightsize.cli.memory import _amount, _unit

    assert _unit(300_000) == ("MiB", 2**20) and _amount(240_000, 2**20) == "0.23"
    assert _unit(3 * 2**30) == ("GiB", 2**30) and _amount(3 * 2**30, 2**30) == "3.000"


@pytest.mark.slow  # ~2 s on 2 cores: kept out of make test-fast
def test_json_stays_one_document_when_the_users_model_prints_in_forward(
    rightsize: Run, tmp_path: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only a factory's own prints had been sent to stderr: one in forward() (run by the trace) broke the JSON."""
    from pathlib import Path

    mod = Path(str(tmp_path)) / "printing_forward_mod.py"
    mod.write_text(
        "import torch\n"
        "class M(torch.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.l = torch.nn.Linear(16, 2)\n"
        "    def forward(self, x):\n"
        "        print('FORWARD PRINT')\n"
        "        return self.l(x)\n"
        "def make():\n"
        "    return M()\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    out = rightsize("memory", "printing_forward_mod:make", "--shape", "16", "--device", "cpu", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["total_bytes"] > 0 and "FORWARD PRINT" in out.stderr
    out = rightsize("memory", "printing_forward_mod:make", "--shape", "16", "--device", "cpu")
    assert "printing_forward_mod:make infer fp32 batch 1 shape [16] on cpu" in out.stdout, out.stdout  # was "seq 128"


@pytest.mark.slow  # ~1 s on 2 cores: kept out of make test-fast
def test_a_token_models_shape_is_what_the_json_says_was_estimated(
    rightsize: Run, tmp_path: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--shape 16 --vocab 100 traced 16 tokens, but the JSON said seq_len 128 (the default it never ran)."""
    from pathlib import Path

    (Path(str(tmp_path)) / "token_shape_mod.py").write_text(
        "import torch\n"
        "class M(torch.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.e = torch.nn.Embedding(100, 8)\n"
        "    def forward(self, x):\n"
        "        return self.e(x)\n"
        "def make():\n"
        "    return M()\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    shaped = json.loads(rightsize("memory", "token_shape_mod:make", "--shape", "16", "--vocab", "100", "--device",
                                  "cpu", "--json").stdout)  # fmt: skip
    assert (shaped["shape"], shaped["seq_len"], shaped["vocab"]) == ([16], None, 100)
    text = rightsize("memory", "token_shape_mod:make", "--shape", "16", "--vocab", "100", "--device", "cpu").stdout
    assert "token_shape_mod:make infer fp32 batch 1 shape [16] on cpu" in text  # the header says the same
    plain = json.loads(
        rightsize("memory", "token_shape_mod:make", "--vocab", "100", "--device", "cpu", "--json").stdout
    )
    assert (plain["shape"], plain["seq_len"]) == (None, 128)  # no shape: the default sequence, which it traced
    assert shaped["total_bytes"] < plain["total_bytes"]  # 16 ids and embeddings traced, not 128


@pytest.mark.slow  # ~2 s on 2 cores: kept out of make test-fast
def test_a_tensor_too_large_to_size_blames_the_batch_too(rightsize: Run) -> None:
    """batch 1e8 x 1e6 tokens overflowed a tensor's size: the error named --seq alone and a position-table hint."""
    out = rightsize("memory", "llama-70b", "--batch", "100000000", "--seq", "1000000", "--mode", "train")
    said = "error: --batch: llama-70b at this batch and 1000000 tokens needs a tensor past what can be sized"
    assert out.returncode == 2 and out.stderr.startswith(said), out.stderr
    assert "lower the batch size or the input" in out.stderr


def test_gpu_tiers_on_a_cpu_estimate_and_a_validation_past_the_ram_are_refused(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--device cpu --tiers 8,16` answered "fits: 8 GiB GPU" for a CPU estimate; `--validate` of a model its own
    estimate put past this machine's RAM built it anyway (swap, or the OOM killer on a shared machine)."""
    import types

    import psutil
    from cli_kit import run_cli

    rc, out, err = run_cli(["memory", "simplenet", "--tiny", "--device", "cpu", "--tiers", "8,16"], capsys)
    assert (rc, out) == (2, "") and err.startswith("error: --tiers: lists GPU memory tiers; --device cpu")
    monkeypatch.setattr(psutil, "virtual_memory", lambda: types.SimpleNamespace(available=1000, total=2**34))
    rc, out, err = run_cli(["memory", "simplenet", "--tiny", "--device", "cpu", "--validate"], capsys)
    assert rc == 2 and "error: --validate: the estimate, " in err and "of RAM available here" in err


def test_a_torchscript_estimate_runs_bf16_and_refuses_int8_as_bench_does(
    tmp_path: object, capsys: pytest.CaptureFixture[str]
) -> None:
    """`memory m.pt --precision bf16` and `int8` both read "cannot run this input (... TorchScript interpreter)":
    the loaded file kept its fp32 weights beside a bf16 input; int8 is refused by bench, serve and plan."""
    from pathlib import Path

    import torch
    from cli_kit import run_cli

    path = Path(str(tmp_path)) / "m.pt"
    torch.jit.script(torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))).save(
        str(path)
    )
    rc, out, err = run_cli(["memory", str(path), "--shape", "8", "--precision", "bf16", "--json"], capsys)
    assert rc == 0, err
    assert json.loads(out)["total_bytes"] > 0
    rc, out, err = run_cli(["memory", str(path), "--shape", "8", "--precision", "int8"], capsys)
    assert (rc, out) == (2, "") and err.startswith("error: --precision: int8 quantized nothing in this model")


def test_an_image_smaller_than_a_spec_takes_is_refused(rightsize: Run) -> None:
    """`memory resnet50 --image 7` was estimated ("image 7"); a spec's input.image_size and `serve --image` take 8+."""
    out = rightsize("memory", "resnet50", "--image", "7")
    assert (out.returncode, out.stderr) == (2, "error: --image: must be >= 8 and only applies to image models, got 7 "
                                               "for resnet50\n")  # fmt: skip
