import sqlite3
from pathlib import Path

import pytest

from rightsize.errors import NotFoundError, RightsizeError
from rightsize.profile import LatencyStats, Measurement
from rightsize.store import Store

ENV = {"id": "env1", "cpu_model": "test cpu", "gpus": []}


def _m(batch: int, status: str = "ok", env_id: str = "env1", p50: float = 10.0) -> Measurement:
    lat = LatencyStats(p50, p50 * 1.2, p50 * 1.3, p50, 1.0, 20) if status == "ok" else None
    return Measurement(
        "simplenet", "inference", "cpu", "fp32", batch, None, {}, status,  # type: ignore[arg-type]
        reason=None if status == "ok" else "out of memory: x", latency_ms=lat,
        throughput_per_s=batch * 1000 / p50 if lat else None, env_id=env_id,
    )  # fmt: skip


def test_roundtrip_and_reuse(store_path: Path) -> None:
    with Store(store_path) as s:
        s.save_env(ENV)
        run = s.start_run("bench", name="t", model="simplenet", env_id="env1")
        s.add_measurements(run, [_m(1), _m(8, p50=20.0), _m(32, "failed")])
        s.finish_run(run)
        found = s.find_measurement(_m(8).key, "env1")
        assert found is not None and found.latency_ms is not None
        assert found.latency_ms.p50 == 20.0 and found.throughput_per_s == pytest.approx(400.0)
        assert s.find_measurement(_m(32).key, "env1") is None  # failed results are not reused
        assert s.find_measurement(_m(8).key, "other-env") is None
        [info] = s.runs()
        assert (info.n_measurements, info.n_failed, info.status) == (3, 1, "done")
        [profile] = s.profiles()
        assert [m.batch_size for m in profile.ok()] == [1, 8]
        assert profile.env["cpu_model"] == "test cpu"


def test_newest_result_wins_and_survives_reopen(store_path: Path) -> None:
    with Store(store_path) as s:
        s.save_env(ENV)
        r1 = s.start_run("bench")
        s.add_measurements(r1, [_m(1, p50=10.0)])
        r2 = s.start_run("bench")
        s.add_measurements(r2, [_m(1, p50=12.0)])
    with Store(store_path) as s:
        m = s.find_measurement(_m(1).key, "env1")
        assert m is not None and m.latency_ms is not None and m.latency_ms.p50 == 12.0
        [profile] = s.profiles()
        assert len(profile.measurements) == 1


def test_failed_write_is_rolled_back(store_path: Path) -> None:
    with Store(store_path) as s:
        s.save_env(ENV)
        run = s.start_run("bench")
        s.add_measurements(run, [_m(1)])
        bad = _m(8, env_id=None)  # type: ignore[arg-type]
        with pytest.raises(ValueError):
            s.add_measurements(run, [_m(4), bad])
        assert [m.batch_size for m in s.measurements()] == [1]


def test_artifacts(store_path: Path) -> None:
    with Store(store_path) as s:
        a = s.save_artifact(None, "plan", {"name": "x", "cost": 1.5})
        [art] = s.artifacts("plan")
        assert art["id"] == a and art["payload"]["cost"] == 1.5
        assert s.run(art["run_id"]).kind == "plan"
        with pytest.raises(NotFoundError):
            s.run("zzzzzz")


def test_not_a_store_is_a_user_error(tmp_path: Path) -> None:
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"this is not sqlite at all" * 100)
    with pytest.raises(RightsizeError, match="not a rightsize store"):
        Store(junk)
    assert junk.read_bytes().startswith(b"this is not sqlite")  # left untouched


def test_newer_schema_is_refused(store_path: Path) -> None:
    Store(store_path).close()
    con = sqlite3.connect(store_path)
    con.execute("PRAGMA user_version = 99")
    con.close()
    with pytest.raises(RightsizeError, match="newer than this rightsize"):
        Store(store_path)


def test_read_only_store_never_writes(store_path: Path, tmp_path: Path) -> None:
    with pytest.raises(NotFoundError):
        Store(tmp_path / "absent.sqlite", read_only=True)
    assert not (tmp_path / "absent.sqlite").exists()
    with Store(store_path) as s:
        s.save_env(ENV)
    with Store(store_path, read_only=True) as ro:
        assert ro.envs()[0]["id"] == "env1"
        with pytest.raises(sqlite3.OperationalError):
            ro.save_env({"id": "env2"})
