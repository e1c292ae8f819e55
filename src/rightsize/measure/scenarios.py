"""What a child process runs for one config: build, warm up, time, track memory, count FLOPs.

Runs inside the isolated child (see ``runner``); imports torch at module import.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any

import torch
from torch.utils.flop_counter import FlopCounterMode

from rightsize.allocator import keep_freed_memory
from rightsize.measure.conditions import RunConditions
from rightsize.measure.config import BenchConfig
from rightsize.measure.memory import CudaMemoryTracker, RssPeakTracker, SavedTensorTracker, cuda_context_bytes
from rightsize.measure.power import MIN_POWER_WINDOW_S, PowerReading, open_power_meter, power_extra
from rightsize.measure.precision import (
    autocast,
    grad_scaler,
    int8_scheme,
    make_optimizer,
    prepare_inference,
    tensor_bytes,
    train_step,
)
from rightsize.measure.probe import core_gemm_gflops
from rightsize.measure.timing import cpu_timer, cuda_timer, time_adaptive
from rightsize.models import ZooEntry, resolve_model
from rightsize.profile import Measurement


def _entry(cfg: BenchConfig) -> ZooEntry:
    return resolve_model(cfg.model, list(cfg.user_shape) if cfg.user_shape else None, cfg.user_vocab)


def _inputs(entry: ZooEntry, cfg: BenchConfig, batch: int) -> tuple[torch.Tensor, torch.Tensor]:
    x = entry.example_input(
        batch,
        seq_len=cfg.input.get("seq_len"),
        image_size=cfg.input.get("image_size"),
        tiny=cfg.tiny,
        device=cfg.device,
    )
    return x, entry.example_labels(x, tiny=cfg.tiny)


def _loss(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """ZooModel.loss (nn.Module's __getattr__ hides its type from mypy)."""
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] = model.loss  # type: ignore[assignment]
    return loss_fn(x, y)


def _count_flops(fn: Callable[[], Any]) -> float:
    with FlopCounterMode(display=False) as counter:
        fn()
    return float(counter.get_total_flops())


def _memory_trackers(cfg: BenchConfig) -> tuple[RssPeakTracker, CudaMemoryTracker | None]:
    rss = RssPeakTracker()
    return rss, CudaMemoryTracker(cfg.device) if cfg.device == "cuda" else None


def run_config(cfg: BenchConfig) -> Measurement:
    """Measure one config on this process's device. Exceptions propagate to the runner."""
    keep_freed_memory()  # as the server runs (rightsize.allocator): no page faults per forward pass
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    if cfg.device == "cuda" and not torch.cuda.is_available():
        return cfg.result("failed", reason="no CUDA device on this machine")
    # This core's speed right now (a VM's drifts with its host): the projection anchors on it. Before
    # the seed: the probe draws random matrices, and the model's initialisation must not depend on it.
    core_gflops = core_gemm_gflops() if cfg.device == "cpu" else None
    torch.manual_seed(0)
    rss, cuda = _memory_trackers(cfg)
    with contextlib.ExitStack() as stack:
        stack.enter_context(rss)
        if cuda is not None:
            stack.enter_context(cuda)
        if cfg.mode == "training":
            m = _training(cfg)
        else:
            m = _inference(cfg)
    peak = cuda.max_allocated_bytes if cuda is not None else rss.peak_above_baseline_bytes
    extra_mem: dict[str, Any] = {"peak_memory_bytes": int(peak)}
    if cuda is not None:
        extra_mem |= {
            "reserved_memory_bytes": int(cuda.max_reserved_bytes),
            "context_memory_bytes": cuda_context_bytes(),
        }
    else:
        extra_mem["extra"] = {
            **m.extra,
            "rss_peak_bytes": int(rss.peak_bytes),
            "rss_baseline_bytes": int(rss.baseline_bytes),
            "core_gemm_gflops": round(core_gflops, 2) if core_gflops else None,
        }
    return Measurement.from_dict(m.to_dict() | extra_mem)


def _inference(cfg: BenchConfig) -> Measurement:
    entry = _entry(cfg)
    model = entry.build(cfg.tiny)
    param_bytes, buffer_bytes = tensor_bytes(model.parameters()), tensor_bytes(model.buffers())
    param_bytes = param_bytes or 4 * int(getattr(model.inner, "initializer_count", 0))  # an ONNX graph's weights
    x, _ = _inputs(entry, cfg, cfg.batch_size)
    x1, _ = _inputs(entry, cfg, 1)
    model = prepare_inference(model, cfg.precision, x1).to(cfg.device)
    scheme = int8_scheme(model)

    def forward(inp: torch.Tensor) -> Callable[[], Any]:
        def call() -> Any:
            with torch.inference_mode(), autocast(cfg.device, cfg.precision):
                return model(inp)

        return call

    flops = _count_flops(forward(x1)) if cfg.precision != "int8" else _count_flops_fp32(entry, cfg, x1)
    graph_flops = getattr(getattr(model, "inner", model), "graph_flops", None)
    if not flops and callable(graph_flops):  # another engine (ONNX Runtime): its graph has the FLOPs
        flops = float(graph_flops(tuple(x1.shape)))
    cond = RunConditions()
    with _PowerWindow(cfg.device) as power:
        stats, converged = time_adaptive(
            forward(x), cfg.timing, cuda_timer if cfg.device == "cuda" else cpu_timer, conditions=cond
        )
        power.top_up(forward(x), cfg.device)
    extra = {"ci_converged": converged, **_conditions(cond, cfg, flops, stats.p50), **power.extra(cfg, stats.p50)}
    if scheme:
        extra["int8_scheme"] = scheme  # static: convolutions quantized too; dynamic: Linear layers only
    return cfg.result(
        "ok", latency_ms=stats, throughput_per_s=cfg.batch_size * 1e3 / stats.p50, flops_per_sample=flops,
        param_bytes=param_bytes, buffer_bytes=buffer_bytes, extra=extra,
    )  # fmt: skip


class _PowerWindow:
    """Measured energy over the timing window where RAPL / NVML can be read (``measure/power.py``)."""

    def __init__(self, device: str) -> None:
        self.meter, self.why = open_power_meter(device)
        self.reading: PowerReading | None = None

    def __enter__(self) -> _PowerWindow:
        self._t0 = time.perf_counter()
        if self.meter is not None:
            try:
                self.meter.start()
            except OSError as exc:
                self.meter, self.why = None, f"power counter unreadable: {exc}"
        return self

    def top_up(self, fn: Callable[[], Any], device: str) -> None:
        """Keep running ``fn`` until the window is MIN_POWER_WINDOW_S long (measure/power.py: energy counters
        advance in steps; a 30 ms window read 0 J on an H100)."""
        if self.meter is None:
            return
        while time.perf_counter() - self._t0 < MIN_POWER_WINDOW_S:
            fn()
        if device.startswith("cuda"):
            torch.cuda.synchronize()

    def __exit__(self, *exc: object) -> None:
        if self.meter is not None:
            try:
                self.reading = self.meter.stop()
            except OSError as e:
                self.why = f"power counter unreadable: {e}"

    def extra(self, cfg: BenchConfig, p50_ms: float) -> dict[str, Any]:
        return power_extra(self.reading, self.why, p50_ms / 1e3 / max(1, cfg.batch_size))


def _conditions(cond: RunConditions, cfg: BenchConfig, flops_per_sample: float, p50_ms: float) -> dict[str, Any]:
    """What the CPU was doing while this config was timed (see measure/conditions.py)."""
    if cfg.device != "cpu":
        return {}
    return cond.to_extra(cfg.threads or torch.get_num_threads(), flops_per_sample * cfg.batch_size, p50_ms)


def _count_flops_fp32(entry: ZooEntry, cfg: BenchConfig, x1: torch.Tensor) -> float:
    """Quantized ops are invisible to FlopCounterMode; count the same math on the fp32 model."""
    fp32 = entry.build(cfg.tiny).to(cfg.device)
    with torch.inference_mode():
        return _count_flops(lambda: fp32(x1))


def _training(cfg: BenchConfig) -> Measurement:
    entry = _entry(cfg)
    if getattr(entry, "fmt", None) == "onnx":
        return cfg.result(
            "failed", reason="an ONNX model runs inference only; train its PyTorch model (module:factory)"
        )
    model = entry.build(cfg.tiny).to(cfg.device).train()
    param_bytes, buffer_bytes = tensor_bytes(model.parameters()), tensor_bytes(model.buffers())
    opt = make_optimizer(cfg.optimizer, model.parameters())
    scaler = grad_scaler(cfg.device, cfg.precision)
    x, y = _inputs(entry, cfg, cfg.batch_size)
    loss_box: list[float] = []

    def step(inp: torch.Tensor = x, lab: torch.Tensor = y) -> None:
        loss = train_step(opt, scaler, lambda: _loss(model, inp, lab), cfg.device, cfg.precision)
        loss_box.append(float(loss.detach()))

    # Saved-for-backward bytes of one forward (activations), then free the graph.
    with SavedTensorTracker(model) as saved, autocast(cfg.device, cfg.precision):
        loss = _loss(model, x, y)
    del loss
    # forward + backward (+ optimizer, counted as 0) per sample, on 2 samples where the batch has them: BatchNorm in
    # train mode refuses one value per channel, and every BatchNorm1d model had failed at every batch size
    n = min(2, cfg.batch_size)
    xn, yn = _inputs(entry, cfg, n)
    flops = _count_flops(lambda: step(xn, yn)) / n
    # warm-up >= 2 so optimizer states exist before timing (they are allocated at the first step).
    policy = cfg.timing if cfg.timing.warmup >= 2 else type(cfg.timing)(**{**cfg.timing.__dict__, "warmup": 2})
    cond = RunConditions()
    with _PowerWindow(cfg.device) as power:
        stats, converged = time_adaptive(
            step, policy, cuda_timer if cfg.device == "cuda" else cpu_timer, conditions=cond
        )
        power.top_up(step, cfg.device)
    extra: dict[str, Any] = {
        "ci_converged": converged,
        **_conditions(cond, cfg, flops, stats.p50),
        **power.extra(cfg, stats.p50),
    }
    if cfg.epochs:
        extra |= _epochs(cfg, entry, model, step)
    return cfg.result(
        "ok", latency_ms=stats, throughput_per_s=cfg.batch_size * 1e3 / stats.p50, flops_per_sample=flops,
        param_bytes=param_bytes, buffer_bytes=buffer_bytes, activation_bytes=int(saved.saved_bytes),
        loss=loss_box[-1], extra=extra,
    )  # fmt: skip


def _epochs(
    cfg: BenchConfig, entry: ZooEntry, model: torch.nn.Module, step: Callable[[torch.Tensor, torch.Tensor], None]
) -> dict[str, Any]:
    """A short real training on a fixed synthetic dataset: time per epoch and the loss curve."""
    data = [_batch(entry, cfg, seed) for seed in range(cfg.epoch_batches)]
    epoch_s, losses = [], []
    for _ in range(cfg.epochs or 0):
        t0 = time.perf_counter()
        total = 0.0
        for x, y in data:
            step(x, y)
        if cfg.device == "cuda":
            torch.cuda.synchronize()
        epoch_s.append(time.perf_counter() - t0)
        for x, y in data[:2]:  # loss on two batches after the epoch, without a step
            with torch.no_grad(), autocast(cfg.device, cfg.precision):
                total += float(_loss(model, x, y))
        losses.append(total / 2)
    return {
        "epochs": cfg.epochs,
        "epoch_time_s": epoch_s,
        "epoch_loss": losses,
        "samples_per_epoch": cfg.epoch_batches * cfg.batch_size,
    }


def _batch(entry: ZooEntry, cfg: BenchConfig, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    x = entry.example_input(
        cfg.batch_size, seq_len=cfg.input.get("seq_len"), image_size=cfg.input.get("image_size"), tiny=cfg.tiny,
        device=cfg.device, seed=100 + seed,
    )  # fmt: skip
    return x, entry.example_labels(x, tiny=cfg.tiny, seed=200 + seed)
