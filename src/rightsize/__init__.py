"""rightsize: pick the cheapest hardware that meets a deep-learning workload's deadline or SLO.

    import rightsize as rs
    record = rs.plan("examples/sentiment-api.yaml")     # rs.measure, rs.memory, rs.diagnose, rs.workload

The Python API lives in ``rightsize.api``; its names are loaded on first use, so ``import rightsize``
stays light (no torch, no pydantic models) for tools that only need the version.
"""

from __future__ import annotations

import sys
import types
from typing import Any

__version__ = "0.1.0"
__all__ = ["PlanRecord", "__version__", "diagnose", "measure", "memory", "plan", "workload"]

_API = {"PlanRecord", "diagnose", "measure", "memory", "plan", "workload"}


def __getattr__(name: str) -> Any:
    if name == "diagnose":  # the subpackage, callable as ``rs.diagnose()``: importing it rebinds the name anyway
        import importlib

        return importlib.import_module("rightsize.diagnose")
    if name in _API:
        return _api_function(name)
    raise AttributeError(f"module 'rightsize' has no attribute {name!r}")


def _api_function(name: str) -> Any:
    from rightsize import api

    return getattr(api, name)


class _ApiPackage(types.ModuleType):
    """A subpackage named like an API function (``rightsize.plan``, ``rightsize.measure``), callable as that
    function: importing it binds the package over ``rs.plan``, and the README's ``rs.plan(...)`` then a second
    call failed with "'module' object is not callable". It pickles (a process pool mapping ``rs.plan``) and has
    the function's signature and type hints (the package's own module-level annotations give way to them)."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return _api_function(self.__name__.rsplit(".", 1)[1])(*args, **kwargs)

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return _api_function, (self.__name__.rsplit(".", 1)[1],)

    @property
    def __signature__(self) -> Any:
        import inspect

        return inspect.signature(_api_function(self.__name__.rsplit(".", 1)[1]))

    @property
    def __annotations__(self) -> dict[str, Any]:  # type: ignore[override]
        """Resolved, for ``typing.get_type_hints(rs.plan)``: it reads a module's annotations in the package's
        namespace, where the function's names (Workload, Store) are not."""
        import typing

        return typing.get_type_hints(_api_function(self.__name__.rsplit(".", 1)[1]))


class _Package(types.ModuleType):
    """``rightsize`` itself: the import system binds each subpackage here by setattr; ``plan`` and ``measure``
    become ``_ApiPackage`` on the way, keeping their contents and their ``import rightsize.plan`` uses."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in ("plan", "measure") and type(value) is types.ModuleType:
            value.__class__ = _ApiPackage
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
