"""Workload spec: what to run (model, mode, shapes, sweep) and what it must achieve (targets)."""

from rightsize.spec.load import load_spec, parse_spec
from rightsize.spec.schema import (
    DEVICES,
    PRECISIONS,
    InputSpec,
    TimingSpec,
    Workload,
)
from rightsize.spec.targets import (
    BatchTarget,
    ColdStart,
    LatencyBound,
    OnlineTarget,
    Targets,
    TrainingTarget,
)

__all__ = [
    "DEVICES",
    "PRECISIONS",
    "BatchTarget",
    "ColdStart",
    "InputSpec",
    "LatencyBound",
    "OnlineTarget",
    "Targets",
    "TimingSpec",
    "TrainingTarget",
    "Workload",
    "load_spec",
    "parse_spec",
]
