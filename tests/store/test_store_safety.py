"""A store path that cannot be used (unwritable, another application's database, a directory) is refused in one line
before any work, and the file is left byte for byte as it was."""

from __future__ import annotations

import os
import sqlite3
import subprocess
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest
from cli_kit import run_cli as _run

from rightsize.errors import RightsizeError
from rightsize.report.dashboard import make_server
from rightsize.store import Store

ROOT = os.geteuid() == 0  # root writes through mode bits: an immutable flag (chattr +i) stands in for them


@contextmanager
def _unwritable(path: Path) -> Iterator[None]:
    """``path`` (a file or a folder) made unwritable for this user, or the test skipped where that cannot be."""
    lock = ["chattr", "+i", str(path)] if ROOT else ["chmod", "a-w", str(path)]
    unlock = ["chattr", "-i", str(path)] if ROOT else ["chmod", "u+w", str(path)]
    try:
        if subprocess.run(lock, capture_output=True).returncode != 0:
            pytest.skip(f"cannot make {path.name} read-only here")
    except FileNotFoundError:
        pytest.skip("no chattr/chmod here")
    try:
        if os.access(path, os.W_OK):
            pytest.skip(f"{path.name} stayed writable")
        yield
    finally:
        subprocess.run(unlock, capture_output=True)


def _store(path: Path) -> bytes:
    with Store(path) as s:
        s.save_artifact(None, "note", {"name": "keep"})
    return path.read_bytes()


def test_an_unwritable_store_file_is_refused_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "ro.sqlite"
    before = _store(path)
    with _unwritable(path):
        with pytest.raises(RightsizeError, match=r"--store: cannot write '.*ro\.sqlite' .*point --store or "):
            Store(path)
        # was 42 lines of sqlite3.OperationalError "attempt to write a readonly database", exit 1
        rc, out, err = _run(["plan", "examples/gradient-boosting.yaml", "--store", str(path)], capsys)
        assert rc == 2 and err.startswith("error: --store: cannot write") and err.count("\n") == 1, err
        assert "RIGHTSIZE_STORE" in err and "Traceback" not in err and not out
        with Store(path, read_only=True) as s:  # reading it still works
            assert [a["payload"]["name"] for a in s.artifacts("note")] == ["keep"]
        rc, out, err = _run(["results", "--store", str(path)], capsys)
        assert rc == 0 and "note" in out, err
    assert path.read_bytes() == before


def test_a_store_in_an_unwritable_folder_is_refused_for_writing(tmp_path: Path) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    path = folder / "s.sqlite"
    before = _store(path)
    with _unwritable(folder):
        if not os.access(path, os.W_OK):
            pytest.skip("the file itself became unwritable")
        # the file is writable, its folder is not: SQLite cannot make the side files a write needs
        with pytest.raises(RightsizeError, match=r"--store: cannot write .*make it and its folder writable"):
            Store(path)
        with Store(path, read_only=True) as s:
            assert len(s.artifacts("note")) == 1
    assert path.read_bytes() == before


def _foreign(path: Path, *, version: int = 0, table: str = "CREATE TABLE foo (x INTEGER)") -> bytes:
    con = sqlite3.connect(path)
    con.execute(table)
    con.execute(f"PRAGMA user_version = {version}")
    con.commit()
    con.close()
    return path.read_bytes()


@pytest.mark.parametrize(
    ("version", "table"),
    [
        (0, "CREATE TABLE foo (x INTEGER)"),  # another app's database, no schema version
        (0, "CREATE VIEW v AS SELECT 1"),  # nothing but a view
        (1, "CREATE TABLE foo (x INTEGER)"),  # another app's versioned database: v1 but not rightsize's tables
    ],
)
def test_another_applications_database_is_never_migrated(tmp_path: Path, version: int, table: str) -> None:
    path = tmp_path / "other.db"
    before = _foreign(path, version=version, table=table)
    with pytest.raises(RightsizeError, match=r"is not a rightsize store \(.*left untouched\); pass another path"):
        Store(path)
    assert path.read_bytes() == before  # no tables added, user_version and journal mode as they were
    assert not Path(f"{path}-wal").exists()
    con = sqlite3.connect(path)
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    assert con.execute("PRAGMA user_version").fetchone()[0] == version
    con.close()


def test_another_applications_database_via_the_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "other.db"
    before = _foreign(path)
    rc, _, err = _run(["plan", "examples/gradient-boosting.yaml", "--store", str(path)], capsys)
    assert rc == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert "is not a rightsize store (another application's database: it holds tables foo" in err
    assert path.read_bytes() == before


def test_an_empty_file_still_becomes_a_store(tmp_path: Path) -> None:
    path = tmp_path / "new.sqlite"
    path.touch()  # e.g. made by `touch` or mktemp: no tables, user_version 0
    with Store(path) as s:
        s.save_artifact(None, "note", {"name": "n"})
    with Store(path, read_only=True) as s:
        assert len(s.artifacts("note")) == 1


@pytest.mark.parametrize("read_only", [True, False])
def test_a_directory_is_named_as_one(tmp_path: Path, read_only: bool) -> None:
    with pytest.raises(RightsizeError, match=r"is a directory, not a store file; point --store or RIGHTSIZE_STORE at"):
        Store(tmp_path, read_only=read_only)


@pytest.mark.parametrize("command", ["results", "dashboard", "plan"])
def test_a_directory_store_says_to_give_a_file_path(
    tmp_path: Path, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [command] + (["examples/gradient-boosting.yaml"] if command == "plan" else []) + ["--store", str(tmp_path)]
    rc, _, err = _run(argv, capsys)
    assert rc == 2 and err.count("\n") == 1, err
    assert f"'{tmp_path}' is a directory, not a store file; point --store or RIGHTSIZE_STORE at a file path" in err
    assert "first" not in err  # was "run `rightsize bench SPEC` first": no run makes a directory a store
    assert list(tmp_path.iterdir()) == []


def test_the_dashboard_still_says_when_there_is_no_store(tmp_path: Path) -> None:
    with pytest.raises(RightsizeError, match=r"no results store at .*; run `rightsize bench SPEC` first"):
        make_server(tmp_path / "absent.sqlite").server_close()


_OPEN_AT = """
import sys, time
from rightsize.errors import RightsizeError
from rightsize.store import Store
time.sleep(max(0.0, float(sys.argv[2]) - time.time()))
for path in sys.argv[3:]:
    time.sleep(max(0.0, float(sys.argv[2]) + float(path.rsplit("/", 1)[1].split(".")[0]) * 0.5 - time.time()))
    try:
        Store(path).close()
        print("ok")
    except RightsizeError as exc:
        print(exc)
"""


@pytest.mark.slow  # a few seconds: make test runs it, test-fast does not
def test_processes_opening_a_new_store_at_once_all_get_it(tmp_path: Path) -> None:
    """Two `bench` runs on a fresh RIGHTSIZE_STORE: one read v0 outside the migration's transaction and re-ran the
    other's CREATE TABLE, reported as "not a rightsize store (table envs already exists)"."""
    import sys
    import time

    paths = [str(tmp_path / f"{trial}.sqlite") for trial in range(8)]  # trial i opens at start + 0.5 i s
    start = str(time.time() + 3.0)  # every child has imported rightsize by then
    children = [subprocess.Popen([sys.executable, "-c", _OPEN_AT, "x", start, *paths], stdout=subprocess.PIPE,
                                 text=True) for _ in range(4)]  # fmt: skip
    answers = [line for c in children for line in c.communicate(timeout=120)[0].splitlines()]
    assert answers == ["ok"] * 32


def test_a_device_or_an_unreachable_path_is_refused_in_one_line(tmp_path: Path) -> None:
    """/dev/null as the store left /dev/null-journal behind; a name too long was an OSError traceback."""
    with pytest.raises(RightsizeError, match=r"^--store: '/dev/null' is a device or pipe, not a store file"):
        Store("/dev/null")
    with pytest.raises(RightsizeError, match=r"^--store: '/dev/null' is a device or pipe"):
        Store("/dev/null", read_only=True)
    assert not Path("/dev/null-journal").exists()
    (tmp_path / "small.yaml").write_text("name: x\n")  # a store path under a file: "([Errno 17] File exists: ...)"
    with pytest.raises(RightsizeError, match=r"^--store: cannot open .*x\.db': '.*small\.yaml' is a file, not a"):
        Store(tmp_path / "small.yaml" / "deeper" / "x.db")
    with pytest.raises(RightsizeError, match=r"^--store: cannot open .*File name too long"):
        Store(tmp_path / ("b" * 300) / "x.sqlite")


def _tampered(path: Path, sql: str) -> Path:
    """A store made by rightsize, then changed by ``sql`` behind its back."""
    _store(path)
    con = sqlite3.connect(path)
    con.execute(sql)
    con.close()
    return path


def test_a_read_only_open_checks_the_schema_too(tmp_path: Path) -> None:
    """A dropped table was a traceback from every `results`; a newer store was read without a word."""
    path = _tampered(tmp_path / "s.sqlite", "DROP TABLE measurements")
    with pytest.raises(RightsizeError, match="schema v2 but no table measurements"):
        Store(path, read_only=True)
    path2 = _tampered(tmp_path / "s2.sqlite", "PRAGMA user_version = 99")
    for read_only in (True, False):
        with pytest.raises(RightsizeError, match=r"has schema v99, newer than this rightsize's .*: upgrade rightsize"):
            Store(path2, read_only=read_only)


def test_a_negative_schema_version_is_refused_untouched(tmp_path: Path) -> None:
    """``PRAGMA user_version = -5`` passed as an old store, and the migration loop ran ``_MIGRATIONS[-5]``."""
    path = _tampered(tmp_path / "s.sqlite", "PRAGMA user_version = -5")
    before = path.read_bytes()
    for read_only in (True, False):
        with pytest.raises(RightsizeError, match=r"is not a rightsize store \(schema v-5 is not one rightsize writes"):
            Store(path, read_only=read_only)
    assert path.read_bytes() == before


def test_a_sweep_lock_that_cannot_be_opened_is_one_line(tmp_path: Path) -> None:
    """A folder named like the lock file was an IsADirectoryError traceback after the progress bar started."""
    path = tmp_path / "s.sqlite"
    (tmp_path / "s.sqlite.lock").mkdir()
    with (
        Store(path) as st,
        pytest.raises(RightsizeError, match=r"^--store: cannot open the sweep lock .*Is a dir"),
        st.sweep_lock(),
    ):
        pass


def test_a_damaged_row_is_named_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """One measurement's JSON overwritten made every read of the store a JSONDecodeError traceback; a plan stored
    as a JSON list failed `report` with an AttributeError."""
    path = tmp_path / "s.sqlite"
    _store(path)
    con = sqlite3.connect(path)
    con.execute("UPDATE artifacts SET json = '[]'")
    con.commit()
    con.close()
    rc, out, err = _run(["results", "--export", str(tmp_path / "x.json"), "--store", str(path)], capsys)
    assert (rc, out) == (2, "")
    assert err.startswith("error: --store: row ") and "of table artifacts is damaged (TypeError: a JSON list" in err
    assert len(err.strip().splitlines()) == 1


def test_commits_left_in_the_wal_of_a_read_only_folder_are_not_skipped_silently(tmp_path: Path) -> None:
    """A store copied with its -wal (no -shm) into a read-only folder: the immutable read skipped the commits in the
    -wal, so `results` listed the store without its newest runs, and said nothing."""
    import shutil

    src, folder = tmp_path / "src", tmp_path / "ro"
    src.mkdir()
    folder.mkdir()
    s = Store(src / "s.sqlite")
    s.save_artifact(None, "note", {"name": "in the wal"})  # committed; the open connection keeps it in -wal
    shutil.copy(src / "s.sqlite", folder / "s.sqlite")
    shutil.copy(src / "s.sqlite-wal", folder / "s.sqlite-wal")
    s.close()
    assert (folder / "s.sqlite-wal").stat().st_size > 0
    with _unwritable(folder), pytest.raises(RightsizeError, match="has commits in its -wal file that this user"):
        Store(folder / "s.sqlite", read_only=True)


def test_sweeps_through_a_symlink_and_the_real_path_share_one_lock(tmp_path: Path) -> None:
    """`--store link.sqlite` and `--store store.sqlite` locked link.sqlite.lock and store.sqlite.lock: both swept."""
    real = tmp_path / "store.sqlite"
    Store(real).close()
    link = tmp_path / "link.sqlite"
    link.symlink_to(real)
    waited: list[bool] = []
    with Store(real) as a, a.sweep_lock():
        import threading

        def second() -> None:
            with Store(link) as b, b.sweep_lock(lambda: waited.append(True)):
                pass

        t = threading.Thread(target=second)
        t.start()
        t.join(0.5)
        assert waited == [True]  # it waits for the first, as with one path
    t.join(10)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.endswith(".lock")) == ["store.sqlite.lock"]


def test_an_empty_store_file_and_a_hot_journal_are_named_for_what_they_are(tmp_path: Path) -> None:
    """Both read "not a rightsize store (...)", which sends a user to look for another path: an empty file is a store
    not yet written (bench or plan makes it one), and a -journal is a write a read-only open cannot roll back."""
    empty = tmp_path / "empty.sqlite"
    empty.touch()
    with pytest.raises(RightsizeError, match=r"is empty, not yet a rightsize store; a command that stores results"):
        Store(empty, read_only=True)
    Store(empty).close()  # a writable command makes it one
    folder = tmp_path / "ro"
    folder.mkdir()
    before = _store(folder / "s.sqlite")
    (folder / "s.sqlite-journal").write_bytes(os.urandom(4096))  # a hot journal: its header is not SQLite's zeros
    with pytest.raises(RightsizeError, match=r"has a -journal file left by an interrupted write, which a read-only"):
        Store(folder / "s.sqlite", read_only=True)
    assert (folder / "s.sqlite").read_bytes() == before


def test_a_store_that_cannot_be_opened_for_a_full_disk_is_not_called_foreign(tmp_path: Path) -> None:
    """A file-size limit (or a full disk) read "is not a rightsize store (disk I/O error); pass another path": the
    store was fine, and the message invited throwing it away."""
    import resource
    import sys

    path = tmp_path / "s.sqlite"
    Store(path).close()
    before = path.read_bytes()

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (20 * 1024, 20 * 1024))  # the WAL index (32 KiB) cannot be made

    code = "from rightsize.cli.app import main; main(['results', '--limit', '1'])"
    proc = subprocess.run([sys.executable, "-c", code], env=os.environ | {"RIGHTSIZE_STORE": str(path)},
                          capture_output=True, text=True, timeout=120, preexec_fn=limit)  # fmt: skip
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "a full disk or a file-size limit?); nothing in it was changed" in proc.stderr
    assert "not a rightsize store" not in proc.stderr and path.read_bytes() == before


@contextmanager
def _locked_by_another(path: Path) -> Iterator[None]:
    """``path`` held by another connection's write lock (BEGIN EXCLUSIVE), as another process writing to it."""
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")
    try:
        yield
    finally:
        other.execute("ROLLBACK")
        other.close()


def test_a_store_locked_by_another_process_is_one_line_after_a_waiting_note(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Held past the busy timeout it was a 51-line "database is locked" traceback (exit 1) after a silent wait."""
    import rightsize.store.opening as opening

    monkeypatch.setattr(opening, "BUSY_TIMEOUT_S", 0.4, raising=False)
    monkeypatch.setattr(opening, "WAIT_NOTE_S", 0.1, raising=False)
    path = tmp_path / "store.sqlite"
    _store(path)
    with Store(path) as s, _locked_by_another(path):  # locked while the command works: its write is refused
        with pytest.raises(RightsizeError, match=r"locked by another process .*from here on were not stored.*intact"):
            s.save_artifact(None, "plan", {"name": "lost"})
        assert capsys.readouterr().err == f"waiting for the store {str(path)!r}: another process is writing to it\n"
    with _locked_by_another(path):  # locked when the command starts: refused before any work
        rc, out, err = _run(["plan", "examples/gradient-boosting.yaml", "--store", str(path)], capsys)
    lines = err.splitlines()
    assert rc == 2 and not out and "Traceback" not in err and len(lines) == 2, err
    assert lines[0] == f"waiting for the store {str(path)!r}: another process is writing to it"
    assert lines[1].startswith(f"error: --store: {str(path)!r} is locked by another process"), err
    assert "nothing was run or written" in lines[1] and "run this again when that process has finished" in lines[1]
    with Store(path, read_only=True) as s:  # nothing lost, nothing half-written
        assert [a["payload"]["name"] for a in s.artifacts()] == ["keep"]


def test_a_plan_whose_store_is_locked_while_it_plans_is_printed_then_refused_to_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store taken by another process while the plan ran: the plan was lost with the traceback (it was stored
    before it was printed); now it is printed, and the one-line error says it was not stored."""
    import rightsize.cli.plan as cli_plan
    import rightsize.store.opening as opening

    monkeypatch.setattr(opening, "BUSY_TIMEOUT_S", 0.4, raising=False)
    monkeypatch.setattr(opening, "WAIT_NOTE_S", 0.1, raising=False)
    path = tmp_path / "store.sqlite"
    _store(path)
    real = cli_plan.plan_spec
    with ExitStack() as held:

        def plan_then_lock(*args: object, **kwargs: object) -> object:
            answer = real(*args, **kwargs)  # type: ignore[arg-type]
            held.enter_context(_locked_by_another(path))
            return answer

        monkeypatch.setattr(cli_plan, "plan_spec", plan_then_lock)
        rc, out, err = _run(["plan", "examples/gradient-boosting.yaml", "--store", str(path)], capsys)
    assert rc == 2 and "recommendation" in out.lower() and "Traceback" not in err, (out, err)
    assert err.splitlines()[-1].startswith(f"error: --store: {str(path)!r} is locked by another process"), err
    assert "this command's results from here on were not stored" in err and "stored as plan" not in err
    with Store(path, read_only=True) as s:
        assert [a["payload"]["name"] for a in s.artifacts()] == ["keep"]
