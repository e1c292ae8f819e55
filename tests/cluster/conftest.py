"""A real local Ray cluster on 127.0.0.1, shared by every ``ray`` test of this directory.

Two nodes on this one machine stand for two instance types: the head advertises the custom
resource ``instance:local-a`` and a worker node ``instance:local-b``. The cluster is started once
(Ray start is slow) and always shut down, even when a test fails: ``Cluster.shutdown`` kills the
processes it started, then any Ray process still left among this process's descendants is killed
by pid (never by name, so other users' Ray processes on the machine are left alone).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import psutil
import pytest

OBJECT_STORE_BYTES = 100 * 1024**2  # small: the tests move little data and RAM is shared
NODE_TYPES = {"local-a": "instance:local-a", "local-b": "instance:local-b"}


@dataclass
class LocalCluster:
    cluster: Any  # ray.cluster_utils.Cluster
    address: str

    def node_id(self, resource: str) -> str:
        """The id of the alive node that advertises ``resource``."""
        import ray

        ids = [n["NodeID"] for n in ray.nodes() if n["Alive"] and n["Resources"].get(resource, 0) > 0]
        assert len(ids) == 1, (resource, ids)
        return str(ids[0])

    def add_node(self, resource: str) -> Any:
        return self.cluster.add_node(
            num_cpus=1, resources={resource: 1}, object_store_memory=OBJECT_STORE_BYTES, node_ip_address="127.0.0.1"
        )


_RAY_MARKERS = ("raylet", "gcs_server", "site-packages/ray/", "ray::", "default_worker.py")


def _kill_leftover_ray_processes() -> None:
    """Kill, by pid, Ray processes that are still descendants of this test process."""
    for proc in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            cmd = " ".join(proc.cmdline())
            if any(m in cmd for m in _RAY_MARKERS) or proc.name() in ("raylet", "gcs_server"):
                proc.kill()


@contextlib.contextmanager
def _env(name: str, value: str) -> Iterator[None]:
    old = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = old


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[LocalCluster]:
    os.environ.setdefault("RAY_memory_monitor_refresh_ms", "0")  # no OOM killer polling on a shared machine
    ray = pytest.importorskip("ray")
    from ray.cluster_utils import Cluster

    from rightsize.cluster.session import _keep_loopback, ray_session

    _keep_loopback(ray)  # 127.0.0.1 must not be rewritten to the outward IP (see rightsize.cluster.session)
    with contextlib.ExitStack() as outer:
        # A private Ray temp dir: our sessions and ray_current_cluster file stay out of /tmp/ray, so no other
        # program's ray.init() on this machine joins the test cluster (short path: Unix sockets live there).
        tmp = tempfile.mkdtemp(prefix="rsray-", dir="/tmp")
        outer.callback(shutil.rmtree, tmp, True)
        outer.enter_context(_env("RAY_TMPDIR", tmp))
        cluster = None
        session = contextlib.ExitStack()
        try:
            cluster = Cluster(
                initialize_head=True,
                head_node_args={
                    "num_cpus": 2, "resources": {"instance:local-a": 1}, "object_store_memory": OBJECT_STORE_BYTES,
                    "include_dashboard": False, "node_ip_address": "127.0.0.1",
                },
            )  # fmt: skip
            cluster.add_node(
                num_cpus=2, resources={"instance:local-b": 1}, object_store_memory=OBJECT_STORE_BYTES,
                node_ip_address="127.0.0.1",
            )  # fmt: skip
            session.enter_context(ray_session(cluster.address))
            yield LocalCluster(cluster, cluster.address)
        finally:
            session.close()  # ray.shutdown() before the nodes go
            if cluster is not None:
                with contextlib.suppress(Exception):
                    cluster.shutdown()
            _kill_leftover_ray_processes()
