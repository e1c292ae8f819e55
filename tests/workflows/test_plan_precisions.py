"""CPU inference plans always try int8 for zoo models (static for a conv net, dynamic otherwise); nothing else."""

from __future__ import annotations

from typing import Any

import pytest

from rightsize.spec import Workload
from rightsize.workflows.plan import with_cpu_serving_precisions

ONLINE = {"online": {"rate_per_s": 10, "latency": {"percentile": 95, "bound_ms": 100}}}
BATCH = {"batch": {"items": 100000, "deadline_hours": 2}}


def _spec(model: str = "resnet50", targets: dict[str, Any] | None = None, **over: Any) -> Workload:
    return Workload.model_validate({"name": "t", "model": model, "precisions": ["fp32"], "devices": ["cpu"],
                                    "targets": ONLINE if targets is None else targets} | over)  # fmt: skip


@pytest.mark.parametrize("targets", [ONLINE, BATCH])
def test_online_and_batch_cpu_plans_add_int8_and_say_which_scheme(targets: dict[str, Any]) -> None:
    cnn, notes = with_cpu_serving_precisions(_spec("resnet50", targets))
    assert cnn.precisions == ["fp32", "int8"] and "static quantization: convolutions too" in notes[0]
    text, notes = with_cpu_serving_precisions(_spec("distilbert", targets))
    assert text.precisions == ["fp32", "int8"] and "dynamic quantization of Linear layers" in notes[0]


def test_nothing_is_added_where_int8_does_not_apply() -> None:
    unchanged = [
        _spec(mode="training", targets={"training": {"epochs": 1, "dataset_size": 1000}}),  # no int8 training
        _spec(devices=["cuda"]),  # int8 is CPU-only here
        _spec(precisions=["int8"]),  # already asked for
    ]
    for w in unchanged:
        assert with_cpu_serving_precisions(w) == (w, [])
