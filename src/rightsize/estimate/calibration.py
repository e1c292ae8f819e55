"""Calibration files: real measurements shipped with the product, each with the machine that took them.

    sets = load_calibration()        # [CalibrationSet(path, env, measurements, meta)]

``catalog/data/calibration/*.json`` files with ``"measurements"`` hold Measurements and the environment
fingerprint that produced them (``scripts/calibrate_cpu.py`` writes them). They anchor the CPU time
model in the reference fit (``estimate/reference.py``); ``projection_fit.json`` beside them holds the
parameters that fit writes (``scripts/fit_projection.py``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from rightsize.profile import Environment, Measurement

__all__ = ["CalibrationSet", "calibration_dir", "load_calibration", "read_calibration"]


@dataclass(frozen=True)
class CalibrationSet:
    """One calibration file: the fingerprint of the machine and what it measured there."""

    path: str
    env: Environment
    measurements: tuple[Measurement, ...]
    meta: dict[str, Any] = field(default_factory=dict)  # date, script, load average while measuring


def calibration_dir() -> Path:
    return Path(str(resources.files("rightsize.catalog") / "data" / "calibration"))


def read_calibration(path: Path) -> CalibrationSet | None:
    """One measurement file (``"measurements"`` and the ``"env"`` that took them); None for another JSON file."""
    data = json.loads(path.read_text(encoding="utf-8"))
    if "measurements" not in data:
        return None
    ms = tuple(Measurement.from_dict(d) for d in data["measurements"])
    meta = {k: v for k, v in data.items() if k not in ("env", "measurements")}
    return CalibrationSet(str(path), Environment.from_dict(data.get("env")), ms, meta)


def load_calibration(directory: Path | None = None) -> list[CalibrationSet]:
    """Every measurement file (``*.json`` with ``"measurements"``) in ``directory``."""
    sets = (read_calibration(path) for path in sorted((directory or calibration_dir()).glob("*.json")))
    return [s for s in sets if s is not None]
