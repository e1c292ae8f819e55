import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from rightsize.errors import NotFoundError, RightsizeError
from rightsize.profile import Latency, Measurement
from rightsize.store import Store

ENV = {"id": "env1", "cpu_model": "test cpu", "gpus": []}


def _m(batch: int, status: str = "ok", env_id: str = "env1", p50: float = 10.0) -> Measurement:
    lat = Latency(p50, p50 * 1.2, p50 * 1.3, p50, 1.0, 20) if status == "ok" else None
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
        assert profile.env.cpu_model == "test cpu"


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


def test_a_contended_result_never_hides_an_older_clean_one(store_path: Path) -> None:
    """`bench --fresh` beside CPU hogs stored 157 ms (contended) over a clean 32.6 ms: the clean one stays the
    config's result, for reuse, for the sweep's GFLOP/s reference and for plans; a newer clean one or a failure
    still replaces it."""
    clean, busy = _m(1, p50=32.6), _m(1, p50=157.0)
    busy = Measurement.from_dict(busy.to_dict() | {"extra": {"contended": True, "contention": 0.53}})
    with Store(store_path) as s:
        s.save_env(ENV)
        s.add_measurements(s.start_run("bench"), [clean])
        s.add_measurements(s.start_run("bench"), [busy])
        found = s.find_measurement(clean.key, "env1")
        assert found is not None and found.latency_ms is not None and found.latency_ms.p50 == 32.6
        [profile] = s.profiles()
        [m] = profile.measurements
        assert m.latency_ms is not None and m.latency_ms.p50 == 32.6
        s.add_measurements(s.start_run("bench"), [_m(1, p50=30.0)])  # quiet again: the newer clean one wins
        found = s.find_measurement(clean.key, "env1")
        assert found is not None and found.latency_ms is not None and found.latency_ms.p50 == 30.0
        s.add_measurements(s.start_run("bench"), [_m(1, "failed")])
        [profile] = s.profiles()
        assert [m.status for m in profile.measurements] == ["failed"]  # a newer failure is still the answer
    with Store(store_path.with_name("busy.sqlite")) as s:
        s.save_env(ENV)
        s.add_measurements(s.start_run("bench"), [busy])
        assert s.find_measurement(busy.key, "env1") == busy  # contended, but all there is


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
        assert art["run_id"] == a  # "stored as plan ID" and `results` list one id, not two
        run = s.start_run("bench")
        assert s.save_artifact(run, "loadtest", {"p": 1}) != run  # attached to a run it did not make: its own id
        with pytest.raises(NotFoundError):
            s.run("zzzzzz")


def test_not_a_store_is_a_user_error(tmp_path: Path) -> None:
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"this is not sqlite at all" * 100)
    with pytest.raises(RightsizeError, match="not a rightsize store"):
        Store(junk)
    assert junk.read_bytes().startswith(b"this is not sqlite")  # left untouched


def test_a_damaged_store_is_refused_before_anything_is_read_or_written(store_path: Path) -> None:
    with Store(store_path) as s:
        for i in range(40):  # enough rows for several pages
            s.save_artifact(None, "note", {"name": f"n{i}", "pad": "x" * 400})
    data = bytearray(store_path.read_bytes())
    data[4096 : 4096 + 8192] = b"\xab" * 8192  # pages overwritten: SQLite still opens the file
    store_path.write_bytes(bytes(data))
    for read_only in (True, False):
        with pytest.raises(RightsizeError, match=r"is damaged \(.*\); nothing was read from or written to it"):
            Store(store_path, read_only=read_only)
    assert store_path.read_bytes() == bytes(data)  # not written to


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
        assert ro.envs()[0].id == "env1"
        with pytest.raises(sqlite3.OperationalError):
            ro.save_env({"id": "env2"})


def _store_child(store_path: Path, body: str) -> subprocess.Popen[str]:
    """A Python child with ``s = Store(store_path)`` open, running ``body``; its stdout is piped."""
    code = f"import sys, time\nfrom rightsize.store import Store\ns = Store(sys.argv[1])\n{body}"
    child = subprocess.Popen([sys.executable, "-c", code, str(store_path)], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    return child


def test_a_killed_run_is_closed_as_interrupted_on_next_open(store_path: Path) -> None:
    import signal

    Store(store_path).close()
    child = _store_child(store_path, "print(s.start_run('bench'), flush=True)\ntime.sleep(60)")
    run_id = child.stdout.readline().strip()
    with Store(store_path) as s:
        assert s.run(run_id).status == "running"  # its process is alive: left alone
    child.send_signal(signal.SIGKILL)
    child.wait(10)
    with Store(store_path, read_only=True) as s:  # `results` had shown it running until a command wrote the store
        assert s.run(run_id).status == "interrupted" and s.run(run_id).finished_at is None
    with Store(store_path) as s:
        info = s.run(run_id)
        assert info.status == "interrupted" and info.finished_at is not None
        mine = s.start_run("bench")
        assert s.close_dead_runs() == 0 and s.run(mine).status == "running"


def test_unknown_fields_in_a_stored_row_are_ignored(store_path: Path) -> None:
    import json

    with Store(store_path) as s:
        s.save_env(ENV)
        run = s.start_run("bench")
        s.add_measurements(run, [_m(1)])
    con = sqlite3.connect(store_path)
    [(raw,)] = con.execute("SELECT json FROM measurements").fetchall()
    d = json.loads(raw)
    d["from_the_future"] = 1
    d["latency_ms"]["p999"] = 99.0
    con.execute("UPDATE measurements SET json = ?", (json.dumps(d),))
    con.commit()
    con.close()
    with Store(store_path) as s:
        [m] = s.measurements()
        assert m.latency_ms is not None and m.latency_ms.p50 == 10.0
        assert len(s.profiles()) == 1


@pytest.mark.slow  # seconds: make test runs it, make test-fast skips it
def test_sweeps_on_one_store_take_turns(store_path: Path) -> None:
    import time

    holder = _store_child(store_path, "with s.sweep_lock():\n    print('locked', flush=True)\n    time.sleep(1.5)")
    assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
    waited: list[bool] = []
    t0 = time.perf_counter()
    with Store(store_path) as s, s.sweep_lock(lambda: waited.append(True)):
        elapsed = time.perf_counter() - t0
    holder.wait(10)
    assert waited == [True] and elapsed > 0.5


def test_a_store_in_a_folder_this_user_cannot_write_is_still_read(tmp_path: Path) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    with Store(folder / "s.sqlite") as s:
        s.save_artifact(None, "note", {"name": "keep"})
    root = os.geteuid() == 0  # root writes through mode bits: make the folder immutable instead
    lock = ["chattr", "+i", str(folder)] if root else ["chmod", "555", str(folder)]
    unlock = ["chattr", "-i", str(folder)] if root else ["chmod", "755", str(folder)]
    if subprocess.run(lock, capture_output=True).returncode != 0:
        pytest.skip("cannot make a read-only folder here")
    try:
        if os.access(folder, os.W_OK):
            pytest.skip("the folder stayed writable")
        with Store(folder / "s.sqlite", read_only=True) as s:  # was "not a rightsize store (unable to open ...)"
            assert [a["payload"]["name"] for a in s.artifacts("note")] == ["keep"]
    finally:
        subprocess.run(unlock, capture_output=True)


def test_a_disk_that_fills_during_a_write_is_one_line_and_keeps_what_was_stored(store_path: Path) -> None:
    """A sweep that filled the disk ended in sqlite3's traceback from COMMIT (exit 1), its transaction left open.
    SQLite's page limit stands in for the full disk: it fails writes with the same "database or disk is full"."""
    with Store(store_path) as s:
        s.save_env(ENV)
        run = s.start_run("bench")
        s.add_measurements(run, [_m(1)])
        pages = s._conn.execute("PRAGMA page_count").fetchone()[0]
        s._conn.execute(f"PRAGMA max_page_count = {pages}")
        big = [_m(b, p50=10.0 + b) for b in range(2, 3000)]
        with pytest.raises(RightsizeError) as exc:
            s.add_measurements(run, big)
        assert str(exc.value) == (
            f"--store: the disk holding {str(store_path)!r} is full (database or disk is full); this write was "
            "undone, and what was stored before is intact: free space and run again"
        )
        assert not s._conn.in_transaction
    with Store(store_path) as s:
        assert [m.batch_size for m in s.measurements()] == [1]  # none of the failed write, all of before it


def test_a_stored_fingerprint_gains_the_fields_a_newer_one_records(store_path: Path) -> None:
    """The id leaves cpu_signature out, so a store's older record of this machine kept lacking it, and the plan read
    that record: the newer fingerprint's field joins it, its own fields kept."""
    with Store(store_path) as s:
        s.save_env({**ENV, "hostname": "first"})
        s.save_env({**ENV, "hostname": "second", "cpu_signature": "25/17"})
        env = s.env("env1")
        assert env.cpu_signature == "25/17" and env.hostname == "first"
        s.save_env(ENV)
        assert s.env("env1").cpu_signature == "25/17" and len(s.envs()) == 1
