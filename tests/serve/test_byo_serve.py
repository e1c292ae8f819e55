"""`rightsize serve` with a user's model file, and the tiny variant's explicit sequence length."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import torch
from torch import nn

from rightsize.serve.config import ServerConfig
from rightsize.serve.workers import input_spec, load_model


@pytest.mark.parametrize(("seq", "expected"), [(None, 16), (64, 64), (500, 128)])
def test_tiny_serve_honours_an_explicit_seq(seq: int | None, expected: int) -> None:
    """--tiny shrinks the default sequence (128 -> 16) but an explicit --seq is kept, up to the tiny
    model's 128 positions (it was capped at 16 whatever was asked)."""
    spec, _ = input_spec(ServerConfig(model="distilbert", tiny=True, seq_len=seq))
    assert spec.sample_shape == (expected,)
    module = load_model(ServerConfig(model="distilbert", tiny=True, seq_len=seq)).module
    assert module is not None
    assert module(torch.zeros((2, expected), dtype=torch.int64)).shape == (2, 2)


@pytest.mark.slow  # > 1.2 s: make test runs it, make test-fast skips it
def test_serves_an_onnx_file_with_its_own_input_contract(tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime")
    model = nn.Sequential(nn.Embedding(300, 16), nn.Flatten(), nn.Linear(16 * 8, 3)).eval()
    path = tmp_path / "tok.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (torch.zeros((2, 8), dtype=torch.int64),), str(path), dynamo=True, verbose=False,
                          dynamic_shapes=({0: torch.export.Dim("batch")},))  # fmt: skip
    loaded = load_model(ServerConfig(model=str(path), precision="int8"))
    assert (loaded.spec.sample_shape, loaded.spec.dtype, loaded.spec.max_value) == ((8,), "int64", 300)
    x = torch.randint(0, 300, (4, 8))
    assert loaded.module is not None and loaded.module.inner.precision == "int8"  # the engine's own int8
    assert torch.allclose(loaded.module(x), model(x), atol=0.1)
