"""Fixtures of the report and dashboard tests; the builders live in report_kit.py."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from report_kit import build_store, fake_sweep, online_plan, training_plan

from rightsize.plan.result import Candidate, PlanResult


@pytest.fixture
def plan_online() -> PlanResult:
    return online_plan()


@pytest.fixture
def plan_training() -> PlanResult:
    return training_plan()


@pytest.fixture
def sweep() -> Callable[[Candidate, list[float]], list[float]]:
    return fake_sweep


@pytest.fixture
def two_run_store(tmp_path: Path) -> tuple[Path, str, str]:
    path = tmp_path / "store.sqlite"
    a, b = build_store(path)
    return path, a, b
