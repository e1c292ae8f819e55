"""rightsize: pick the cheapest hardware that meets a deep-learning workload's deadline or SLO.

    import rightsize as rs
    record = rs.plan("examples/sentiment-api.yaml")     # rs.measure, rs.memory, rs.diagnose, rs.workload

The Python API lives in ``rightsize.api``; its names are loaded on first use, so ``import rightsize``
stays light (no torch, no pydantic models) for tools that only need the version.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"
__all__ = ["PlanRecord", "__version__", "diagnose", "measure", "memory", "plan", "workload"]

_API = {"PlanRecord", "diagnose", "measure", "memory", "plan", "workload"}


def __getattr__(name: str) -> Any:
    if name == "diagnose":  # the subpackage, callable as ``rs.diagnose()``: importing it rebinds the name anyway
        import importlib

        return importlib.import_module("rightsize.diagnose")
    if name in _API:
        from rightsize import api

        return getattr(api, name)
    raise AttributeError(f"module 'rightsize' has no attribute {name!r}")
