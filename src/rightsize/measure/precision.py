"""Precision modes: fp32, bf16/fp16 autocast, int8 dynamic quantization (CPU)."""

from __future__ import annotations

import contextlib
import warnings
from typing import Any

import torch
from torch import nn


def autocast(device: str, precision: str) -> contextlib.AbstractContextManager[Any]:
    """bf16 (CPU, CUDA) and fp16 (CUDA) autocast; fp32 and int8 run without autocast."""
    if precision in ("bf16", "fp16"):
        dtype = torch.bfloat16 if precision == "bf16" else torch.float16
        return torch.autocast(device_type=device, dtype=dtype)
    return contextlib.nullcontext()


def prepare_inference(model: nn.Module, precision: str) -> nn.Module:
    """int8: dynamic quantization of every nn.Linear (weights int8, activations quantized per call)."""
    if precision != "int8":
        return model
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.ao.quantization deprecation notice
        return torch.ao.quantization.quantize_dynamic(model, {nn.Linear}, dtype=torch.qint8)


def tensor_bytes(tensors: Any) -> int:
    return int(sum(t.numel() * t.element_size() for t in tensors))
