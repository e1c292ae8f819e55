"""Any spec the schema accepts plans without a traceback or a hang: targets drawn up to the schema's
limits (and past them, where the schema must refuse) through the whole planner."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from plan_fixtures import cpu_curve, gpu_curve, small_catalog

from rightsize.errors import RightsizeError, SpecError
from rightsize.jsonout import to_json
from rightsize.plan import MemoryModel, plan
from rightsize.plan.spot import simulate_spot
from rightsize.spec import parse_spec


def _num(low: float, high: float) -> st.SearchStrategy[float]:
    """Values across the whole range, its edges, and a little past them."""
    return st.one_of(
        st.floats(min_value=low, max_value=high, allow_nan=False),
        st.sampled_from([low, high, high * 10, 1e-300, 0.0]),
    )


online = st.fixed_dictionaries(
    {
        "rate_per_s": _num(1e-6, 1e7),
        "latency": st.fixed_dictionaries({"bound_ms": _num(1e-6, 8.64e7), "percentile": _num(1e-6, 99.999)}),
    },
    optional={
        "request_samples": st.integers(1, 10**6),
        "burstiness": _num(1, 1000),
        "arrival": st.sampled_from(["poisson", "bursty", "constant"]),
        "headroom": _num(1e-6, 1),
        "max_replicas": st.integers(1, 10_000),
    },
)
batch = st.fixed_dictionaries(
    {"items": st.integers(1, 10**13), "deadline_hours": _num(1e-9, 1e5)},
    optional={"budget_usd": _num(1e-9, 1e12), "max_instances": st.integers(1, 10_000)},
)
training = st.fixed_dictionaries(
    {"steps": st.integers(1, 10**10), "deadline_hours": _num(1e-9, 1e5)},
    optional={
        "batch_size": st.integers(1, 10**7),
        "checkpoint_minutes": _num(0, 1e5),
        "restart_minutes": _num(0, 1e5),
        "max_nodes": st.integers(1, 1024),
        "budget_usd": _num(1e-9, 1e12),
    },
)
targets = st.one_of(
    st.fixed_dictionaries({"online": online}),
    st.fixed_dictionaries({"batch": batch}, optional={"interruptions_per_hour": _num(0, 60)}),
    st.fixed_dictionaries({"training": training}, optional={"interruptions_per_hour": _num(0, 60)}),
)
CURVES = [cpu_curve("c.2x", 20.0, 15.0), cpu_curve("c.4x", 11.0, 8.0), gpu_curve("T4", 4.0, 0.2)]
TRAIN_CURVES = [gpu_curve("T4", 50.0, 5.0, precision="fp16"), cpu_curve("c.4x", 200.0, 100.0)]
MEMORY = {"fp32": MemoryModel(3e8, 2e6), "fp16": MemoryModel(1.5e8, 1e6)}


@settings(
    max_examples=100, deadline=None, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow]
)
@pytest.mark.slow  # > 1.9 s: make test runs it, make test-fast skips it
@given(t=targets)
def test_accepted_specs_plan_and_serialise(t: dict[str, Any]) -> None:
    training_mode = "training" in t
    spec = {"model": "bert-base" if training_mode else "distilbert", "targets": t}
    if training_mode:
        spec["mode"] = "training"
    try:
        w = parse_spec(spec)
    except SpecError:
        return  # past a limit: refused with the field named (tests/test_inputfile.py checks the line)
    try:
        r = plan(w, TRAIN_CURVES if training_mode else CURVES, small_catalog(), MEMORY)
    except RightsizeError:
        return
    to_json(r.to_dict(top=3))


def test_hopeless_spot_runs_end_instead_of_looping() -> None:
    # 1e6 h of work, interrupted every minute with 10 h restarts: never finishes; must say so quickly.
    out = simulate_spot(1e6, 60.0, 0.01, 10.0, 1.0, 3.0, deadline_hours=1e5)
    assert out.expected_hours == float("inf") and out.p_meet_deadline == 0.0
    # Long work, checkpoints every few seconds: coarsened to a bounded number of segments.
    long = simulate_spot(1e5, 0.01, 1e-4, 0.1, 1.0, 3.0, deadline_hours=2e5, samples=100)
    assert 1e5 <= long.expected_hours < 2e5 and long.p_meet_deadline == 1.0
