"""ONNX models on CPU engines: ONNX Runtime and OpenVINO run one exported graph behind ``forward``.

    OrtModule.load(path, engine="onnxruntime" | "openvino")   an nn.Module-shaped session (fp32; ORT int8)
    exported_onnx(entry, tiny)     a PyTorch model exported once (dynamic batch/sequence), cached
    quantized_onnx(path)           ONNX Runtime dynamic int8 quantization of a graph, cached
    onnx_input / onnx_flops / onnx_activation_bytes   what the graph says: input, FLOPs, activation memory

PyTorch's FLOP counter and memory tracer cannot see inside a session, so the graph gives FLOPs
(2 x MatMul/Gemm/Conv MACs after shape inference) and activation memory (the two largest tensors).
The cache lives under the user cache dir (``RIGHTSIZE_ONNX_CACHE`` moves it).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rightsize.errors import SpecError, UnsupportedError
from rightsize.models.zoo import ZooEntry

if TYPE_CHECKING:
    from torch import nn

# The precisions each CPU engine runs here (``rightsize_precision``): what a plan of its measurements may pick.
ENGINE_PRECISIONS: dict[str, tuple[str, ...]] = {"onnxruntime": ("fp32", "int8"), "openvino": ("fp32",)}


def _onnx_cache() -> Path:
    import os

    import platformdirs

    return Path(os.environ.get("RIGHTSIZE_ONNX_CACHE") or Path(platformdirs.user_cache_dir("rightsize")) / "onnx")


def _cached(key: str, suffix: str, write: Callable[[Path], None]) -> Path:
    """The cache file for ``key``, written once by ``write(tmp_path)`` and moved into place atomically (two
    processes writing the same model write the same bytes)."""
    import hashlib
    import os
    import tempfile

    cache = _onnx_cache()
    out = cache / f"{hashlib.sha1(key.encode()).hexdigest()[:16]}{suffix}"
    if out.is_file():
        return out
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        part = Path(tmp) / f"model{suffix}"
        write(part)
        os.replace(part, out)
    return out


def reduce_range_here(cpuinfo: str | None = None) -> bool:
    """Whether int8 weights should be quantized to 7 bits on this CPU: an x86 CPU without VNNI runs ONNX Runtime's
    u8 x s8 products on AVX2 (vpmaddubsw), whose 16-bit sums saturate; ONNX Runtime's documentation advises
    ``reduce_range`` there ("may improve the accuracy ... running on non-VNNI machine";
    https://onnxruntime.ai/docs/performance/model-optimizations/quantization.html, read 2026-11). On a Zen 4 VM
    hiding AVX-512 a token model's int8 logits were 0.11-0.15 off its fp32 ones with 8 bits, 0.015-0.018 with 7.
    ``cpuinfo``: /proc/cpuinfo's text (read when None); no x86 "flags" line (arm, not Linux): False."""
    import re

    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            return False
    m = re.search(r"^flags\s*:\s*(.+)$", cpuinfo, re.M)
    return m is not None and not set(m.group(1).split()) & {"avx512_vnni", "avx_vnni", "amx_int8"}


def quantized_onnx(path: Path) -> Path:
    """``path`` with its MatMul/Gemm weights quantized to int8 (ONNX Runtime dynamic quantization; 7-bit weights
    where this CPU lacks VNNI: ``reduce_range_here``), cached by the source file's path, size and modification
    time and that choice."""
    import logging

    from onnxruntime.quantization import QuantType, quantize_dynamic

    seven = reduce_range_here()

    def write(out: Path) -> None:
        logging.disable(logging.WARNING)  # "consider pre-processing": advice for static quantization
        try:
            quantize_dynamic(str(path), str(out), weight_type=QuantType.QInt8, reduce_range=seven)
        finally:
            logging.disable(logging.NOTSET)

    st = path.stat()
    return _cached(f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}|{seven}", "-int8.onnx", write)


def exported_onnx(entry: ZooEntry, tiny: bool) -> Path:
    """``entry``'s model exported to ONNX with dynamic batch (and sequence) dims, cached by ref, its file's
    checksum, size and versions: the export takes seconds to a minute, every later build is a file open."""
    import logging
    import warnings

    import torch

    def write(out: Path) -> None:
        torch.manual_seed(0)
        model = entry.build(tiny).eval()
        x = entry.example_input(2, tiny=tiny)
        dims: dict[int, Any] = {0: torch.export.Dim("batch", max=65536)}
        if entry.kind == "tokens" and not getattr(entry, "user_shape", ()):
            dims[1] = torch.export.Dim("seq", max=max(2, min(entry.default_seq_len * 64, 8192)))
        quiet = logging.getLogger("torch.onnx")  # "torchvision is not installed. Skipping torchvision::nms" x4
        level = quiet.level
        quiet.setLevel(logging.ERROR)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                torch.onnx.export(model, (x,), str(out), dynamo=True, dynamic_shapes=(dims,), external_data=False,
                                  verbose=False)  # fmt: skip
        except Exception as exc:  # the exporter raises many types; the user needs one line
            raise UnsupportedError(
                f"model: {entry.name} could not be exported to ONNX ({type(exc).__name__}: {str(exc)[:120]})"
            ) from None
        finally:
            quiet.setLevel(level)

    from rightsize.models.revision import model_revision

    # the file's checksum too: an edited factory or config.json under the same ref exported the old model again
    key = f"{entry.name}|tiny={tiny}|{entry.sample_shape(tiny=tiny)}|torch={torch.__version__}"
    if (rev := model_revision(entry.name)) is not None:
        key += f"|rev={rev}"
    return _cached(key, ".onnx", write)


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
        raise SpecError("model", f"{path} has no graph inputs (an empty or input-less ONNX file); export the model "
                        "with torch.onnx.export(model, example, path)")  # fmt: skip
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


def _output_index(names: list[str]) -> int:
    """Which of a graph's outputs a request's answer is: the one named ``logits`` (a classifier exported with
    ``output_names=["loss", "logits"]``), else the first (the server had answered with the first)."""
    return names.index("logits") if "logits" in names else 0


def _ort_module_cls() -> type:
    global _ORT_MODULE
    if _ORT_MODULE is None:
        import numpy as np
        import torch
        from torch import nn as torch_nn

        class _OrtModule(torch_nn.Module):
            """An ONNX Runtime session behind ``forward(x) -> main output`` (the one named ``logits``, else the first:
            as ``zoo.main_output`` reads a PyTorch model's tuple or dict) (CPU; fp32, or int8 after
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
                names = [o.name for o in self._session.get_outputs()]
                self._output = names[_output_index(names)]
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
                self._output = self._session.outputs[
                    _output_index([next(iter(o.get_names()), "") for o in self._session.outputs])
                ]
                self._opened = path

            def rightsize_precision(self, precision: str) -> None:
                """Switch the engine's precision; fp16/bf16 are not offered on ONNX Runtime's CPU path."""
                if precision == "fp32":
                    return
                if precision not in ENGINE_PRECISIONS[self.engine]:
                    what = "OpenVINO (CPU) is measured at fp32 here" if self.engine == "openvino" else (
                        "ONNX Runtime (CPU) runs fp32 and int8")  # fmt: skip
                    raise UnsupportedError(f"{what}, not {precision}")
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
                    return torch.from_numpy(np.asarray(self._session(arr)[self._output]).copy())
                fixed = self._input.shape[0] if self._input.shape else None
                if isinstance(fixed, int) and fixed > 0 and arr.shape[0] != fixed:
                    raise ValueError(f"{self.path.name} was exported for batch {fixed} only; re-export it with a "
                                     "dynamic batch axis (torch.onnx.export(..., dynamic_shapes))")  # fmt: skip
                try:
                    return torch.from_numpy(self._session.run([self._output], {self._input.name: arr})[0])
                except Exception as exc:  # ONNX Runtime's own types; the cause ("index: 1 Got: 16 Expected: 32")
                    if type(exc).__module__.startswith("onnxruntime"):  # was on a second line, cut in a table
                        text = " ".join(line.strip() for line in str(exc).splitlines() if line.strip())
                        raise ValueError(f"ONNX Runtime refused the input: {text}") from None
                    raise

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
    "ENGINE_PRECISIONS",
    "OnnxInput",
    "OrtModule",
    "exported_onnx",
    "onnx_activation_bytes",
    "onnx_flops",
    "onnx_input",
    "quantized_onnx",
]
