"""``rightsize memory --validate``: run the configuration for real here and compare with the estimate.

    CPU:  activations  estimate vs SavedTensorTracker on a real forward (the ±10% target)
          peak         estimate minus resident weights/optimizer states vs the live tensor bytes
                       of a real step (LiveTensorTracker) and vs the RSS peak above baseline
    CUDA: peak         estimate minus fragmentation vs max_memory_allocated + CUDA context,
                       estimate vs max_memory_reserved + context

The estimate must be for this machine's device (``MemoryEstimate.device``). This is the one place
in ``estimate`` that runs a real workload.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rightsize.errors import UnsupportedError
from rightsize.estimate.memory import MemoryEstimate

if TYPE_CHECKING:
    import torch
    from torch import nn

__all__ = ["MemoryValidation", "ValidationRow", "validate_memory"]


@dataclass(frozen=True)
class ValidationRow:
    quantity: str
    estimated_bytes: int
    measured_bytes: int

    @property
    def error_pct(self) -> float:
        """(estimated - measured) / measured, in percent; NaN when nothing was measured."""
        return (
            100.0 * (self.estimated_bytes - self.measured_bytes) / self.measured_bytes
            if self.measured_bytes
            else float("nan")
        )

    def to_dict(self) -> dict[str, Any]:
        return {"quantity": self.quantity, "estimated_bytes": self.estimated_bytes,
                "measured_bytes": self.measured_bytes, "error_pct": round(self.error_pct, 2)}  # fmt: skip


@dataclass(frozen=True)
class MemoryValidation:
    device: str
    rows: list[ValidationRow]
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"device": self.device, "rows": [r.to_dict() for r in self.rows], "notes": self.notes}


def _prepare_inference(model: nn.Module, est: MemoryEstimate) -> nn.Module:
    import torch

    if est.precision in ("fp16", "bf16"):
        return model.to(torch.float16 if est.precision == "fp16" else torch.bfloat16)
    if est.precision == "int8" and est.device == "cpu":
        from torch import nn

        return torch.ao.quantization.quantize_dynamic(model, {nn.Linear}, dtype=torch.qint8)
    if est.precision != "fp32":
        raise UnsupportedError(
            f"precision: --validate does not run {est.precision} on {est.device} here; use fp32, fp16 or bf16"
        )
    return model


def validate_memory(est: MemoryEstimate, tiny: bool = False) -> MemoryValidation:
    """Build the model for real on ``est.device``, run one step of ``est``'s configuration, measure."""
    import torch

    from rightsize.models import resolve_model

    entry = resolve_model(est.model, est.shape, est.vocab)
    if entry.meta_only and not tiny:
        raise UnsupportedError(
            f"model: {est.model} is too large to build here; --validate needs a model that fits this machine"
        )
    if est.device == "cuda" and not torch.cuda.is_available():
        raise UnsupportedError("device: no CUDA device here; validate with --device cpu")
    torch.manual_seed(0)
    model = entry.build(tiny).to(est.device)
    x = entry.example_input(est.batch_size, est.seq_len, est.image_size, tiny=tiny, device=est.device)
    y = entry.example_labels(x, tiny=tiny)
    if est.mode == "train":
        rows = [_weights_row(est, model), *_validate_train(est, model, x, y)]
    else:
        model = _prepare_inference(model, est).eval()
        # packed int8 weights are not parameters: nothing to compare the weights row with
        rows = [] if est.precision == "int8" else [_weights_row(est, model)]
        rows += _validate_infer(est, model, x)
    notes = (
        ["RSS includes allocator caches and library memory: the CPU peak row is indicative"]
        if est.device == "cpu"
        else []
    )
    return MemoryValidation(est.device, rows, notes)


def _weights_row(est: MemoryEstimate, model: nn.Module) -> ValidationRow:
    resident = sum(t.numel() * t.element_size() for t in (*model.parameters(), *model.buffers()))
    return ValidationRow("weights (params + buffers)", est.components["weights"], resident)


def _peak_tracker(device: str) -> Any:
    from rightsize.measure.memory import CudaMemoryTracker, RssPeakTracker

    return CudaMemoryTracker(device) if device == "cuda" else RssPeakTracker()


def _peak_rows(est: MemoryEstimate, tracker: Any, resident: int) -> list[ValidationRow]:
    """Compare the estimated peak with the tracker; ``resident``: estimated bytes present at baseline."""
    b = est.breakdown
    if est.device == "cuda":
        from rightsize.measure.memory import cuda_context_bytes

        ctx = cuda_context_bytes(est.device)
        return [
            ValidationRow("peak: max_memory_allocated + context", est.total_bytes - b["fragmentation"],
                          tracker.max_allocated_bytes + ctx),
            ValidationRow("peak: max_memory_reserved + context", est.total_bytes, tracker.max_reserved_bytes + ctx),
        ]  # fmt: skip
    return [
        ValidationRow("peak above resident state (RSS)", est.total_bytes - resident, tracker.peak_above_baseline_bytes)
    ]  # the estimate includes the CPU allocator margin here


def _validate_train(est: MemoryEstimate, model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> list[ValidationRow]:
    from rightsize.measure.memory import SavedTensorTracker
    from rightsize.measure.precision import grad_scaler, make_optimizer, train_step

    model.train()
    opt = make_optimizer(est.optimizer, model.parameters(), fused=True if est.fused else None)
    scaler = grad_scaler(est.device, est.precision)

    def step(saved: SavedTensorTracker | None = None) -> None:
        train_step(opt, scaler, lambda: model.loss(x, y), est.device, est.precision, saved)  # type: ignore[operator]

    saved = SavedTensorTracker(model)
    step(saved)  # first step: activations measured, optimizer states allocated
    tracker = _peak_tracker(est.device)
    with tracker:
        step()  # steady state: states exist, gradients were set to None
    resident = est.breakdown["weights"] + est.breakdown["optimizer_states"]
    rows = [
        ValidationRow("activations (saved for backward)", est.components["activations_saved"], saved.saved_bytes),
        *_peak_rows(est, tracker, resident),
    ]
    if est.device == "cpu":
        rows.append(_tensor_peak_row(est, resident, step, x, y))
    return rows


def _tensor_peak_row(est: MemoryEstimate, resident: int, run: Any, *inputs: torch.Tensor) -> ValidationRow:
    """CPU's counterpart of max_memory_allocated: live tensor bytes created during ``run`` (+ inputs)."""
    from rightsize.measure.memory import LiveTensorTracker

    with LiveTensorTracker() as live:
        for t in inputs:
            live.track(t)
        run()
    tensors = est.total_bytes - est.breakdown["fragmentation"] - resident  # the margin is not tensors
    return ValidationRow("peak above resident state (tensors)", tensors, live.peak_bytes)


def _validate_infer(est: MemoryEstimate, model: nn.Module, x: torch.Tensor) -> list[ValidationRow]:
    import torch

    def forward() -> None:
        with torch.no_grad():
            model(x)

    forward()  # warm-up: lazy initialisation (oneDNN primitives, cuBLAS handles) stays out of the peak
    tracker = _peak_tracker(est.device)
    with tracker:
        forward()
    rows = _peak_rows(est, tracker, est.breakdown["weights"])
    if est.device == "cpu":
        rows.append(_tensor_peak_row(est, est.breakdown["weights"], forward, x))
    return rows
