"""How a model ref reads, without building anything: its engine prefix and its Hugging Face config folder. A leaf
module, so ``models.revision`` (imported by the module checks that ``byo`` imports) can read refs too."""

from __future__ import annotations

from pathlib import Path

ORT_PREFIX = "ort:"  # the same model on ONNX Runtime: the CPU engine the planner compares with PyTorch eager
OV_PREFIX = "ov:"  # the same model on OpenVINO (exported to ONNX, compiled for the CPU)


def without_engine(ref: str) -> str:
    """``ref`` without an ``ort:``/``ov:`` prefix: the model the engine runs."""
    return ref.partition(":")[2] if ref.startswith((ORT_PREFIX, OV_PREFIX)) else ref


def config_dir(ref: str) -> Path | None:
    """The folder ``ref`` (``hf:DIR`` or a bare DIR) names when it holds a ``config.json``, else None."""
    path = Path(ref[3:] if ref.startswith("hf:") else ref)
    try:
        return path if path.is_dir() and (path / "config.json").exists() else None  # a FIFO: read_user_text refuses
    except OSError:
        return None
