"""Precision modes: fp32, bf16/fp16 autocast, int8 dynamic quantization (CPU)."""

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


def prepare_inference(model: nn.Module, precision: str) -> nn.Module:
    """int8: dynamic quantization of every nn.Linear (weights int8, activations quantized per call).

    A model that runs on another engine (an ONNX Runtime session) switches itself: ``rightsize_precision``.
    """
    switch = getattr(getattr(model, "inner", model), "rightsize_precision", None)
    if callable(switch):
        switch(precision)
        return model
    if precision != "int8":
        return model
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.ao.quantization deprecation notice
        return torch.ao.quantization.quantize_dynamic(model, {nn.Linear}, dtype=torch.qint8)


def tensor_bytes(tensors: Any) -> int:
    return int(sum(t.numel() * t.element_size() for t in tensors))
