"""Precision modes: fp32, bf16/fp16 autocast, int8 quantization (CPU).

int8 is what a CPU deployment would run: a model with convolutions is quantized statically (FX graph mode,
PyTorch's ``x86`` engine: int8 weights and activations, calibrated on a sample batch), so its convolutions
run int8 (oneDNN on a VNNI/AMX core, else FBGEMM); any other model is quantized dynamically (int8 Linear
weights, activations quantized per call), the usual recipe for transformers. The calibration batch is
synthetic: it sets the speed, not the accuracy a user's own calibration data would give.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch import nn


def autocast(device: str, precision: str) -> contextlib.AbstractContextManager[Any]:
    """bf16 (CPU, CUDA) and fp16 (CUDA) autocast; fp32 and int8 run without autocast."""
    if precision in ("bf16", "fp16"):
        dtype = torch.bfloat16 if precision == "bf16" else torch.float16
        return torch.autocast(device_type=device, dtype=dtype)
    return contextlib.nullcontext()


def make_optimizer(name: str | None, params: Iterable[Any], fused: bool | None = None) -> torch.optim.Optimizer:
    """The training optimizer: ``sgd`` (lr 1e-3, momentum 0.9), else AdamW (lr 1e-4)."""
    if name == "sgd":
        return torch.optim.SGD(params, lr=1e-3, momentum=0.9, fused=fused)
    return torch.optim.AdamW(params, lr=1e-4, fused=fused)


def grad_scaler(device: str, precision: str) -> torch.amp.GradScaler | None:
    """fp16 needs loss scaling; bf16 has fp32's exponent range and does not (torch.amp docs)."""
    return torch.amp.GradScaler(device) if precision == "fp16" and device == "cuda" else None


def train_step(
    opt: torch.optim.Optimizer,
    scaler: torch.amp.GradScaler | None,
    loss_fn: Callable[[], torch.Tensor],
    device: str,
    precision: str,
    context: contextlib.AbstractContextManager[Any] | None = None,
) -> torch.Tensor:
    """One optimizer step: forward (under ``context`` and autocast), backward, step; returns the loss."""
    opt.zero_grad(set_to_none=True)
    with context or contextlib.nullcontext(), autocast(device, precision):
        loss = loss_fn()
    if scaler is not None:
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
    else:
        loss.backward()
        opt.step()
    return loss


def prepare_inference(model: nn.Module, precision: str, example: torch.Tensor | None = None) -> nn.Module:
    """The model as it runs at ``precision``; int8 (see the module docstring) marks which scheme it got in
    ``rightsize_int8`` ("static" or "dynamic"). ``example`` is a sample batch: static quantization needs it
    to calibrate, and without it (or when the model cannot be traced) int8 is dynamic.

    A model that runs on another engine (an ONNX Runtime session) switches itself: ``rightsize_precision``.
    """
    switch = getattr(getattr(model, "inner", model), "rightsize_precision", None)
    if callable(switch):
        switch(precision)
        return model
    if precision != "int8":
        return model
    if example is not None and any(isinstance(m, nn.Conv2d) for m in model.modules()):
        static = _static_int8(model, example)
        if static is not None:
            return static
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.ao.quantization deprecation notice
        quantized = torch.ao.quantization.quantize_dynamic(model, {nn.Linear}, dtype=torch.qint8)
    if not any(isinstance(m, torch.ao.nn.quantized.dynamic.Linear) for m in quantized.modules()):
        # a TorchScript module's layers are script modules, not nn.Linear: int8 timed the fp32 model, labelled int8
        from rightsize.errors import UnsupportedError
        from rightsize.measure.config import INT8_NOTHING_QUANTIZED

        raise UnsupportedError(
            f"precision: {INT8_NOTHING_QUANTIZED} (dynamic quantization replaces torch.nn.Linear layers; "
            "a TorchScript or torch.export model shows none); use fp32 or bf16, or give a factory (module:function) "
            "that returns the nn.Module"
        )
    quantized.rightsize_int8 = "dynamic"
    return quantized


def int8_scheme(model: nn.Module) -> str | None:
    """ "static" or "dynamic" for a model ``prepare_inference`` quantized, else None."""
    scheme = getattr(model, "rightsize_int8", None)
    return scheme if isinstance(scheme, str) else None


_TRACE_RETRIES = 8  # submodule classes left in float before giving up on static quantization


def _static_int8(model: nn.Module, example: torch.Tensor) -> nn.Module | None:
    """FX graph-mode static quantization for the ``x86`` engine, or None when too little of the model traces.

    A submodule FX cannot trace (Python control flow on a tensor's shape, as in Hugging Face's ResNet stem
    or MobileNetV2's TF-style padding) stays float: its class is marked non-traceable and tracing retried.
    None when no convolution ends up quantized (then dynamic quantization is as good)."""
    import copy

    from torch.ao.quantization import get_default_qconfig_mapping
    from torch.ao.quantization.fx.custom_config import PrepareCustomConfig
    from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx

    if "x86" not in torch.backends.quantized.supported_engines:
        return None
    torch.backends.quantized.engine = "x86"
    model = model.eval()
    float_classes: set[type] = set()
    for _ in range(_TRACE_RETRIES):
        names = [n for n, m in model.named_modules() if n and type(m) in float_classes]
        config = PrepareCustomConfig().set_non_traceable_module_names(names)
        attempt = copy.deepcopy(model)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # torch.ao.quantization deprecation notice
                prepared = prepare_fx(
                    attempt, get_default_qconfig_mapping("x86"), (example,), prepare_custom_config=config
                )
                if not _traced_convs(prepared):
                    return None  # every convolution sits in a module left float
                with torch.inference_mode():
                    for _ in range(2):  # calibration: the observers record activation ranges
                        prepared(example)
                quantized = convert_fx(prepared)
                with torch.inference_mode():
                    quantized(example)  # an op the quantized graph cannot run fails here, not in the timed runs
        except Exception as e:  # a trace error: leave the submodule that raised it in float and retry
            culprit = _failing_module(e, attempt)
            if culprit is None or culprit in float_classes:
                return None
            float_classes.add(culprit)
            continue
        if not any(_is_quantized_conv(m) for m in quantized.modules()):
            return None
        quantized.rightsize_int8 = "static"  # type: ignore[assignment]  # a plain attribute, not a submodule
        return quantized
    return None


def _traced_convs(graph: torch.fx.GraphModule) -> int:
    """Convolutions (plain or fused with their activation) called from the traced graph itself."""
    from torch.ao.nn.intrinsic import _FusedModule

    n = 0
    for node in graph.graph.nodes:
        if node.op == "call_module":
            mod = graph.get_submodule(str(node.target))
            fused = isinstance(mod, _FusedModule) and any(isinstance(c, nn.Conv2d) for c in mod.children())
            n += isinstance(mod, nn.Conv2d) or fused
    return n


def _is_quantized_conv(m: nn.Module) -> bool:
    """A convolution convert_fx swapped in (``torch.ao.nn.quantized.Conv2d``, ``...intrinsic.quantized.ConvReLU2d``)."""
    return "Conv" in type(m).__name__ and ".quantized" in type(m).__module__


def _failing_module(error: BaseException, model: nn.Module) -> type | None:
    """The innermost submodule of ``model`` (other than the model itself) on the traceback of ``error``."""
    owned = {id(m) for n, m in model.named_modules() if n}
    culprit: type | None = None
    tb = error.__traceback__
    while tb is not None:
        obj = tb.tb_frame.f_locals.get("self")
        if isinstance(obj, nn.Module) and id(obj) in owned:
            culprit = type(obj)
        tb = tb.tb_next
    return culprit


def tensor_bytes(tensors: Any) -> int:
    return int(sum(t.numel() * t.element_size() for t in tensors))
