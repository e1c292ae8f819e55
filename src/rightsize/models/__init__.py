"""Model zoo: real architectures from config classes with random weights (nothing is downloaded).

Every zoo model is wrapped as ``ZooModel``: ``forward(x) -> logits`` on one input tensor and
``loss(x, y) -> scalar``, so measuring, serving and estimating treat all models alike.
"""

from typing import Any

from rightsize.models.byo import resolve_model, workload_model
from rightsize.models.zoo import ZOO, ZooEntry, get_entry, list_entries


def __getattr__(name: str) -> Any:
    """``ZooModel`` subclasses torch's nn.Module: defined on first use, so importing this package needs no torch."""
    if name == "ZooModel":
        from rightsize.models import zoo

        return zoo.ZooModel
    raise AttributeError(name)


__all__ = ["ZOO", "ZooEntry", "ZooModel", "get_entry", "list_entries", "resolve_model", "workload_model"]
