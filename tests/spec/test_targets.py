"""Planning targets in the spec: defaults, validation, one goal at a time."""

from __future__ import annotations

import pytest

from rightsize.errors import SpecError
from rightsize.spec import parse_spec


def _targets(t: dict) -> dict:  # type: ignore[type-arg]
    return {"model": "distilbert", "targets": t}


def test_online_defaults() -> None:
    w = parse_spec(_targets({"online": {"rate_per_s": 40, "latency": {"bound_ms": 120}}}))
    assert w.targets is not None and w.targets.online is not None
    o = w.targets.online
    assert (o.latency.percentile, o.request_samples, o.arrival, o.balancer, o.headroom) == (
        95,
        1,
        "poisson",
        "jsq",
        0.8,
    )
    assert w.targets.purchase == ["on_demand", "spot"] and w.targets.cold_start.provision_s == 25.0


@pytest.mark.parametrize(
    ("targets", "field"),
    [
        ({"online": {"rate_per_s": 0, "latency": {"bound_ms": 1}}}, "targets.online.rate_per_s"),
        ({"online": {"rate_per_s": 1, "latency": {"bound_ms": 1}, "balancer": "magic"}}, "targets.online.balancer"),
        (
            {"online": {"rate_per_s": 1, "latency": {"bound_ms": 1}}, "batch": {"items": 1, "deadline_hours": 1}},
            "targets",
        ),
        ({"training": {"epochs": 3}}, "targets.training"),
        ({}, "targets"),
        ({"purchase": ["reserved"], "kind": "etl"}, "targets.purchase[0]"),
        # an empty filter would leave no instance, and was blamed on targets.instances
        ({"providers": [], "kind": "etl"}, "targets.providers"),
        ({"instances": [], "kind": "etl"}, "targets.instances"),
        (
            {"generative": {"rate_per_s": 1e-300, "ttft": {"bound_ms": 1}, "tpot": {"bound_ms": 1}}},
            "targets.generative.rate_per_s",
        ),
    ],
)
def test_invalid_targets_name_the_field(targets: dict, field: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(SpecError) as err:
        parse_spec(_targets(targets))
    assert err.value.field == field


def test_training_needs_a_length() -> None:
    w = parse_spec(_targets({"training": {"dataset_size": 1000, "epochs": 3, "deadline_hours": 8}}))
    assert w.targets is not None and w.targets.training is not None
    assert w.targets.training.batch_size == 32 and w.targets.training.checkpoint_minutes == 5.0


def test_steps_and_epochs_together_are_refused() -> None:
    """`steps: 1000` beside dataset_size/epochs was accepted; steps won and energy per epoch divided by 3 epochs."""
    with pytest.raises(SpecError, match=r"^targets\.training: give either steps, or dataset_size and epochs, not both"):
        parse_spec(_targets({"training": {"dataset_size": 1000, "epochs": 3, "steps": 1000}}))


def test_counts_in_scientific_notation_are_read_as_numbers() -> None:
    """YAML reads `items: 5e6` (no dot) as the string '5e6': it was refused as "unable to parse string as an
    integer"; a whole number in that notation is the number, a fractional one is still refused."""
    w = parse_spec(_targets({"batch": {"items": "5e6", "deadline_hours": "1.5e1"}}))
    assert w.targets is not None and w.targets.batch is not None
    assert w.targets.batch.items == 5_000_000 and w.targets.batch.deadline_hours == 15.0
    t = parse_spec(_targets({"training": {"dataset_size": "1E6", "epochs": 3}})).targets
    assert t is not None and t.training is not None and t.training.dataset_size == 1_000_000
    with pytest.raises(SpecError, match=r"^targets\.batch\.items: .*fractional"):
        parse_spec(_targets({"batch": {"items": "2.5e0", "deadline_hours": 1}}))


def test_classic_ml_needs_no_goal() -> None:
    w = parse_spec(_targets({"kind": "classic_ml", "rows": 20_000_000}))
    assert w.targets is not None and w.targets.kind == "classic_ml" and w.targets.online is None


@pytest.mark.parametrize(
    ("targets", "words"),
    [
        # a 1-hour deadline on a rules plan had been accepted and left out of the answer without a word
        (
            {"kind": "classic_ml", "rows": 20_000_000, "batch": {"items": 20_000_000, "deadline_hours": 1}},
            "targets: batch cannot be checked: kind classic_ml is planned by rules",
        ),
        (
            {"kind": "etl", "data_gb": 50, "online": {"rate_per_s": 5, "latency": {"bound_ms": 100}}},
            "targets: online cannot be checked: kind etl is planned by rules",
        ),
        (
            {"rows": 10**6, "online": {"rate_per_s": 5, "latency": {"bound_ms": 100}}},
            "targets: rows sizes only kind: classic_ml or etl plans",
        ),
        (
            {"data_gb": 3, "online": {"rate_per_s": 5, "latency": {"bound_ms": 100}}},
            "targets: data_gb sizes only kind: classic_ml or etl plans",
        ),
    ],
)
def test_a_field_the_plan_would_ignore_is_refused(targets: dict, words: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(SpecError) as exc:
        parse_spec(_targets(targets))
    assert words in str(exc.value)


def test_no_warm_replica_without_scale_from_zero_is_refused_naming_both_fields() -> None:
    """sent8.yaml's cold_start {active_hours_per_day: 8, min_warm_replicas: 0} without scale_from_zero silently kept
    one replica warm: scale_from_zero is the switch (docs/planning.md), so the contradiction is refused at load."""
    online = {"rate_per_s": 10, "latency": {"bound_ms": 80}}
    with pytest.raises(SpecError) as err:
        parse_spec(_targets({"online": online, "cold_start": {"active_hours_per_day": 8, "min_warm_replicas": 0}}))
    assert str(err.value) == (
        "targets.cold_start: min_warm_replicas 0 keeps no replica warm, which needs scale_from_zero: true: set it "
        "(or drop min_warm_replicas to keep 1 warm)"
    )
    ok = parse_spec(_targets({"online": online, "cold_start": {"scale_from_zero": True, "min_warm_replicas": 0}}))
    assert ok.targets is not None and ok.targets.cold_start.min_warm_replicas == 0


def test_the_planning_docs_targets_table_matches_the_schema() -> None:
    """docs/planning.md's table made `kind`, `data_gb`, `rows` look top-level, gave `purchase` as "`on_demand`,
    `spot`" (not a list) and `online.latency` a default ("p95") though it is required: its examples must parse
    under `targets:`, every field of the goals be listed under its section, and every required one say so."""
    import re
    from pathlib import Path

    import yaml

    from rightsize.spec.targets import BatchTarget, OnlineTarget, Targets, TrainingTarget

    text = (Path(__file__).parents[2] / "docs" / "planning.md").read_text()
    section = text.split("## Targets (spec `targets:`)")[1].split("\n## ")[0]
    blocks = re.findall(r"```yaml\n(.*?)```", section, re.S)
    assert blocks
    for block in blocks:
        parse_spec({"model": "distilbert"} | yaml.safe_load(block))  # nested as the spec takes it
    rows = [[cell.strip() for cell in line.strip("|").split(" | ")] for line in section.splitlines()
            if line.startswith("| `")]  # fmt: skip
    assert "under `targets:`" in section.split("|---")[0]
    for name, model in (("online", OnlineTarget), ("batch", BatchTarget), ("training", TrainingTarget)):
        for field, info in model.model_fields.items():
            found = [r for r in rows if r[0].startswith(f"`{name}.") and re.search(rf"\b{field}\b", r[0])]
            assert found, f"{name}.{field} is not in the table"
            if info.is_required():
                assert any("required" in r[2] for r in found), f"{name}.{field} is required: {found}"
    for field in Targets.model_fields:
        assert any(re.search(rf"`{field}\b", r[0]) for r in rows), f"{field} is not in the table"
    purchase = next(r for r in rows if r[0] == "`purchase`")
    default = Targets.model_fields["purchase"].get_default(call_default_factory=True)
    assert f"`[{', '.join(default)}]`" in purchase[2] and "a list" in purchase[1]


def test_an_online_rate_below_one_request_in_12_days_is_refused_naming_the_fix() -> None:
    """`rate_per_s: 1e-13` was accepted (gt=0) and planned "predicted p95 0 ms (band 0-0 ms)" (arrivals 1e13 s
    apart lose the float precision of a request's time); 1e-300 priced in 300 digits. Generative's floor: 1e-6."""
    with pytest.raises(SpecError, match=r"^targets\.online\.rate_per_s: .*1e-13; set it to a number 1e-06 or more"):
        parse_spec(_targets({"online": {"rate_per_s": 1e-13, "latency": {"bound_ms": 120}}}))
    w = parse_spec(_targets({"online": {"rate_per_s": 1e-6, "latency": {"bound_ms": 120}}}))
    assert w.targets is not None and w.targets.online is not None and w.targets.online.rate_per_s == 1e-6
