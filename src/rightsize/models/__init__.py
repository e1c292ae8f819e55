"""Model zoo: real architectures from config classes with random weights (nothing is downloaded).

Every zoo model is wrapped as ``ZooModel``: ``forward(x) -> logits`` on one input tensor and
``loss(x, y) -> scalar``, so measuring, serving and estimating treat all models alike.
"""

from rightsize.models.zoo import ZOO, ZooEntry, ZooModel, get_entry, list_entries, resolve_model, workload_model

__all__ = ["ZOO", "ZooEntry", "ZooModel", "get_entry", "list_entries", "resolve_model", "workload_model"]
