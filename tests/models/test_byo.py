"""Bring your own model: HF config, TorchScript, ONNX and factory refs resolve, build, run and fail cleanly."""

from __future__ import annotations

import json
import sys
import textwrap
import warnings
from pathlib import Path

import pytest
import torch
from cli_kit import run_cli
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from rightsize.errors import NotFoundError, SpecError, UnsupportedError
from rightsize.measure.precision import prepare_inference
from rightsize.models import resolve_model
from rightsize.models.onnx_engine import onnx_activation_bytes, onnx_flops, onnx_input
from rightsize.models.user_input import user_input_options

pytest.importorskip("onnxruntime")


def _mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 4)).eval()


def _export(model: nn.Module, x: torch.Tensor, path: Path) -> Path:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (x,), str(path), dynamo=True, verbose=False,
                          dynamic_shapes=({0: torch.export.Dim("batch")},))  # fmt: skip
    return path


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("byo")
    mlp = _mlp()
    x = torch.randn(2, 64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.jit is deprecated in favour of torch.export (both supported)
        torch.jit.save(torch.jit.trace(mlp, x), str(d / "mlp.pt"))
    torch.export.save(torch.export.export(mlp, (x,), dynamic_shapes=({0: torch.export.Dim("batch")},)),
                      str(d / "mlpx.pt2"))  # fmt: skip
    _export(mlp, x, d / "mlp.onnx")
    tok = nn.Sequential(nn.Embedding(300, 16), nn.Flatten(), nn.Linear(16 * 8, 3)).eval()
    _export(tok, torch.randint(0, 300, (2, 8)), d / "tok.onnx")
    (d / "bert").mkdir()
    (d / "bert" / "config.json").write_text(json.dumps({
        "model_type": "bert", "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
        "intermediate_size": 64, "vocab_size": 500, "max_position_embeddings": 64, "num_labels": 3,
    }))  # fmt: skip
    (d / "gpt").mkdir()
    (d / "gpt" / "config.json").write_text(json.dumps({
        "model_type": "gpt2", "n_embd": 32, "n_layer": 2, "n_head": 2, "vocab_size": 400, "n_positions": 64,
    }))  # fmt: skip
    (d / "notjit.pt").write_bytes(b"not a zip archive")
    (d / "bad").mkdir()
    (d / "bad" / "config.json").write_text("{not json")
    return {p.stem if p.is_file() else p.name: p for p in d.iterdir()} | {"dir": d}


@pytest.mark.slow  # ~2 s on 2 cores: kept out of make test-fast
def test_memory_of_a_static_batch_onnx_graph_names_its_batch(tmp_path: Path) -> None:
    """`memory static.onnx --batch 4` of a graph exported for batch 2 gave ONNX Runtime's traceback."""
    from rightsize.estimate.memory_estimate import estimate_memory

    path = tmp_path / "static.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(nn.Linear(8, 3).eval(), (torch.ones(2, 8),), str(path), dynamo=True)
    with pytest.raises(SpecError, match=r"^batch: .*static\.onnx was exported for batch 2 only; estimate batch 2"):
        estimate_memory(str(path), batch_size=4, device="cpu")
    assert estimate_memory(str(path), batch_size=2, device="cpu").total_bytes > 0


@pytest.mark.slow  # ~2 s on 2 cores: kept out of make test-fast
def test_an_onnx_graph_with_several_outputs_answers_with_its_logits(tmp_path: Path) -> None:
    class ScoreAndLogits(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.l = nn.Linear(8, 3)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            logits = self.l(x)
            return logits.amax(dim=1), logits

    path = tmp_path / "two.onnx"
    model = ScoreAndLogits().eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (torch.ones(2, 8),), str(path), dynamo=True, output_names=["score", "logits"],
                          dynamic_shapes=({0: torch.export.Dim("batch")},))  # fmt: skip
    x = torch.randn(5, 8)
    out = resolve_model(str(path), [8]).build()(x)
    assert out.shape == (5, 3) and torch.allclose(out, model(x)[1], atol=1e-5)  # had answered the (5,) score


@pytest.mark.slow  # > 1.2 s: make test runs it, make test-fast skips it
def test_torchscript_runs_with_the_spec_shape(files: dict[str, Path]) -> None:
    entry = resolve_model(str(files["mlp"].with_suffix(".pt")), [64])
    assert entry.kind == "features" and entry.sample_shape(seq_len=128) == (64,)
    x = entry.example_input(5)
    out = entry.build().eval()(x)
    assert out.shape == (5, 4)
    assert torch.allclose(out, _mlp()(x), atol=1e-5)  # the same weights came back


@pytest.mark.slow
def test_torch_export_program_runs(files: dict[str, Path]) -> None:
    entry = resolve_model(str(files["mlpx"]), [64])
    x = entry.example_input(3)
    assert torch.allclose(entry.build()(x), _mlp()(x), atol=1e-5)


@pytest.mark.slow  # ~2 s on 2 cores: kept out of make test-fast
def test_onnx_reads_its_input_and_counts_flops_like_pytorch(files: dict[str, Path]) -> None:
    path = files["mlp"].with_suffix(".onnx")
    info = onnx_input(path)
    assert not info.tokens and info.fixed_shape() == (64,)
    entry = resolve_model(str(path))  # no shape needed: the graph has it
    assert entry.sample_shape() == (64,)
    x = entry.example_input(3)
    model = entry.build()
    assert torch.allclose(model(x), _mlp()(x), atol=1e-5)
    with FlopCounterMode(display=False) as counter:
        _mlp()(x)
    assert onnx_flops(path, (3, 64)) == counter.get_total_flops() == 2 * 3 * (64 * 128 + 128 * 4)
    assert onnx_activation_bytes(path, (3, 64)) >= 3 * 128 * 4  # the hidden layer at least


@pytest.mark.slow  # ~2 s on 2 cores: kept out of make test-fast
def test_onnx_token_model_finds_its_vocabulary(files: dict[str, Path]) -> None:
    entry = resolve_model(str(files["tok"].with_suffix(".onnx")))
    assert entry.kind == "tokens" and entry.input_vocab(False) == 300 and entry.sample_shape() == (8,)
    x = entry.example_input(4)
    assert x.dtype == torch.int64 and int(x.max()) < 300
    assert entry.build()(x).shape == (4, 3)


def test_onnx_precision_int8_quantizes_and_bf16_is_refused(files: dict[str, Path]) -> None:
    entry = resolve_model(str(files["mlp"].with_suffix(".onnx")))
    x = entry.example_input(2)
    model = prepare_inference(entry.build(), "int8")
    assert model.inner.precision == "int8"
    assert torch.allclose(model(x), _mlp()(x), atol=0.1)  # int8 weights: close, not equal
    with pytest.raises(UnsupportedError, match="fp32 and int8"):
        prepare_inference(entry.build(), "bf16")


@pytest.mark.parametrize(("name", "kind", "lm"), [("bert", "tokens", False), ("gpt", "tokens", True)])
def test_hf_config_directory(files: dict[str, Path], name: str, kind: str, lm: bool) -> None:
    entry = resolve_model(f"hf:{files[name]}")
    assert (entry.kind, entry.lm) == (kind, lm)
    assert entry.default_seq_len == 64  # capped by the config's positions
    x = entry.example_input(2, seq_len=16)
    assert int(x.max()) < (500 if name == "bert" else 400)
    logits = entry.build()(x)
    assert logits.shape == ((2, 3) if name == "bert" else (2, 16, 400))
    assert resolve_model(str(files[name])).kind == kind  # a bare directory works too


def test_hf_model_type_builds_the_default_config() -> None:
    entry = resolve_model("hf:vit")
    assert entry.kind == "image" and entry.default_image_size == 224 and entry.family == "cnn"


@pytest.mark.parametrize(
    ("ref", "error", "match"),
    [
        (
            "hf:bert-base-uncased",
            NotFoundError,
            r"`hf download bert-base-uncased config\.json --local-dir DIR`; "
            r"huggingface_hub < 1\.0: huggingface-cli download\)",
        ),
        ("bert-base-uncased", NotFoundError, "hf:MODEL_TYPE"),
        ("missing.onnx", NotFoundError, "no file 'missing.onnx'"),
        ("missing.pt", NotFoundError, "no file"),
        ("nosuchmodule_xyz:make", NotFoundError, "cannot import module"),
        # not dotted names then a name: refused before import (were ValueError / TypeError tracebacks)
        (":", SpecError, r"':' is not package\.module:factory"),
        (":make", SpecError, "is not package.module:factory"),
        (".:f", SpecError, "is not package.module:factory"),
        ("json:", SpecError, "is not package.module:factory"),
        ("a.b:c:d", SpecError, "is not package.module:factory"),
    ],
)
def test_bad_refs_name_the_fix(ref: str, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        resolve_model(ref, [4])


def test_broken_files_are_one_line_errors(files: dict[str, Path]) -> None:
    with pytest.raises(SpecError, match=r"not a TorchScript archive.*torch\.jit\.save"):
        resolve_model(str(files["notjit"].with_suffix(".pt")), [4])
    # without a shape too: what is wrong is the file, not the missing input.shape
    with pytest.raises(SpecError, match=r"not a TorchScript archive \(PytorchStreamReader failed .*\); save one"):
        resolve_model(str(files["notjit"].with_suffix(".pt")))
    with pytest.raises(SpecError, match="not valid JSON"):
        resolve_model(f"hf:{files['bad']}")
    junk = files["dir"] / "junk.onnx"
    junk.write_bytes(b"\x00\x01junk")
    with pytest.raises(SpecError, match="not an ONNX model"):
        resolve_model(str(junk))


def test_factory_with_token_inputs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "mymodels.py").write_text(
        textwrap.dedent("""
        from torch import nn
        def make():
            return nn.Sequential(nn.Embedding(50, 8), nn.Flatten(), nn.Linear(8 * 6, 2))
        def not_a_model():
            return 3
    """)
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    entry = resolve_model("mymodels:make", [6], vocab=50)
    x = entry.example_input(3)
    assert x.dtype == torch.int64 and int(x.max()) < 50
    assert entry.build()(x).shape == (3, 2)
    with pytest.raises(SpecError, match=r"input\.shape"):
        resolve_model("mymodels:make")
    with pytest.raises(SpecError, match=r"not a torch\.nn\.Module"):
        resolve_model("mymodels:not_a_model", [6]).build()


@pytest.mark.slow
def test_each_format_through_bench_and_memory_cli(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The user's path: a spec naming the file, `rightsize bench`, then `rightsize memory` on it (in this process:
    scripts/first_hour.sh runs the same path as its own commands, from the wheel)."""
    refs = {
        "onnx": (str(files["mlp"].with_suffix(".onnx")), "input: {shape: [64]}"),
        "torchscript": (str(files["mlp"].with_suffix(".pt")), "input: {shape: [64]}"),
        "export": (str(files["mlpx"]), "input: {shape: [64]}"),
        "hf": (f"hf:{files['bert']}", "input: {seq_len: 16}"),
    }
    for fmt, (ref, inp) in refs.items():
        spec = tmp_path / f"{fmt}.yaml"
        spec.write_text(f"name: {fmt}\nmodel: '{ref}'\n{inp}\nbatch_sizes: [1, 4]\ntiming: {{max_time_s: 0.5}}\n")
        code, out, err = run_cli(["bench", str(spec), "--json", "--store", str(tmp_path / "s.db")], capsys)
        assert code == 0, err[-800:]
        rows = json.loads(out)
        rows = rows if isinstance(rows, list) else rows["measurements"]
        assert {r["status"] for r in rows} == {"ok"}, fmt
        assert all(r["flops_per_sample"] > 0 for r in rows), fmt
        assert all(r["param_bytes"] > 0 for r in rows), fmt
        shape = ["--shape", "64"] if fmt != "hf" else ["--seq", "16"]
        code, out, err = run_cli(["memory", ref, "--device", "cpu", "--json", "--batch", "4", *shape], capsys)
        assert code == 0, err[-800:]
        est = json.loads(out)
        weights = est["breakdown"]["weights"] if "weights" in est["breakdown"] else est["breakdown"]
        assert est["param_count"] > 0 and weights, fmt


@pytest.mark.slow  # several seconds: make test runs it, make test-fast skips it
def test_ort_prefix_exports_a_zoo_model_once_and_matches_pytorch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RIGHTSIZE_ONNX_CACHE", str(tmp_path))
    entry = resolve_model("ort:distilbert")
    base = resolve_model("distilbert")
    assert entry.kind == "tokens" and entry.sample_shape(seq_len=24, tiny=True) == base.sample_shape(24, tiny=True)
    model = entry.build(tiny=True)
    assert len(list(tmp_path.glob("*.onnx"))) == 1
    entry.build(tiny=True)  # the second build opens the cached file
    assert len(list(tmp_path.glob("*.onnx"))) == 1
    torch.manual_seed(0)
    reference = base.build(tiny=True)
    for batch, seq in ((1, 8), (3, 16)):  # dynamic batch and sequence dims
        x = base.example_input(batch, seq_len=seq, tiny=True)
        assert torch.allclose(model(x), reference(x), atol=1e-4)
    with pytest.raises(SpecError, match="already ONNX"):
        resolve_model("ort:model.onnx")


@pytest.mark.slow  # ~2 s: in `make test`, not `make test-fast`
def test_openvino_engine_matches_pytorch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, files: dict[str, Path]
) -> None:
    pytest.importorskip("openvino")
    monkeypatch.setenv("RIGHTSIZE_ONNX_CACHE", str(tmp_path))
    entry = resolve_model("ov:distilbert")
    model = entry.build(tiny=True)
    torch.manual_seed(0)
    base = resolve_model("distilbert")
    reference = base.build(tiny=True)
    x = base.example_input(3, seq_len=12, tiny=True)
    assert torch.allclose(model(x), reference(x), atol=1e-4)
    with pytest.raises(UnsupportedError, match="fp32"):
        prepare_inference(model, "int8")
    onnx_file = resolve_model(f"ov:{files['mlp'].with_suffix('.onnx')}")  # a user's .onnx on OpenVINO
    xs = onnx_file.example_input(2)
    assert torch.allclose(onnx_file.build()(xs), _mlp()(xs), atol=1e-5)


def test_a_factory_module_that_fails_to_import_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "broken_user_mod.py").write_text("raise RuntimeError('boom')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(SpecError, match=r"importing 'broken_user_mod' raised RuntimeError: 'boom'; fix that module"):
        resolve_model("broken_user_mod:make", [4])


def test_a_factory_that_fails_prints_or_exits_is_named_and_keeps_stdout_clean(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "noisy_user_mod.py").write_text(
        textwrap.dedent("""
        import sys
        from torch import nn
        print("importing")
        def chatty():
            print("building")
            return nn.Linear(4, 2)
        def boom():
            raise ValueError("factory exploded")
        def quits():
            sys.exit(0)
    """)
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert resolve_model("noisy_user_mod:chatty", [4]).build()(torch.randn(1, 4)).shape == (1, 2)
    out, err = capsys.readouterr()
    assert out == "" and "importing" in err and "building" in err  # stdout holds a --json document only
    with pytest.raises(SpecError, match=r"^model: noisy_user_mod:boom\(\) raised ValueError: 'factory exploded'"):
        resolve_model("noisy_user_mod:boom", [4]).build()  # memory said 'cannot run this input ... use a size'
    with pytest.raises(SpecError, match=r"called sys\.exit\(0\); a factory must return"):
        resolve_model("noisy_user_mod:quits", [4]).build()  # rightsize ended silently, exit 0
    with pytest.raises(SpecError, match=r"^--shape: required for noisy_user_mod:chatty: .*--vocab N"):
        user_input_options("noisy_user_mod:chatty", None, None)  # the CLI's words, not the spec's input.shape
    assert user_input_options("ort:distilbert", None, None) == (None, None)  # an ONNX graph says what it takes


def test_tuple_and_dict_outputs_give_one_tensor_and_two_inputs_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`memory` and `serve` raised a traceback on a model returning (logits, aux) or {"logits": ...}; a forward of
    two inputs failed every config with "missing 1 required positional argument"."""
    from rightsize.models.zoo import main_output

    (tmp_path / "outmodels.py").write_text(
        textwrap.dedent("""
        from torch import nn
        class Out(nn.Module):
            def __init__(self, how):
                super().__init__()
                self.l, self.how = nn.Linear(4, 3), how
            def forward(self, x):
                y = self.l(x)
                return (y, y.sum(-1)) if self.how == "tuple" else {"score": y.sum(-1), "logits": y}
        class Two(nn.Module):
            def forward(self, x, mask):
                return x * mask
        def tup():
            return Out("tuple")
        def dic():
            return Out("dict")
        def two():
            return Two()
    """)
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    for ref in ("outmodels:tup", "outmodels:dic"):
        entry = resolve_model(ref, [4])
        out = entry.build()(entry.example_input(2))
        assert isinstance(out, torch.Tensor) and out.shape == (2, 3)  # the logits, not the (2,) score
    with pytest.raises(SpecError, match=r"^model: outmodels:two\(\)'s forward takes 2 inputs \(x, mask\); .*wrap it"):
        resolve_model("outmodels:two", [4]).build()
    import outmodels  # type: ignore[import-not-found]

    scripted = tmp_path / "two.pt"  # a loaded TorchScript module's Python signature is (*args): its schema is read
    torch.jit.script(outmodels.two()).save(str(scripted))
    with pytest.raises(SpecError, match=r"forward takes 2 inputs \(x, mask\)"):
        resolve_model(str(scripted), [4]).build()
    t = torch.ones(2)
    assert main_output(([t, 1], None)) is t and main_output({"a": None, "b": (t,)}) is t
    with pytest.raises(SpecError, match=r"^model: its forward returned a tuple holding no tensor"):
        main_output((1, "x"))
    import dataclasses

    @dataclasses.dataclass
    class Out:
        loss: None
        logits: torch.Tensor

    assert main_output(Out(None, t)) is t  # a dataclass output had been "returned a Out holding no tensor"


def test_a_factory_module_in_the_working_directory_gets_the_pythonpath_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The `rightsize` command does not import from the working directory: "check PYTHONPATH" named no folder."""

    from rightsize.errors import NotFoundError

    (tmp_path / "cwdonlymod.py").write_text("def make():\n    return None\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", ".", str(tmp_path))])
    with pytest.raises(NotFoundError, match=rf"cannot import module 'cwdonlymod' .*; it is in {tmp_path}: run with "
                       rf"PYTHONPATH={tmp_path}$"):  # fmt: skip
        resolve_model("cwdonlymod:make", [4])
    with pytest.raises(NotFoundError, match=r"cannot import module 'nosuchmod_xyz' .*; check PYTHONPATH$"):
        resolve_model("nosuchmod_xyz:make", [4])


def test_a_forward_rightsize_cannot_call_or_read_is_refused_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A forward returning a float or None, one taking its input by keyword only, and a .pt2 exported for one batch
    size each raised a traceback (memory: 'float' has no attribute 'untyped_storage'; a 147-line guard failure)."""
    (tmp_path / "oddmodels.py").write_text(
        textwrap.dedent("""
        from torch import nn
        class Scalar(nn.Module):
            def __init__(self, what):
                super().__init__()
                self.l, self.what = nn.Linear(4, 3), what
            def forward(self, x):
                return float(self.l(x).sum()) if self.what == "float" else None
        class Kw(nn.Module):
            def __init__(self):
                super().__init__()
                self.l = nn.Linear(4, 3)
            def forward(self, *, x):
                return self.l(x)
        def scalar():
            return Scalar("float")
        def nothing():
            return Scalar("none")
        def kw():
            return Kw()
    """)
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    for ref, kind in (("oddmodels:scalar", "float"), ("oddmodels:nothing", "NoneType")):
        entry = resolve_model(ref, [4])
        with pytest.raises(SpecError, match=rf"^model: its forward returned a {kind} holding no tensor"):
            entry.build()(entry.example_input(2))
    with pytest.raises(SpecError, match=r"^model: oddmodels:kw\(\)'s forward takes x by keyword only; .*wrap it"):
        resolve_model("oddmodels:kw", [4]).build()
    fixed = tmp_path / "fixed.pt2"
    torch.export.save(torch.export.export(nn.Linear(4, 3), (torch.ones(2, 4),)), str(fixed))
    with pytest.raises(SpecError, match=r"^model: .*fixed\.pt2 was exported for batch 2 only; re-export it with a "
                       r"dynamic batch"):  # fmt: skip
        resolve_model(str(fixed), [4])


def test_a_factory_edited_in_a_running_process_is_imported_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In a notebook the first import stayed: the edited factory's new checksum keyed the old model's memory."""
    src = tmp_path / "livemodels.py"
    src.write_text("from torch import nn\ndef make():\n    return nn.Linear(4, 3)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert resolve_model("livemodels:make", [4]).build()(torch.ones(1, 4)).shape == (1, 3)
    src.write_text("from torch import nn\ndef make():\n    return nn.Linear(4, 7)\n")  # same size, same second
    assert resolve_model("livemodels:make", [4]).build()(torch.ones(1, 4)).shape == (1, 7)


def test_a_missing_local_config_folder_is_not_offered_as_a_hub_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`hf:./bert-base-uncased` (README's example, before fetching it) suggested `huggingface-cli download
    ./bert-base-uncased`, which is no hub id."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(NotFoundError, match=r"no folder 'bert-base-uncased' holding config\.json here\. .*"
                       r"`hf download ORG/MODEL config\.json --local-dir './bert-base-uncased'`, "
                       r"e\.g\. google-bert/bert-base-uncased; "
                       r"huggingface_hub < 1\.0: huggingface-cli download\)"):  # fmt: skip
        resolve_model("hf:./bert-base-uncased")


def test_a_factory_module_missing_a_dependency_names_the_dependency(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The module was found and one of its imports was not: 'cannot import module ...; check PYTHONPATH' sent the
    user to the wrong place."""
    from rightsize.errors import NotFoundError

    (tmp_path / "needs_dep_mod.py").write_text("import not_a_real_module_xyz\n\n\ndef make():\n    return None\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(NotFoundError, match=r"^model: module 'needs_dep_mod' imports 'not_a_real_module_xyz', which "
                       r"is not installed here; install it where rightsize runs"):  # fmt: skip
        resolve_model("needs_dep_mod:make", [4])


def test_int8_weights_take_seven_bits_on_an_x86_cpu_without_vnni() -> None:
    """ONNX Runtime's u8 x s8 products saturate on AVX2 without VNNI: a token model's int8 logits were 0.11-0.15 off
    (the serve test's atol 0.1 failed on a Zen 4 VM hiding AVX-512); 7-bit weights there, 8 elsewhere."""
    from rightsize.models.onnx_engine import reduce_range_here

    assert reduce_range_here("processor\t: 0\nflags\t\t: fpu sse avx avx2 fma\n")
    for vnni in ("avx512f avx512_vnni", "avx2 avx_vnni", "avx512f amx_tile amx_int8"):
        assert not reduce_range_here(f"flags\t\t: fpu avx2 {vnni}\n")
    assert not reduce_range_here("processor\t: 0\nFeatures\t: fp asimd asimddp\n")  # arm: no x86 flags line
