"""A user's saved graph (ONNX, torch.export) is held to the input dims it declares, and a model's wrong input is one
line naming the shape it takes, before anything is measured."""

from __future__ import annotations

import logging
import warnings
from pathlib import Path

import pytest
import torch
from cli_kit import run_cli
from torch import nn

from rightsize.errors import NotFoundError, SpecError
from rightsize.models import resolve_model
from rightsize.models.onnx_engine import OrtModule

pytest.importorskip("onnxruntime")


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("declared")
    torch.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)).eval()
    x = torch.randn(2, 8)
    batch = ({0: torch.export.Dim("batch")},)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(mlp, (x,), str(d / "mlp.onnx"), dynamo=True, verbose=False, dynamic_shapes=batch)
        torch.onnx.export(mlp, (x,), str(d / "fixed.onnx"), dynamo=True, verbose=False)
        torch.jit.save(torch.jit.trace(mlp, x), str(d / "mlp.pt"))
    torch.export.save(torch.export.export(mlp, (x,), dynamic_shapes=batch), str(d / "mlp.pt2"))
    return {p.name: p for p in d.iterdir()}


@pytest.mark.slow  # ~2 s on 2 cores: kept out of make test-fast
@pytest.mark.parametrize("name", ["mlp.onnx", "mlp.pt2"])
def test_a_shape_the_graph_does_not_declare_is_refused_naming_the_one_it_does(
    saved: dict[str, Path], name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """ONNX Runtime's traceback ("Got invalid dimensions") or torch.export's failed guard, exit 1, had been the
    answer; bench stored the same cut-off error on every row."""
    ref = str(saved[name])
    for shape in ([5], [8, 2]):
        with pytest.raises(SpecError, match=r"the graph expects \[batch, 8\] \(batch first\); give the per-sample "
                           r"shape it takes \(--shape 8, or input.shape: \[8\] in a spec\)"):  # fmt: skip
            resolve_model(ref, shape)
    code, _, err = run_cli(["memory", ref, "--shape", "5", "--device", "cpu"], capsys)
    assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert err.startswith(f"error: input.shape: {ref} cannot run samples of shape [5]: the graph expects [batch, 8]")
    assert resolve_model(ref, [8]).sample_shape() == (8,)


@pytest.mark.slow  # ~2 s on 2 cores: kept out of make test-fast
def test_onnx_runtime_refusals_are_one_line_with_their_cause(saved: dict[str, Path]) -> None:
    """The cause ("index: 1 Got: 5 Expected: 8") was on a second line that bench's table cut; a fixed-batch graph's
    other batch sizes failed with no word of why (`memory --batch` explained it)."""
    session = OrtModule.load(saved["mlp.onnx"])
    with pytest.raises(ValueError, match=r"^ONNX Runtime refused the input: .*Got invalid dimensions for input.* "
                       r"index: 1 Got: 5 Expected: 8"):  # fmt: skip
        session(torch.zeros(1, 5))
    fixed = OrtModule.load(saved["fixed.onnx"])
    assert fixed(torch.zeros(2, 8)).shape == (2, 4)
    with pytest.raises(ValueError, match=r"^fixed.onnx was exported for batch 2 only; re-export it with a dynamic "
                       r"batch axis"):  # fmt: skip
        fixed(torch.zeros(8, 8))


def test_options_a_float_graph_would_ignore_are_refused(
    saved: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    ref = str(saved["mlp.onnx"])
    code, _, err = run_cli(["memory", ref, "--vocab", "100", "--device", "cpu"], capsys)
    assert code == 2
    assert err.startswith(f"error: input.vocab_size: only applies to token-id inputs; {ref} takes a float input")
    code, _, err = run_cli(["memory", ref, "--seq", "64", "--device", "cpu"], capsys)
    assert (code, err.strip()) == (2, f"error: --seq: only applies to token models; {ref} takes features input: "
                                      "drop it")  # fmt: skip


def test_a_torchscript_shape_error_quotes_the_interpreters_cause(
    saved: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """It had quoted only "The following operation failed in the TorchScript interpreter." """
    code, _, err = run_cli(["memory", str(saved["mlp.pt"]), "--shape", "5", "--device", "cpu"], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert (
        "cannot run samples of shape [5] (RuntimeError: TorchScript: mat1 and mat2 shapes cannot be multiplied "
        "(1x5 and 8x16))" in err
    )


def test_a_pt2_loads_without_the_deserializing_fallback_warning(
    saved: dict[str, Path], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        resolve_model(str(saved["mlp.pt2"]), [8]).build(False)
    assert not [r for r in caplog.records if "Ran into the following error" in r.getMessage()]
    with pytest.raises(NotFoundError, match=r"give the path of your .onnx, TorchScript \(.pt\) or torch.export "
                       r"\(.pt2\) file"):  # fmt: skip
        resolve_model(str(saved["mlp.pt2"]) + ".gone.pt2", [8])


def test_bench_refuses_a_model_files_input_before_its_sweep(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Every row had failed with "mat1 and mat2 shapes cannot be multiplied", exit 1; memory and serve stop. (A
    factory is not run in the parent to check it: it would run twice, tests/cli/test_factory_timeout_cli.py.)"""
    import torch
    from torch import nn

    torch.jit.script(nn.Linear(32, 4)).save(str(tmp_path / "lin.pt"))
    spec = tmp_path / "b.yaml"
    spec.write_text(f"model: {tmp_path / 'lin.pt'}\ninput: {{shape: [16]}}\nbatch_sizes: [1, 8]\n"
                    "precisions: [fp32]\ndevices: [cpu]\n")  # fmt: skip
    code, _, err = run_cli(["bench", str(spec), "--store", str(tmp_path / "s.sqlite")], capsys)
    assert code == 2 and "measuring" not in err and len(err.strip().splitlines()) == 1, err
    assert err.startswith("error: input.shape: ") and "cannot run samples of shape [16]" in err, err
