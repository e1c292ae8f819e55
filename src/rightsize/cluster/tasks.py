"""What runs inside a Ray worker: fingerprint the node, then measure one config on it.

Plain functions (``ray.remote`` wraps them in the driver), so workers import only this module and
what it needs. The config runs through ``measure_config`` — ``run_isolated`` in a forkserver child of
the Ray worker, re-measured while contended — so an out-of-memory error or crash fails that config
only, and a busy node is retried, exactly as in the in-process sweep.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from rightsize.cluster.fingerprint import node_fingerprint
from rightsize.measure.config import BenchConfig
from rightsize.profile import Measurement

MeasureFn = Callable[[BenchConfig], Measurement]  # default: rightsize.measure.runner.run_isolated


def current_node_id() -> str:
    import ray

    return str(ray.get_runtime_context().get_node_id())


def fingerprint_task(instance_type: str | None) -> dict[str, Any]:
    """``{"env", "node_id"}`` of the node this runs on."""
    return {"env": node_fingerprint(instance_type).to_dict(), "node_id": current_node_id()}


class AttemptCounter:
    """A Ray actor (``ray.remote(AttemptCounter)``) counting how often each job started: Ray retries a
    task whose worker died without telling the task, so the task asks here which attempt it is."""

    def __init__(self) -> None:
        self.started: dict[int, int] = {}

    def start(self, index: int) -> int:
        self.started[index] = self.started.get(index, 0) + 1
        return self.started[index]


def measure_task(
    cfg_dict: dict[str, Any],
    instance_type: str | None,
    measure: MeasureFn | None = None,
    counter: Any = None,
    index: int = 0,
    best_gflops: float | None = None,
) -> dict[str, Any]:
    """Measure one config on this node: ``{"env", "node_id", "measurement"}`` (plain dicts).

    The measurement carries the node's env id, and in ``extra`` the Ray node id, (when the node
    stands for one) the instance type and, with a ``counter``, ``ray_attempt`` (1: first try).
    """
    attempt = None
    if counter is not None:
        import ray

        attempt = int(ray.get(counter.start.remote(index)))
    env = node_fingerprint(instance_type)
    node_id = current_node_id()
    cfg = dataclasses.replace(BenchConfig.from_dict(cfg_dict), env_id=env.id)
    from rightsize.measure.sweep import measure_config

    m = measure_config(cfg, best_gflops=best_gflops, runner=measure)
    extra = {**m.extra, "ray_node_id": node_id} | ({"instance_type": instance_type} if instance_type else {})
    if attempt is not None:
        extra["ray_attempt"] = attempt
    m = dataclasses.replace(m, env_id=env.id, extra=extra)
    return {"env": env.to_dict(), "node_id": node_id, "measurement": m.to_dict()}
