"""Shared test setup: GPU tests are skipped without CUDA; stores live in tmp dirs."""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    gpu_items = [item for item in items if "gpu" in item.keywords]
    if not gpu_items or _cuda_available():  # import torch only when a GPU test was collected
        return
    skip = pytest.mark.skip(reason="needs CUDA")
    for item in gpu_items:
        item.add_marker(skip)


@pytest.fixture(autouse=True)
def _a_quiet_machine_now(monkeypatch: pytest.MonkeyPatch) -> None:
    """In-process sweeps see "the machine is not busy now" (``sweep.busy_now``): a config stored while busy is
    measured again, as on a quiet machine, whatever else this shared machine runs during the test (the rule's own
    tests patch it)."""
    from rightsize.measure import sweep

    monkeypatch.setattr(sweep, "busy_now", lambda: None)


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "store.sqlite"


def _load_benchmark(name: str) -> ModuleType:
    """``benchmarks/<name>.py`` as a module (once per session): the benchmarks are scripts, not a package."""
    key = f"{name}_benchmark_under_test"
    if key in sys.modules:
        return sys.modules[key]
    spec = importlib.util.spec_from_file_location(
        key, Path(__file__).resolve().parents[1] / "benchmarks" / f"{name}.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[key] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def load_benchmark() -> Callable[[str], ModuleType]:
    return _load_benchmark
