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
