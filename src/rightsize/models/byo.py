"""Bring your own model: a Hugging Face config, a TorchScript file, an ONNX file or a Python factory.

    ref                         what it builds                              input
    hf:PATH | PATH/ (config.json) transformers model from the config, random weights   from the config
    hf:MODEL_TYPE (hf:roberta)  that type's default config                  from the config
    model.onnx                  an ONNX Runtime session (CPU)               read from the graph
    model.pt | .ts | .torchscript  torch.jit.load                           input.shape / input.dtype
    model.pt2                   torch.export.load(...).module()             input.shape / input.dtype
    ort:REF (ort:distilbert)    REF exported to ONNX once (cached), run on ONNX Runtime   as REF
    package.module:factory      factory() -> nn.Module                      input.shape / input.dtype

Every ref becomes a ``ZooEntry`` (the same record the zoo uses), so memory, bench, plan and serve
treat a user's model like a zoo one. Nothing is downloaded: a hub name gets an error saying how to
fetch its config.json once. ONNX models run on ONNX Runtime; its graph gives the FLOPs (MatMul, Gemm,
Conv) that the projection needs, since PyTorch's FLOP counter cannot see inside the session.
"""

from __future__ import annotations

import importlib
import json
import math
import threading
import types
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rightsize.errors import NotFoundError, SpecError, UnsupportedError, did_you_mean
from rightsize.models.zoo import Family, InputKind, ZooEntry

if TYPE_CHECKING:
    from torch import nn

TORCHSCRIPT_SUFFIXES = (".pt", ".pth", ".ts", ".torchscript", ".jit")
DEFAULT_VOCAB = 1000  # token ids are drawn below this when neither the model nor the spec says


@dataclass(frozen=True)
class UserEntry(ZooEntry):
    """A user's model. ``user_shape`` fixes one sample's shape; empty means the zoo rules (seq_len, image_size)."""

    user_shape: tuple[int, ...] = ()
    fmt: str = "factory"  # factory | torchscript | onnx | hf

    def sample_shape(
        self, seq_len: int | None = None, image_size: int | None = None, tiny: bool = False
    ) -> tuple[int, ...]:
        if self.user_shape:
            return self.user_shape
        if self.kind == "image":
            size = image_size or self.default_image_size
            return (3, size, size)
        return (seq_len or self.default_seq_len,)

    def input_vocab(self, tiny: bool) -> int:
        return self.vocab_size  # a user's model has one size: tiny changes nothing

    def count_params(self, tiny: bool = False) -> int:
        if self.fmt in ("onnx", "torchscript", "export"):  # no meta-device build: count the loaded weights
            model = self.builder(tiny)
            return int(sum(p.numel() for p in model.parameters())) + int(getattr(model, "initializer_count", 0))
        return super().count_params(tiny)


def parse_shape(text: str | None, option: str = "--shape") -> list[int] | None:
    """``"3,224,224"`` (or ``3x224x224``) -> [3, 224, 224]; a SpecError naming ``option`` otherwise."""
    if not text:
        return None
    try:
        dims = [int(s) for s in text.replace("x", ",").split(",") if s.strip()]
    except ValueError:
        raise SpecError(option, f"must be comma-separated integers like 3,224,224, got {text!r}") from None
    if not dims or any(not 1 <= d <= 1_000_000 for d in dims) or len(dims) > 8:
        raise SpecError(option, f"needs 1-8 dimensions, each 1..1000000, got {text!r}")
    return dims


ORT_PREFIX = "ort:"  # the same model on ONNX Runtime: the CPU engine the planner compares with PyTorch eager
OV_PREFIX = "ov:"  # the same model on OpenVINO (exported to ONNX, compiled for the CPU)
ENGINE_PREFIX = {"onnxruntime": ORT_PREFIX, "openvino": OV_PREFIX}


def engine_ref(ref: str, engine: str) -> str:
    """The model ref that runs ``ref`` on ``engine`` ("torch": ``ref`` itself; "onnxruntime": ``ort:ref``)."""
    if engine == "torch" or ref.startswith((ORT_PREFIX, OV_PREFIX)):
        return ref
    if ref.endswith(".onnx"):
        return ref if engine == "onnxruntime" else OV_PREFIX + ref
    return ENGINE_PREFIX[engine] + ref


def engine_of(ref: str) -> str:
    if ref.startswith(OV_PREFIX):
        return "openvino"
    return "onnxruntime" if ref.startswith(ORT_PREFIX) or ref.endswith(".onnx") else "torch"


def is_user_ref(ref: str) -> bool:
    """Whether ``ref`` names a user's model (anything but a zoo name)."""
    return ":" in ref or ref.endswith((".onnx", ".pt2", *TORCHSCRIPT_SUFFIXES)) or _config_dir(ref) is not None


def resolve_user(ref: str, shape: list[int] | None = None, vocab: int | None = None) -> ZooEntry:
    """The entry for a user's model ref (see the module docstring); ``vocab`` set means token-id inputs."""
    if ref.startswith((ORT_PREFIX, OV_PREFIX)):
        return _engine_entry(ref, shape, vocab)
    if ref.startswith("hf:") or _config_dir(ref) is not None:
        return _hf_entry(ref)
    if ref.endswith(".onnx"):
        return _onnx_entry(ref, shape, vocab)
    if ref.endswith(TORCHSCRIPT_SUFFIXES):
        return _torchscript_entry(ref, shape, vocab)
    if ref.endswith(".pt2"):
        return _exported_entry(ref, shape, vocab)
    return _factory_entry(ref, shape, vocab)


def _config_dir(ref: str) -> Path | None:
    path = Path(ref[3:] if ref.startswith("hf:") else ref)
    try:
        return path if path.is_dir() and (path / "config.json").is_file() else None
    except OSError:
        return None


def _float_or_tokens(ref: str, shape: list[int] | None, vocab: int | None) -> dict[str, Any]:
    """Entry fields for a model whose input the spec describes: float [shape] or token ids below ``vocab``."""
    if vocab is not None:
        seq = tuple(shape) if shape else ()
        return {"kind": "tokens", "vocab_size": vocab, "user_shape": seq, "features": seq[0] if seq else 1}
    if not shape:
        raise SpecError(
            "input.shape",
            f"required for {ref}: give the per-sample input shape, e.g. [3, 224, 224], or input.dtype: int64 "
            "for token ids",
        )
    return {"kind": "features", "user_shape": tuple(shape), "features": shape[0]}


def _check_module(ref: str, model: Any) -> nn.Module:
    from torch import nn as torch_nn

    if not isinstance(model, torch_nn.Module):
        raise SpecError("model", f"{ref} returned {type(model).__name__}, not a torch.nn.Module; point it at a model")
    return model


# --- package.module:factory ----------------------------------------------------------------------


def _factory_entry(ref: str, shape: list[int] | None, vocab: int | None) -> UserEntry:
    module_name, _, attr = ref.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise NotFoundError(f"model: cannot import module {module_name!r} ({exc}); check PYTHONPATH") from None
    factory = getattr(module, attr, None)
    if not callable(factory):
        raise NotFoundError(f"model: {module_name!r} has no callable {attr!r}")

    def build(tiny: bool) -> nn.Module:
        return _check_module(f"{ref}()", factory())

    return UserEntry(ref, "user", description=f"user model {ref}", builder=build, hf=False,
                     **_float_or_tokens(ref, shape, vocab))  # fmt: skip


# --- TorchScript ---------------------------------------------------------------------------------


def _torchscript_entry(ref: str, shape: list[int] | None, vocab: int | None) -> UserEntry:
    path = _existing_file(ref)
    fields = _float_or_tokens(ref, shape, vocab)

    def build(tiny: bool) -> nn.Module:
        import torch

        try:
            return _check_module(ref, torch.jit.load(str(path), map_location="cpu"))
        except RuntimeError as exc:
            first = str(exc).strip().splitlines()[0][:120] if str(exc).strip() else type(exc).__name__
            raise SpecError(
                "model", f"{ref} is not a TorchScript archive ({first}); save one with "
                "torch.jit.save(torch.jit.trace(model, example), path)"
            ) from None  # fmt: skip

    build(False)  # fail now, before any sweep, on a file that is not TorchScript
    return UserEntry(ref, "user", description=f"TorchScript {path.name}", builder=build, hf=False, fmt="torchscript",
                     **fields)  # fmt: skip


def _exported_entry(ref: str, shape: list[int] | None, vocab: int | None) -> UserEntry:
    """A ``torch.export`` program (``torch.export.save``), TorchScript's successor in PyTorch 2.x."""
    path = _existing_file(ref)
    fields = _float_or_tokens(ref, shape, vocab)

    def build(tiny: bool) -> nn.Module:
        import torch

        try:
            module = _check_module(ref, torch.export.load(str(path)).module())
        except (RuntimeError, ValueError, KeyError, OSError) as exc:
            raise SpecError(
                "model", f"{ref} is not a torch.export archive ({type(exc).__name__}); save one with "
                "torch.export.save(torch.export.export(model, (example,)), path)"
            ) from None  # fmt: skip
        # An exported program is traced in one mode and refuses train()/eval(); the wrapper's eval() reaches it.
        module.train = types.MethodType(lambda self, mode=True: self, module)  # type: ignore[method-assign]
        return module

    build(False)
    return UserEntry(ref, "user", description=f"torch.export {path.name}", builder=build, hf=False, fmt="export",
                     **fields)  # fmt: skip


def _existing_file(ref: str) -> Path:
    path = Path(ref)
    if not path.is_file():
        raise NotFoundError(f"model: no file {ref!r}; give the path of your .onnx or TorchScript (.pt) file")
    return path


# --- Hugging Face config ---------------------------------------------------------------------------


def _hf_config(ref: str) -> Any:
    from transformers import CONFIG_MAPPING, AutoConfig

    from rightsize.inputfile import read_user_text

    directory = _config_dir(ref)
    if directory is not None:
        field = f"{directory / 'config.json'}"
        try:
            data = json.loads(read_user_text(directory / "config.json", field))
        except json.JSONDecodeError as exc:
            raise SpecError(field, f"is not valid JSON ({exc.msg} at line {exc.lineno})") from None
        if not isinstance(data, dict) or not isinstance(data.get("model_type"), str):
            raise SpecError(field, 'needs a "model_type" (e.g. "bert"), as every transformers config.json has')
        model_type = data.pop("model_type")
        if model_type not in CONFIG_MAPPING:
            raise SpecError(f"{field}: model_type", f"{model_type!r} is not known to this transformers version"
                            f"{did_you_mean(model_type, CONFIG_MAPPING.keys())}")  # fmt: skip
        try:
            return AutoConfig.for_model(model_type, **data)
        except (TypeError, ValueError) as exc:
            raise SpecError(field, f"transformers refused it: {str(exc)[:160]}") from None
    name = ref[3:] if ref.startswith("hf:") else ref
    if name in CONFIG_MAPPING:
        return CONFIG_MAPPING[name]()
    raise NotFoundError(
        f"model: {ref!r} is neither a directory holding config.json nor a transformers model type"
        f"{did_you_mean(name, CONFIG_MAPPING.keys())}. rightsize never downloads: fetch a hub model's config once "
        f"(`huggingface-cli download {name} config.json --local-dir DIR`) and pass hf:DIR, or pass a type like hf:bert"
    )


def _hf_entry(ref: str) -> UserEntry:
    from transformers.models.auto import modeling_auto as auto

    cfg = _hf_config(ref)
    model_type = cfg.model_type
    masked_lm = auto.MODEL_FOR_MASKED_LM_MAPPING_NAMES  # encoders (BERT) also have causal-LM heads
    family: Family
    kind: InputKind
    factory: Any
    if model_type in auto.MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES:
        family, kind, lm, factory = "cnn", "image", False, auto.AutoModelForImageClassification
    elif model_type in auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES and model_type not in masked_lm:
        family, kind, lm, factory = "decoder", "tokens", True, auto.AutoModelForCausalLM
    elif model_type in auto.MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES:
        family, kind, lm, factory = "encoder", "tokens", False, auto.AutoModelForSequenceClassification
    else:
        raise UnsupportedError(
            f"model: {ref} is a {model_type!r} model; rightsize builds image classifiers, sequence classifiers and "
            "causal LMs from configs. Wrap other heads in a package.module:factory"
        )
    image = getattr(cfg, "image_size", 224)
    max_pos = getattr(cfg, "max_position_embeddings", None) or 512

    def build(tiny: bool) -> nn.Module:
        return factory.from_config(cfg)

    return UserEntry(
        ref, family, kind, f"{cfg.__class__.__name__} from {ref}", build, hf=True, lm=lm, fmt="hf",
        classes=int(getattr(cfg, "num_labels", 2)), vocab_size=int(getattr(cfg, "vocab_size", 0) or DEFAULT_VOCAB),
        default_seq_len=min(128, int(max_pos)), default_image_size=int(image if isinstance(image, int) else image[0]),
    )  # fmt: skip


# --- ONNX ------------------------------------------------------------------------------------------


def _onnx_entry(ref: str, shape: list[int] | None, vocab: int | None) -> UserEntry:
    path = _existing_file(ref)
    info = onnx_input(path)
    if info.tokens:
        fields: dict[str, Any] = {"kind": "tokens", "vocab_size": vocab or info.vocab or DEFAULT_VOCAB}
        fixed = info.fixed_shape()
        fields["user_shape"] = tuple(shape) if shape else (fixed or ())
    else:
        fixed = info.fixed_shape()
        if not shape and fixed is None:
            raise SpecError("input.shape", f"{ref} has symbolic input dims {info.dims[1:]}; give the per-sample shape")
        fields = {"kind": "features", "user_shape": tuple(shape) if shape else fixed}
    fields["features"] = fields["user_shape"][0] if fields["user_shape"] else 1

    def build(tiny: bool) -> nn.Module:
        return OrtModule.load(path)

    return UserEntry(ref, "user", description=f"ONNX {path.name} (ONNX Runtime)", builder=build, hf=False, fmt="onnx",
                     **fields)  # fmt: skip


@dataclass(frozen=True)
class EngineEntry(ZooEntry):
    """``base`` (any PyTorch model ref) exported to ONNX and run on ONNX Runtime; inputs exactly as ``base``."""

    base: Any = None

    def sample_shape(
        self, seq_len: int | None = None, image_size: int | None = None, tiny: bool = False
    ) -> tuple[int, ...]:
        return tuple(self.base.sample_shape(seq_len, image_size, tiny))

    def input_vocab(self, tiny: bool) -> int:
        return int(self.base.input_vocab(tiny))

    def example_labels(self, x: Any, tiny: bool = False, seed: int = 1) -> Any:
        return self.base.example_labels(x, tiny, seed)

    def count_params(self, tiny: bool = False) -> int:
        return int(self.base.count_params(tiny))


def _engine_entry(ref: str, shape: list[int] | None, vocab: int | None) -> EngineEntry:
    from rightsize.models.zoo import resolve_model

    engine = "openvino" if ref.startswith(OV_PREFIX) else "onnxruntime"
    inner = ref.split(":", 1)[1]
    if inner.endswith(".onnx"):
        if engine == "onnxruntime":
            raise SpecError("model", f"{ref}: the model is already ONNX; drop the {ORT_PREFIX} prefix")
        base: ZooEntry = _onnx_entry(inner, shape, vocab)
        path = Path(inner)

        def build(tiny: bool) -> nn.Module:
            return OrtModule.load(path, engine)

    else:
        base = resolve_model(inner, shape, vocab)
        if base.meta_only:
            raise UnsupportedError(f"model: {base.name} is too big to build here, so it cannot be exported to ONNX")

        def build(tiny: bool) -> nn.Module:
            return OrtModule.load(exported_onnx(base, tiny), engine)

    label = "OpenVINO" if engine == "openvino" else "ONNX Runtime"
    return EngineEntry(ref, base.family, base.kind, f"{base.description} on {label}", build, hf=False,
                       lm=base.lm, classes=base.classes, vocab_size=base.vocab_size, features=base.features,
                       default_seq_len=base.default_seq_len, default_image_size=base.default_image_size,
                       base=base)  # fmt: skip


def _onnx_cache() -> Path:
    import os

    import platformdirs

    return Path(os.environ.get("RIGHTSIZE_ONNX_CACHE") or Path(platformdirs.user_cache_dir("rightsize")) / "onnx")


def quantized_onnx(path: Path) -> Path:
    """``path`` with its MatMul/Gemm weights quantized to int8 (ONNX Runtime dynamic quantization), cached by
    the source file's path, size and modification time."""
    import hashlib
    import logging
    import os
    import tempfile

    from onnxruntime.quantization import QuantType, quantize_dynamic

    st = path.stat()
    key = f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}"
    cache = _onnx_cache()
    out = cache / f"{hashlib.sha1(key.encode()).hexdigest()[:16]}-int8.onnx"
    if out.is_file():
        return out
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        logging.disable(logging.WARNING)  # "consider pre-processing": advice for static quantization
        try:
            quantize_dynamic(str(path), str(Path(tmp) / "q.onnx"), weight_type=QuantType.QInt8)
        finally:
            logging.disable(logging.NOTSET)
        os.replace(Path(tmp) / "q.onnx", out)
    return out


def exported_onnx(entry: ZooEntry, tiny: bool) -> Path:
    """``entry``'s model exported to ONNX with dynamic batch (and sequence) dims, cached by ref, size and
    versions: the export takes seconds to a minute, every later build is a file open."""
    import hashlib
    import os
    import tempfile
    import warnings

    import torch

    key = f"{entry.name}|tiny={tiny}|{entry.sample_shape(tiny=tiny)}|torch={torch.__version__}"
    cache = _onnx_cache()
    path = cache / f"{hashlib.sha1(key.encode()).hexdigest()[:16]}.onnx"
    if path.is_file():
        return path
    cache.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    model = entry.build(tiny).eval()
    x = entry.example_input(2, tiny=tiny)
    dims: dict[int, Any] = {0: torch.export.Dim("batch", max=65536)}
    if entry.kind == "tokens" and not getattr(entry, "user_shape", ()):
        dims[1] = torch.export.Dim("seq", max=max(2, min(entry.default_seq_len * 64, 8192)))
    import logging

    quiet = logging.getLogger("torch.onnx")  # "torchvision is not installed. Skipping torchvision::nms" x4
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    with tempfile.TemporaryDirectory(dir=cache) as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = Path(tmp) / "model.onnx"
        try:
            torch.onnx.export(model, (x,), str(out), dynamo=True, dynamic_shapes=(dims,), external_data=False,
                              verbose=False)  # fmt: skip
        except Exception as exc:  # the exporter raises many types; the user needs one line
            raise UnsupportedError(
                f"model: {entry.name} could not be exported to ONNX ({type(exc).__name__}: {str(exc)[:120]})"
            ) from None
        os.replace(out, path)  # atomic: a concurrent export of the same model writes the same bytes
    quiet.setLevel(level)
    return path


@dataclass(frozen=True)
class OnnxInput:
    name: str
    tokens: bool
    dims: tuple[int | str, ...]  # ints fixed, strings symbolic
    vocab: int | None  # rows of the embedding table the ids index, when the graph shows it

    def fixed_shape(self) -> tuple[int, ...] | None:
        rest = self.dims[1:]
        return tuple(int(d) for d in rest) if all(isinstance(d, int) and d > 0 for d in rest) else None


def _onnx_model(path: Path) -> Any:
    try:
        import onnx
    except ImportError:
        raise UnsupportedError("model: an .onnx model needs the onnx extra: pip install 'rightsize[onnx]'") from None
    try:
        return onnx.load(str(path), load_external_data=False)
    except Exception as exc:  # a damaged or foreign file: onnx raises several types
        raise SpecError(
            "model", f"{path} is not an ONNX model ({type(exc).__name__}); export one with torch.onnx.export"
        ) from None


def onnx_input(path: Path) -> OnnxInput:
    """The graph's first real input: its element type, dims and (for token ids) the embedding's vocabulary."""
    import onnx

    model = _onnx_model(path)
    graph = model.graph
    inits = {i.name: i for i in graph.initializer}
    inputs = [i for i in graph.input if i.name not in inits]
    if not inputs:
        raise SpecError("model", f"{path} has no graph inputs")
    first = inputs[0]
    elem = first.type.tensor_type.elem_type
    shape = first.type.tensor_type.shape.dim
    dims = tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or "?") for d in shape)
    tokens = elem in (onnx.TensorProto.INT64, onnx.TensorProto.INT32)
    vocab = None
    if tokens:  # the Gather that looks the ids up in an embedding table gives the vocabulary
        for node in graph.node:
            ids_lookup = len(node.input) > 1 and node.input[1] == first.name and node.input[0] in inits
            if node.op_type == "Gather" and ids_lookup:
                vocab = int(inits[node.input[0]].dims[0])
                break
    return OnnxInput(first.name, tokens, dims, vocab)


def _inferred_shapes(path: Path, batch_shape: tuple[int, ...]) -> tuple[Any, dict[str, tuple[int, ...]]]:
    """The graph with its first input fixed to ``batch_shape``, and every tensor shape ONNX can infer."""
    from onnx import shape_inference

    model = _onnx_model(path)
    inits = {i.name for i in model.graph.initializer}
    first = next(i for i in model.graph.input if i.name not in inits)
    for d, size in zip(first.type.tensor_type.shape.dim, batch_shape, strict=False):
        d.ClearField("dim_param")
        d.dim_value = size
    try:
        inferred = shape_inference.infer_shapes(model, data_prop=True)
    except Exception:  # shape inference cannot follow some graphs: fewer shapes rather than a crash
        inferred = model
    shapes: dict[str, tuple[int, ...]] = {}
    for vi in [*inferred.graph.value_info, *inferred.graph.input, *inferred.graph.output]:
        dims = vi.type.tensor_type.shape.dim
        if all(d.HasField("dim_value") for d in dims):
            shapes[vi.name] = tuple(d.dim_value for d in dims)
    for init in inferred.graph.initializer:
        shapes[init.name] = tuple(init.dims)
    return inferred.graph, shapes


def onnx_flops(path: Path, batch_shape: tuple[int, ...]) -> float:
    """FLOPs of one forward at ``batch_shape`` from the graph: 2 x MACs of MatMul, Gemm and Conv (as PyTorch's
    FlopCounterMode counts them); element-wise ops count 0 there too."""
    graph, shapes = _inferred_shapes(path, batch_shape)
    total = 0.0
    for node in graph.node:
        out = shapes.get(node.output[0]) if node.output else None
        ins = [shapes.get(n) for n in node.input]
        if out is None or not ins or ins[0] is None:
            continue
        if node.op_type == "MatMul" and len(ins[0]) >= 1:
            total += 2.0 * math.prod(out) * ins[0][-1]
        elif node.op_type == "Gemm":
            trans_a = next((a.i for a in node.attribute if a.name == "transA"), 0)
            k = ins[0][0] if trans_a else ins[0][-1]
            total += 2.0 * math.prod(out) * k
        elif node.op_type == "Conv" and len(ins) > 1 and ins[1] is not None:
            w = ins[1]  # [C_out, C_in / groups, *kernel]
            total += 2.0 * math.prod(out) * math.prod(w[1:])
    return total


def onnx_activation_bytes(path: Path, batch_shape: tuple[int, ...]) -> int:
    """Activation memory of one forward: the two largest intermediate tensors at 4 bytes per element (ONNX
    Runtime's planner reuses buffers, so a chain holds about its input and output at once)."""
    graph, shapes = _inferred_shapes(path, batch_shape)
    fixed = {i.name for i in graph.initializer} | {i.name for i in graph.input} | {o.name for o in graph.output}
    sizes = sorted((math.prod(s) * 4 for n, s in shapes.items() if n not in fixed), reverse=True)
    return int(sum(sizes[:2]))


_ORT_MODULE: type | None = None


def _ort_module_cls() -> type:
    global _ORT_MODULE
    if _ORT_MODULE is None:
        import numpy as np
        import torch
        from torch import nn as torch_nn

        class _OrtModule(torch_nn.Module):
            """An ONNX Runtime session behind ``forward(x) -> first output`` (CPU; fp32, or int8 after
            ``rightsize_precision("int8")``: dynamic quantization of the graph's MatMul/Gemm weights)."""

            def __init__(self, path: Path, engine: str = "onnxruntime") -> None:
                super().__init__()
                self.path = path
                self.engine = engine  # onnxruntime | openvino (both run the same ONNX graph on the CPU)
                self.precision = "fp32"
                self.initializer_count = sum(
                    math.prod(i.dims) for i in _onnx_model(path).graph.initializer if i.data_type == 1
                )
                self._session: Any = None
                self._lock = threading.Lock()
                self._open(path)

            def _open(self, path: Path) -> None:
                if self.engine == "openvino":
                    self._open_openvino(path)
                    return
                try:
                    import onnxruntime as ort
                except ImportError:
                    raise UnsupportedError(
                        "model: an .onnx model runs on ONNX Runtime: pip install 'rightsize[onnx]'"
                    ) from None
                opts = ort.SessionOptions()
                self._threads = torch.get_num_threads()  # the sweep's (or serving worker's) thread count
                opts.intra_op_num_threads = self._threads
                opts.inter_op_num_threads = 1
                opts.log_severity_level = 3
                self._session = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
                self._input = self._session.get_inputs()[0]
                self._opened = path

            def _open_openvino(self, path: Path) -> None:
                try:
                    import openvino as ov
                except ImportError:
                    raise UnsupportedError(
                        "model: the OpenVINO engine needs pip install 'rightsize[openvino]'"
                    ) from None
                self._threads = torch.get_num_threads()
                core = ov.Core()
                config = {"INFERENCE_NUM_THREADS": self._threads, "INFERENCE_PRECISION_HINT": "f32"}
                self._session = core.compile_model(core.read_model(str(path)), "CPU", config)
                port = self._session.inputs[0]
                self._input = _OvInput(port.get_any_name(), str(port.get_element_type()))
                self._opened = path

            def rightsize_precision(self, precision: str) -> None:
                """Switch the engine's precision; fp16/bf16 are not offered on ONNX Runtime's CPU path."""
                if precision == "fp32":
                    return
                if self.engine == "openvino":
                    raise UnsupportedError(f"OpenVINO (CPU) is measured at fp32 here, not {precision}")
                if precision != "int8":
                    raise UnsupportedError(f"ONNX Runtime (CPU) runs fp32 and int8, not {precision}")
                self._open(quantized_onnx(self.path))
                self.precision = "int8"

            def forward(self, x: torch.Tensor) -> torch.Tensor:
                if x.device.type != "cpu":
                    raise UnsupportedError("ONNX models run on ONNX Runtime's CPU provider here")
                if torch.get_num_threads() != self._threads:  # a server worker set its own thread count
                    with self._lock:
                        if torch.get_num_threads() != self._threads:
                            self._open(self._opened)
                arr = x.detach().numpy()
                if "int64" in self._input.type or "i64" in self._input.type:
                    arr = arr.astype(np.int64, copy=False)
                elif "int32" in self._input.type or "i32" in self._input.type:
                    arr = arr.astype(np.int32, copy=False)
                else:
                    arr = arr.astype(np.float32, copy=False)
                if self.engine == "openvino":
                    return torch.from_numpy(np.asarray(self._session(arr)[0]).copy())
                return torch.from_numpy(self._session.run(None, {self._input.name: arr})[0])

            def graph_flops(self, batch_shape: tuple[int, ...]) -> float:
                return onnx_flops(self.path, batch_shape)

            def graph_activation_bytes(self, batch_shape: tuple[int, ...]) -> int:
                return onnx_activation_bytes(self.path, batch_shape)

            @classmethod
            def load(cls, path: Path, engine: str = "onnxruntime") -> _OrtModule:
                return cls(path, engine)

        _ORT_MODULE = _OrtModule
    return _ORT_MODULE


@dataclass(frozen=True)
class _OvInput:
    name: str
    type: str  # OpenVINO element type: "f32", "i64", ...


class OrtModule:
    """Namespace for the lazily defined ONNX engine module (torch is imported on first use)."""

    @staticmethod
    def load(path: Path, engine: str = "onnxruntime") -> nn.Module:
        cls: Any = _ort_module_cls()
        module: nn.Module = cls.load(path, engine)
        return module


__all__ = [
    "ORT_PREFIX",
    "TORCHSCRIPT_SUFFIXES",
    "EngineEntry",
    "UserEntry",
    "engine_of",
    "engine_ref",
    "exported_onnx",
    "is_user_ref",
    "onnx_flops",
    "onnx_input",
    "resolve_user",
]
