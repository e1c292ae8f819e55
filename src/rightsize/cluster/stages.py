"""The pipeline's stages as batch functions, shared by local workers and Ray Data (``map_batches``).

Each stage adds its own time to every row it touched, as per-row shares (stage seconds / rows), so
summing a column over all rows gives the stage's total busy time wherever the rows ran:

    t_<stage>_wall_s   wall-clock seconds        t_<stage>_cpu_s   CPU seconds of the process
                                                                   (all its threads: core-seconds)

    read -> preprocess -> infer (Predictor, holds the model) -> write (the driver)
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from rightsize.cluster.items import Batch, ItemSpec, preprocess, synthetic_read

STAGES = ("read", "preprocess", "infer", "write")


@dataclass(frozen=True)
class InferSpec:
    """How the Predictor builds and runs the model (a plain value: it travels to workers and actors)."""

    model: str
    tiny: bool
    device: str  # cpu | cuda
    precision: str  # fp32 | bf16 | fp16 | int8
    batch_size: int  # micro-batch per forward call
    threads: int | None = None  # torch intra-op threads per worker; None = leave torch's default
    user_shape: tuple[int, ...] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def add_time(batch: Batch, stage: str, wall_s: float, cpu_s: float) -> Batch:
    n = max(len(batch["id"]), 1)
    batch[f"t_{stage}_wall_s"] = np.full(len(batch["id"]), wall_s / n)
    batch[f"t_{stage}_cpu_s"] = np.full(len(batch["id"]), cpu_s / n)
    return batch


def timed(stage: str, fn: Callable[[Batch], Batch], batch: Batch) -> Batch:
    w0, c0 = time.perf_counter(), time.process_time()
    out = fn(batch)
    return add_time(out, stage, time.perf_counter() - w0, time.process_time() - c0)


def _carry(src: Batch, dst: Batch) -> Batch:
    """Copy the time columns of earlier stages onto a stage's output."""
    for k, v in src.items():
        if k.startswith("t_") and k not in dst:
            dst[k] = v
    return dst


def read_stage(batch: Batch, spec: dict[str, Any]) -> Batch:
    """ids -> raw synthetic items (Ray Data passes the ``id`` column of ``from_arrow`` blocks)."""
    item = ItemSpec(**spec)
    return timed("read", lambda b: synthetic_read(item, b["id"]), batch)


def preprocess_stage(batch: Batch, spec: dict[str, Any]) -> Batch:
    item = ItemSpec(**spec)
    return _carry(batch, timed("preprocess", lambda b: preprocess(item, _normalise(b)), batch))


def _normalise(batch: Batch) -> Batch:
    """Ray Data may hand list columns over as object arrays of arrays: stack them."""
    out = dict(batch)
    for col in ("features", "image"):
        if col in out and out[col].dtype == object:
            out[col] = np.stack([np.asarray(r) for r in out[col]])
    return out


class Predictor:
    """Builds the model once (per worker process or Ray actor); ``__call__`` runs the infer stage.

    Output per row: ``label`` (argmax class; LMs: next token after the last position) and ``score``
    (its softmax probability), plus the earlier stages' time columns.
    """

    def __init__(self, infer: dict[str, Any]) -> None:
        import torch

        from rightsize.measure.precision import autocast, prepare_inference
        from rightsize.models import resolve_model

        self.spec = InferSpec(
            **{**infer, "user_shape": tuple(infer["user_shape"]) if infer.get("user_shape") else None}
        )
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
        if self.spec.threads:
            torch.set_num_threads(self.spec.threads)
        if self.spec.device == "cuda" and not torch.cuda.is_available():
            raise RuntimeError("device cuda requested but this worker has no CUDA device")
        entry = resolve_model(self.spec.model, list(self.spec.user_shape) if self.spec.user_shape else None)
        sample = entry.example_input(1, tiny=self.spec.tiny)  # what static int8 calibrates on
        self.model = prepare_inference(entry.build(self.spec.tiny), self.spec.precision, sample).to(self.spec.device)
        self.autocast = lambda: autocast(self.spec.device, self.spec.precision)
        self.torch = torch

    def __call__(self, batch: Batch) -> Batch:
        return _carry(batch, timed("infer", self._infer, batch))

    def _infer(self, batch: Batch) -> Batch:
        torch, b = self.torch, self.spec.batch_size
        x_all = batch["x"]
        labels, scores = [], []
        with torch.inference_mode(), self.autocast():
            for i in range(0, len(x_all), b):  # micro-batches of the configured size
                x = torch.from_numpy(np.ascontiguousarray(x_all[i : i + b])).to(self.spec.device)
                if self.spec.user_shape:  # a user model takes [B, *shape]; items carry flat features
                    x = x.reshape(len(x), *self.spec.user_shape)
                logits = self.model(x)
                if logits.dim() == 3:  # LM: [B, S, V] -> the last position
                    logits = logits[:, -1]
                prob = torch.softmax(logits.float(), dim=-1)
                score, label = prob.max(dim=-1)
                labels.append(label.cpu().numpy())
                scores.append(score.cpu().numpy())
        empty = np.zeros(0)
        return {
            "id": batch["id"],
            "label": np.concatenate(labels).astype(np.int64) if labels else empty.astype(np.int64),
            "score": np.concatenate(scores).astype(np.float32) if scores else empty.astype(np.float32),
        }


def stage_totals(batch: Batch) -> dict[str, dict[str, float]]:
    """Sum the per-row time columns of a batch: ``{stage: {"wall_s", "cpu_s"}}``."""
    out: dict[str, dict[str, float]] = {}
    for stage in STAGES:
        for kind in ("wall_s", "cpu_s"):
            col = batch.get(f"t_{stage}_{kind}")
            if col is not None:
                out.setdefault(stage, {"wall_s": 0.0, "cpu_s": 0.0})[kind] += float(np.sum(col))
    return out
