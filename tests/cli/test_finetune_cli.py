"""`rightsize finetune`'s text output: the lines under its table."""

from __future__ import annotations

import json

import pytest

from rightsize.cli.app import main


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert int(exc.value.code or 0) == 0
    return capsys.readouterr().out


def test_the_network_share_of_multi_node_rows_is_one_value_when_its_ends_print_alike(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """One multi-node row (a3-highgpu-8g x 4, ~1.6%) read "2%-2% of the training time"."""
    argv = ["finetune", "llama-70b", "--tokens", "1e6", "--method", "full", "--precision", "fp32", "--provider", "gcp"]
    shares = [o["network_share"] for o in json.loads(_run([*argv, "--json"], capsys))["options"] if o["nodes"] > 1]
    assert shares and f"{min(shares):.0%}" == f"{max(shares):.0%}"  # the case under test
    text = " ".join(_run(argv, capsys).split())  # rich wraps long lines
    assert f"each node's network: {shares[0]:.0%} of the training time (projected)" in text
    argv = ["finetune", "llama-70b", "--tokens", "1e6", "--method", "full"]  # many rows: a range
    shares = [o["network_share"] for o in json.loads(_run([*argv, "--json"], capsys))["options"] if o["nodes"] > 1]
    low, high = f"{min(shares):.0%}", f"{max(shares):.0%}"
    assert low != high and f"each node's network: {low}-{high} of the training time" in " ".join(
        _run(argv, capsys).split()
    )


def test_the_rows_round_the_gib_per_gpu_once_as_the_header_does(capsys: pytest.CaptureFixture[str]) -> None:
    """llama-13b QLoRA fp16 needs 14.746 GiB: the header read 14.7, the rows 14.8 (14.75 first, then one decimal)."""
    argv = ["finetune", "llama-13b", "--method", "qlora", "--precision", "fp16", "--tokens", "50e6", "--top", "3"]
    doc = json.loads(_run([*argv, "--json"], capsys))
    gib = doc["memory_one_gpu"]["total_bytes"] / 2**30
    assert f"{gib:.1f}" == "14.7" and round(gib, 2) == 14.75  # the case under test
    assert {o["gib_per_gpu"] for o in doc["options"]} == {round(gib, 3)}  # one GPU each, ZeRO 0: the header's total
    text = _run(argv, capsys)
    assert "14.7 GiB unsharded on one GPU" in " ".join(text.split())
    rows = [line for line in text.splitlines() if " x L4 " in line or " x H100 " in line]
    assert rows and all("14.7 " in r and "14.8" not in r for r in rows)


def test_each_row_says_its_global_batch_and_the_help_says_how_the_batch_scales(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """--batch is per GPU: an 8-GPU row trained a global batch 8x the 1-GPU row's (8x fewer optimizer steps) and no
    output said "global"."""
    argv = ["finetune", "llama-13b", "--method", "qlora", "--tokens", "50e6", "--top", "8"]
    doc = json.loads(_run([*argv, "--json"], capsys))
    sizes = {o["global_batch"] for o in doc["options"]}
    assert all(o["global_batch"] == 4 * o["gpus"] * o["nodes"] for o in doc["options"]) and {4, 32} <= sizes
    assert any("micro-batch per GPU" in n and "global batch" in n for n in doc["notes"])
    text = " ".join(_run(argv, capsys).split())
    assert "micro-batch 4 per GPU x seq 2048" in text and "global batch" in text
    assert "from 4 sequences a step (6,104 optimizer steps) to 32 (763 steps)" in text
    helptext = " ".join(_run(["finetune", "--help"], capsys).split())
    assert "a row's global batch is this x its GPUs" in helptext
