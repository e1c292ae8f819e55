"""Which node may run which measurement: pure functions over the cluster's node list (no ray import).

A spec's optional ``node_types`` maps an instance type to a Ray custom resource that the nodes of
that type advertise, e.g. ``{"g5.xlarge": "instance:g5.xlarge"}`` with
``ray start --resources='{"instance:g5.xlarge": 1}'`` on each g5.xlarge node.

One measurement at a time per node: a measurement task reserves all the CPUs of the smallest
eligible node (and the whole ``instance:*`` amount a node advertises), so two configs never share
cores and disturb each other's timing. CUDA configs also take one GPU.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rightsize.errors import SpecError


@dataclass(frozen=True)
class Node:
    node_id: str
    alive: bool
    resources: dict[str, float]  # total logical resources: CPU, GPU, memory, custom ("instance:g5.xlarge")

    @property
    def cpus(self) -> float:
        return self.resources.get("CPU", 0.0)

    @property
    def gpus(self) -> float:
        return self.resources.get("GPU", 0.0)


@dataclass(frozen=True)
class Target:
    """A node type a config is measured on: an instance type and its resource, or any node (None, None)."""

    instance_type: str | None = None
    resource: str | None = None

    @property
    def label(self) -> str:
        return self.instance_type or "any node"


@dataclass(frozen=True)
class Demand:
    """The Ray resources one measurement task requests."""

    num_cpus: float
    num_gpus: float = 0.0
    resources: dict[str, float] = field(default_factory=dict)

    def fits(self, node: Node) -> bool:
        if not node.alive or node.cpus < self.num_cpus or node.gpus < self.num_gpus:
            return False
        return all(node.resources.get(k, 0.0) >= v for k, v in self.resources.items())

    def describe(self) -> str:
        parts = [f"{self.num_cpus:g} CPU"] + ([f"{self.num_gpus:g} GPU"] if self.num_gpus else [])
        return ", ".join(parts + [f"{v:g} {k}" for k, v in self.resources.items()])


def nodes_from_ray(raw: Iterable[Mapping[str, Any]]) -> list[Node]:
    """``ray.nodes()`` rows -> Nodes (dead nodes included, ``alive`` False)."""
    out = []
    for r in raw:
        resources = {k: float(v) for k, v in r.get("Resources", {}).items()}
        out.append(Node(str(r["NodeID"]), bool(r.get("Alive", r.get("alive", False))), resources))
    return out


def check_node_types(node_types: Mapping[str, str] | None) -> dict[str, str]:
    """Validated ``{instance type: resource name}`` (empty when not given)."""
    out: dict[str, str] = {}
    for itype, res in (node_types or {}).items():
        if not isinstance(itype, str) or not itype.strip():
            raise SpecError("node_types", f"instance type names must be non-empty strings, got {itype!r}")
        if not isinstance(res, str) or not res.strip():
            raise SpecError(
                f"node_types.{itype}", f"must name a Ray custom resource such as 'instance:{itype}', got {res!r}"
            )
        if res in ("CPU", "GPU", "memory", "object_store_memory"):
            raise SpecError(
                f"node_types.{itype}",
                f"{res!r} is a built-in Ray resource; use a custom one such as 'instance:{itype}'",
            )
        out[itype] = res
    return out


def targets_of(node_types: Mapping[str, str]) -> list[Target]:
    """Every configured node type, or one catch-all target when none is configured."""
    return [Target(it, res) for it, res in node_types.items()] or [Target()]


def instance_type_of(node: Node, node_types: Mapping[str, str]) -> str | None:
    """The first configured instance type whose resource the node advertises."""
    for itype, res in node_types.items():
        if node.resources.get(res, 0.0) > 0:
            return itype
    return None


def eligible_nodes(nodes: Iterable[Node], target: Target, device: str) -> list[Node]:
    """Alive nodes of the target type that can run a config on ``device`` (cuda needs a GPU)."""
    return [
        n
        for n in nodes
        if n.alive
        and (target.resource is None or n.resources.get(target.resource, 0.0) > 0)
        and (device != "cuda" or n.gpus >= 1)
        and (device == "cuda" or n.cpus > 0)
    ]


def demand_for(nodes: Iterable[Node], target: Target, device: str) -> Demand | None:
    """What a task of this target and device requests; None when no alive node could run it.

    All CPUs of the smallest eligible node (one measurement per node at a time), the whole per-node
    amount of the target's custom resource, and one GPU for cuda.
    """
    pool = eligible_nodes(nodes, target, device)
    if not pool:
        return None
    cpus = min(n.cpus for n in pool)
    resources = {target.resource: min(n.resources[target.resource] for n in pool)} if target.resource else {}
    return Demand(num_cpus=cpus, num_gpus=1.0 if device == "cuda" else 0.0, resources=resources)
