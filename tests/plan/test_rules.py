"""Rules for classic ML and ETL: CPU, family by data size, with reasons."""

from __future__ import annotations

import pytest
from plan_fixtures import instance

from rightsize.plan.rules import cpu_family_class, plan_rules, rule_sizing

ROWS = [
    instance("c.4x", 0.68, vcpus=16, ram_gib=32),  # compute-optimised, 2 GiB/vCPU
    instance("m.4x", 0.81, vcpus=16, ram_gib=64),  # general
    instance("r.4x", 1.06, vcpus=16, ram_gib=128),  # memory-optimised
    instance("c.2x", 0.34, vcpus=8, ram_gib=16),
    instance("g.t4", 0.53, vcpus=4, ram_gib=16, acc="T4", count=1),
]


def test_family_classes() -> None:
    assert [cpu_family_class(i) for i in ROWS[:3]] == ["compute", "general", "memory"]


def test_gradient_boosting_20m_rows_goes_to_a_compute_optimised_cpu() -> None:
    cands, size = plan_rules(ROWS, "classic_ml", None, 20_000_000, ["on_demand"])
    assert size.data_bytes == pytest.approx(20e6 * 50 * 8)
    assert size.vcpus == 16 and size.family == "compute"
    rec = cands[0]
    assert rec.instance == "c.4x" and rec.feasible and rec.device_class == "cpu" and rec.provenance == "rule"
    gpu = next(c for c in cands if c.device_class == "gpu")
    assert not gpu.feasible and gpu.reasons[0].startswith("GPU rarely helps")
    small = next(c for c in cands if c.instance == "c.2x")
    assert not small.feasible and small.reasons[0].startswith("does not fit memory")


def test_memory_bound_etl_goes_to_a_memory_optimised_cpu() -> None:
    cands, size = plan_rules(ROWS, "etl", 12.0, None, ["on_demand"])  # 12 GB x 6 = 72 GB of RAM
    assert size.ram_bytes == pytest.approx(72e9)
    assert size.family == "memory"
    assert cands[0].instance == "r.4x"


def test_sizing_without_sizes_is_stated() -> None:
    size = rule_sizing("classic_ml", None, None)
    assert any("assumed" in a for a in size.assumptions)


def test_a_fallback_family_is_named_not_passed_off_as_the_wanted_one() -> None:
    """etl.yaml (50 GB) wanted memory-optimised and got gcp c3-standard-88, "first of 2 CPU instances that hold the
    data, with the wanted vCPUs and family", its note "general-optimised (4.0 GiB/vCPU)"."""
    from rightsize.plan.rules import rules_choice

    rows = [instance("m.big", 4.43, vcpus=88, ram_gib=352), instance("r.small", 5.0, vcpus=32, ram_gib=512)]
    cands, size = plan_rules(rows, "etl", 50.0, None, ["on_demand"])
    assert size.family == "memory" and size.vcpus == 50
    assert "memory-optimised family wanted (5.6 GiB per wanted vCPU)" in size.assumptions
    rec = cands[0]
    assert rec.instance == "m.big" and "general-purpose (4.0 GiB/vCPU)" in rec.notes
    assert rules_choice(rec, 2) == (
        "first of 2 CPU instances that hold the data, by price: no CPU instance holds the data with 50 vCPUs of the "
        "memory-optimised family; fell back to general-purpose (4.0 GiB/vCPU) with 88 vCPUs"
    )
    good, _ = plan_rules(ROWS, "etl", 12.0, None, ["on_demand"])
    assert rules_choice(good[0], 1).endswith("with the wanted vCPUs and family, by price")
