"""A node's environment fingerprint: the machine's (``rightsize.measure.env``) plus its instance type.

When a node is mapped to an instance type (``node_types``), the instance type joins the hashed
fields, so results are stored per instance type and the planner can use them as ``measured`` for
it. This also keeps apart two nodes that share one physical machine but stand for different
instance types (the test cluster). The Ray node id is not hashed: it changes every time a cluster
starts, and results must be reused across runs; it goes in ``Measurement.extra["ray_node_id"]``.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace

from rightsize.profile import Environment


def tag_env(env: Environment, instance_type: str | None) -> Environment:
    """``env`` tagged with ``instance_type`` and an id that hashes it (``hardware_id`` keeps the machine's)."""
    if not instance_type:  # unmapped nodes keep the in-process fingerprint exactly, so results are shared
        return env
    new_id = hashlib.sha256(f"{env.id}|instance_type={instance_type}".encode()).hexdigest()[:12]
    return replace(env, id=new_id, instance_type=instance_type, hardware_id=env.id)


def node_fingerprint(instance_type: str | None) -> Environment:
    """This process's machine fingerprint, tagged with the node's instance type (runs inside a Ray task)."""
    from rightsize.measure.env import fingerprint

    return tag_env(fingerprint(), instance_type)
