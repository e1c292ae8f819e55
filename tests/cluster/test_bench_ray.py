"""Sweeps on a real two-node Ray cluster (127.0.0.1): placement, per-node fingerprints, retries, lost nodes."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from rightsize.cluster.bench import run_sweep_on_ray
from rightsize.measure.config import BenchConfig
from rightsize.measure.sweep import run_sweep
from rightsize.profile import Measurement
from rightsize.spec import parse_spec
from rightsize.store import Store

from .conftest import NODE_TYPES, LocalCluster

pytestmark = pytest.mark.ray

FAST = {"warmup": 1, "min_repeats": 3, "max_repeats": 10, "max_time_s": 1.0}


def _workload(batch_sizes: list[int]):  # type: ignore[no-untyped-def]
    return parse_spec({"model": "simplenet", "tiny": True, "batch_sizes": batch_sizes, "timing": FAST})


def test_configs_land_on_their_node_type_and_store_distinct_envs(ray_cluster: LocalCluster, tmp_path: Path) -> None:
    w = _workload([1, 4])
    with Store(tmp_path / "s.sqlite") as store:
        res = run_sweep_on_ray(w, store, address=ray_cluster.address, node_types=NODE_TYPES, progress=False)
        assert [m.status for m in res.measurements] == ["ok"] * 4, [m.reason for m in res.measurements]
        assert sorted(m.extra["instance_type"] for m in res.measurements) == [
            "local-a",
            "local-a",
            "local-b",
            "local-b",
        ]
        for m in res.measurements:  # measured by run_isolated inside the task, on the node of its type
            assert m.extra["ray_node_id"] == ray_cluster.node_id(NODE_TYPES[m.extra["instance_type"]])
            assert m.throughput_per_s and m.throughput_per_s > 0 and m.latency_ms is not None
        env_of = {m.extra["instance_type"]: m.env_id for m in res.measurements}
        assert len(set(env_of.values())) == 2  # one physical machine, two instance types: two environments
        envs = {e.id: e for e in store.envs()}
        for itype, env_id in env_of.items():
            assert envs[env_id].instance_type == itype
        assert envs[env_of["local-a"]].hardware_id == envs[env_of["local-b"]].hardware_id
        stored = store.measurements(run_id=res.run_id)
        assert sorted((m.env_id, m.batch_size) for m in stored) == sorted(
            (m.env_id, m.batch_size) for m in res.measurements
        )
        assert res.env.id == "cluster" and sorted(res.env.members) == sorted(env_of.values())

        # the in-process sweep's reuse rule: uncontended results are reused as stored, contended ones (two
        # tasks on one 2-core machine disturb each other) are measured again and kept only if better
        from rightsize.measure.quality import is_contended

        clean = [not is_contended(m) for m in res.measurements]
        again = run_sweep_on_ray(w, store, address=ray_cluster.address, node_types=NODE_TYPES, progress=False)
        assert again.reused >= sum(clean) and (again.run_id is None) == (again.reused == 4)
        for before, after, ok in zip(res.measurements, again.measurements, clean, strict=True):
            assert after.latency_ms == before.latency_ms or not ok


def test_cli_bench_on_ray_stores_the_records_an_in_process_run_reuses(
    ray_cluster: LocalCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from rightsize.cli.app import main

    spec = tmp_path / "tiny.yaml"
    spec.write_text(json.dumps({"model": "simplenet", "tiny": True, "batch_sizes": [2], "timing": FAST}))
    db = tmp_path / "s.sqlite"
    with pytest.raises(SystemExit) as exit_info:
        main(["bench", str(spec), "--ray", ray_cluster.address, "--json", "--store", str(db)])
    assert exit_info.value.code == 0
    records = json.loads(capsys.readouterr().out)
    assert [(r["batch_size"], r["status"]) for r in records] == [(2, "ok")]
    assert "instance_type" not in records[0]["extra"]  # no node_types: any node, the machine's own fingerprint
    with Store(db) as store:
        local = run_sweep(parse_spec(json.loads(spec.read_text())), store)
    # same key and env id as the in-process sweep: reused (unless timed while the machine was busy: measured again)
    assert local.reused == 1 or records[0]["extra"].get("contended")
    if local.run_id is None:  # nothing measured: the stored record itself
        assert local.measurements[0].throughput_per_s == pytest.approx(records[0]["throughput_per_s"])


def test_killed_worker_is_retried_then_recorded_failed_keeping_finished(
    ray_cluster: LocalCluster, tmp_path: Path
) -> None:
    marker = tmp_path / "killed-once"

    def measure(cfg: BenchConfig) -> Measurement:  # runs in the Ray worker: SIGKILL kills the worker itself
        if cfg.batch_size == 2 and not marker.exists():
            marker.touch()
            os.kill(os.getpid(), signal.SIGKILL)
        if cfg.batch_size == 3:
            os.kill(os.getpid(), signal.SIGKILL)
        return cfg.result("ok", throughput_per_s=100.0 * cfg.batch_size)

    with Store(tmp_path / "s.sqlite") as store:
        res = run_sweep_on_ray(
            _workload([1, 2, 3]), store, address=ray_cluster.address, node_types={"local-a": NODE_TYPES["local-a"]},
            max_retries=1, measure=measure, progress=False,
        )  # fmt: skip
        by_batch = {m.batch_size: m for m in res.measurements}
        assert by_batch[1].status == "ok" and by_batch[1].throughput_per_s == 100.0
        assert by_batch[2].status == "ok" and marker.exists()  # killed once, then retried on a new worker
        assert by_batch[2].extra.get("ray_attempt") == 2
        assert any("retried it 1 time" in n for n in res.notes), res.notes
        assert by_batch[3].status == "failed"
        assert "lost on the cluster after 1 retry" in (by_batch[3].reason or "")
        stored = {m.batch_size: m.status for m in store.measurements(run_id=res.run_id)}
        assert stored == {1: "ok", 2: "ok", 3: "failed"}


def test_lost_node_fails_its_jobs_and_keeps_finished(ray_cluster: LocalCluster, tmp_path: Path) -> None:
    node_c = ray_cluster.add_node("instance:local-c")
    first = tmp_path / "first-started"

    def measure(cfg: BenchConfig) -> Measurement:  # the first job is quick; the others outlast the node
        if first.exists():
            time.sleep(30.0)
        first.touch()
        return cfg.result("ok", throughput_per_s=1.0)

    removed: list[Measurement] = []

    def lose_node_after_first(cfg: BenchConfig, m: Measurement | None, reused: bool) -> None:
        if m is not None and not removed:
            removed.append(m)
            ray_cluster.cluster.remove_node(node_c)

    with Store(tmp_path / "s.sqlite") as store:
        res = run_sweep_on_ray(
            _workload([1, 2, 3]), store, address=ray_cluster.address, node_types={"local-c": "instance:local-c"},
            max_retries=1, lost_node_grace_s=1.0, measure=measure, on_progress=lose_node_after_first, progress=False,
        )  # fmt: skip
        statuses = sorted(m.status for m in res.measurements)
        assert statuses == ["failed", "failed", "ok"], [m.reason for m in res.measurements]
        for m in res.measurements:
            if m.status == "failed":
                assert "no alive node offers" in (m.reason or "") or "lost on the cluster" in (m.reason or "")
                assert m.extra["instance_type"] == "local-c"
        assert sorted(m.status for m in store.measurements(run_id=res.run_id)) == statuses
