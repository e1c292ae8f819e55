"""Which node may run which measurement: resource demands, eligibility, node_types validation."""

from __future__ import annotations

import pytest

from rightsize.cluster.bench import plan_jobs, summary_env
from rightsize.cluster.nodes import (
    Node,
    Target,
    check_node_types,
    demand_for,
    instance_type_of,
    nodes_from_ray,
    targets_of,
)
from rightsize.errors import SpecError
from rightsize.measure.config import expand
from rightsize.profile import Environment, Gpu
from rightsize.spec import parse_spec

TYPES = {"c7i.2xlarge": "instance:c7i.2xlarge", "g5.xlarge": "instance:g5.xlarge"}
NODES = [
    Node("head", True, {"CPU": 8.0, "instance:c7i.2xlarge": 1.0}),
    Node("cpu2", True, {"CPU": 4.0, "instance:c7i.2xlarge": 1.0}),
    Node("gpu1", True, {"CPU": 4.0, "GPU": 1.0, "instance:g5.xlarge": 1.0}),
    Node("gone", False, {"CPU": 64.0, "GPU": 8.0, "instance:g5.xlarge": 1.0}),
]


def test_nodes_from_ray_rows() -> None:
    rows = [{"NodeID": "n1", "Alive": True, "Resources": {"CPU": 2, "instance:a": 1}}, {"NodeID": "n2", "Alive": False}]
    nodes = nodes_from_ray(rows)
    assert nodes[0] == Node("n1", True, {"CPU": 2.0, "instance:a": 1.0}) and not nodes[1].alive


def test_demand_reserves_the_smallest_nodes_cpus_and_the_type_resource() -> None:
    cpu = demand_for(NODES, Target("c7i.2xlarge", "instance:c7i.2xlarge"), "cpu")
    assert (
        cpu is not None and cpu.num_cpus == 4.0 and cpu.num_gpus == 0 and cpu.resources == {"instance:c7i.2xlarge": 1.0}
    )
    assert cpu.fits(NODES[0]) and cpu.fits(NODES[1]) and not cpu.fits(NODES[2])
    gpu = demand_for(NODES, Target("g5.xlarge", "instance:g5.xlarge"), "cuda")
    assert gpu is not None and gpu.num_gpus == 1.0 and gpu.num_cpus == 4.0  # the dead 64-CPU node does not count
    assert demand_for(NODES, Target("c7i.2xlarge", "instance:c7i.2xlarge"), "cuda") is None  # no GPU of that type
    anywhere = demand_for(NODES, Target(), "cpu")
    assert anywhere is not None and anywhere.num_cpus == 4.0 and anywhere.resources == {}
    assert "1 GPU" in gpu.describe() and "instance:g5.xlarge" in gpu.describe()


def test_instance_type_and_targets() -> None:
    assert instance_type_of(NODES[2], TYPES) == "g5.xlarge" and instance_type_of(Node("x", True, {}), TYPES) is None
    assert targets_of({}) == [Target()] and [t.instance_type for t in targets_of(TYPES)] == list(TYPES)


@pytest.mark.parametrize(
    ("types", "field"),
    [({"g5.xlarge": ""}, "node_types.g5.xlarge"), ({"": "instance:x"}, "node_types"), ({"g5": "GPU"}, "node_types.g5")],
)
def test_bad_node_types_name_the_field(types: dict[str, str], field: str) -> None:
    with pytest.raises(SpecError) as err:
        check_node_types(types)
    assert err.value.field == field


def test_plan_jobs_measures_each_config_per_type_and_notes_the_rest() -> None:
    w = parse_spec({"model": "simplenet", "tiny": True, "devices": ["cpu", "cuda"], "batch_sizes": [1, 8]})
    configs, _ = expand(w, "features", env_id="", has_cuda=True)
    types = {**TYPES, "m7i.large": "instance:m7i.large"}
    jobs, notes = plan_jobs(configs, targets_of(types), NODES)
    per_type = {(j.target.instance_type, j.cfg.device) for j in jobs}
    assert per_type == {("c7i.2xlarge", "cpu"), ("g5.xlarge", "cpu"), ("g5.xlarge", "cuda")}
    assert len(jobs) == 6 and [j.index for j in jobs] == list(range(6))
    assert any("m7i.large" in n and "no alive node" in n for n in notes)
    assert any("cuda configs on c7i.2xlarge skipped" in n for n in notes)


def test_summary_env() -> None:
    a = Environment("a", cpu_model="X", instance_type="t1")
    b = Environment("b", gpus=(Gpu("G"),))
    assert summary_env([a, a]) is a
    both = summary_env([a, b])
    assert both.id == "cluster" and both.members == ("a", "b") and both.gpus == (Gpu("G"),)
    assert "t1" in both.cpu_model
