"""Opening a results store file: refusing, with one line naming the fix, what is not a store this user can use
(a folder, a device, a read-only or damaged file, another application's database, a newer schema, a full disk)
before anything is read or written."""

from __future__ import annotations

import os
import shutil
import sqlite3
import stat
import sys
from collections.abc import Callable
from pathlib import Path

import platformdirs

from rightsize.errors import NotFoundError, RightsizeError
from rightsize.store.schema import NewerStore, check_ours, check_version, migrate, switch_to_wal

BUSY_TIMEOUT_S = 30.0  # how long a write waits for another process's lock on the store before giving up
WAIT_NOTE_S = 3.0  # after this long, a waiting write says on stderr what it waits for (it had waited in silence)


class StoreBusyError(RightsizeError):
    """Another process held the store's write lock for all of ``BUSY_TIMEOUT_S`` (exit 2, as every --store error)."""


def store_busy_error(path: Path, what: str) -> StoreBusyError:
    return StoreBusyError(f"--store: {str(path)!r} is locked by another process that is writing to it (waited "
                          f"{BUSY_TIMEOUT_S:g} s); {what}, and what was stored before is intact: run this again "
                          "when that process has finished, or pass another --store")  # fmt: skip


def is_busy(exc: sqlite3.Error) -> bool:
    return isinstance(exc, sqlite3.OperationalError) and ("locked" in str(exc) or "busy" in str(exc))


def _begin(conn: sqlite3.Connection, wait_s: float) -> None:
    conn.execute(f"PRAGMA busy_timeout = {max(0, int(wait_s * 1000))}")
    conn.execute("BEGIN IMMEDIATE")


def begin_write(conn: sqlite3.Connection, path: Path, what: str) -> None:
    """``BEGIN IMMEDIATE`` on the store at ``path``: waits up to ``BUSY_TIMEOUT_S`` for another process's write
    lock, saying so on stderr after ``WAIT_NOTE_S``; then a one-line StoreBusyError whose message says ``what``
    was not done (it had been a 51-line "database is locked" traceback after a silent wait, the plan lost)."""
    note_s = min(WAIT_NOTE_S, BUSY_TIMEOUT_S)
    try:
        try:
            _begin(conn, note_s)
        except sqlite3.OperationalError as exc:
            if not is_busy(exc):
                raise
            print(f"waiting for the store {str(path)!r}: another process is writing to it", file=sys.stderr,
                  flush=True)  # fmt: skip
            try:
                _begin(conn, BUSY_TIMEOUT_S - note_s)
            except sqlite3.OperationalError as again:
                if is_busy(again):
                    raise store_busy_error(path, what) from None
                raise
    finally:
        conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")


def _directory_error(path: Path) -> RightsizeError:
    return RightsizeError(
        f"--store: {str(path)!r} is a directory, not a store file; point --store or RIGHTSIZE_STORE at a file "
        f"path, e.g. {str(path / 'store.sqlite')!r}"
    )


def missing_store_error(path: Path, first: str = "`rightsize bench SPEC`") -> RightsizeError:
    """The error for a store that a read must find but is not there: a directory, or no file (run ``first``)."""
    if path.is_dir():
        return _directory_error(path)
    return NotFoundError(f"--store: no results store at {str(path)!r}; run {first} first or pass --store")


def default_store_path() -> Path:
    """``$RIGHTSIZE_STORE`` or ``<user cache dir>/rightsize/store.sqlite``."""
    env = os.environ.get("RIGHTSIZE_STORE")
    if env:
        return Path(env)
    return Path(platformdirs.user_cache_dir("rightsize")) / "store.sqlite"


def unwritable_error(path: Path, why: str) -> RightsizeError:
    return RightsizeError(
        f"--store: cannot write {str(path)!r} ({why}); nothing was written: make it and its folder writable, "
        "or point --store or RIGHTSIZE_STORE at a writable path"
    )


def _check_writable(conn: sqlite3.Connection, path: Path) -> None:
    """Refuse a store this process cannot write (a read-only file or folder, a read-only mount) before any
    work: SQLite opens such a file read-only without a word, and the command failed at its first write. The
    probe is a write that is rolled back, so the file is left as it was."""
    try:
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        try:
            begin_write(conn, path, "nothing was run or written")
        except StoreBusyError:  # locked at open: refused before any work (it went on, to fail at its first write)
            conn.close()
            raise
        try:
            conn.execute(f"PRAGMA user_version = {version}")
        finally:
            if conn.in_transaction:  # an error may have ended it already
                conn.execute("ROLLBACK")
    except sqlite3.OperationalError as exc:
        if out_of_space(path, exc):  # "make it writable" had been the fix named for a full disk
            conn.close()
            raise full_disk_error(path, exc, "nothing was written") from None
        if any(s in str(exc) for s in ("readonly", "read-only", "unable to open", "disk I/O error")):
            conn.close()
            raise unwritable_error(path, str(exc)) from None
    except sqlite3.DatabaseError:
        pass  # not a database, locked, ...: told apart (and reported) by the steps after this one


def out_of_space(path: Path, exc: sqlite3.OperationalError) -> bool:
    """Whether ``exc`` is SQLite failing for want of disk space: "database or disk is full", or a "disk I/O
    error" on a file system with less than a MiB left (a -shm or -wal file that could not grow)."""
    if "full" in str(exc):
        return True
    if "disk I/O error" not in str(exc):
        return False
    try:
        return shutil.disk_usage(path.parent).free < 2**20
    except OSError:
        return False


def full_disk_error(path: Path, exc: sqlite3.OperationalError, what: str) -> RightsizeError:
    return RightsizeError(f"--store: the disk holding {str(path)!r} is full ({exc}); {what}, and what was "
                          "stored before is intact: free space and run again")  # fmt: skip


def open_connection(
    path: Path, *, read_only: bool = False, on_open: Callable[[sqlite3.Connection], object] | None = None
) -> sqlite3.Connection:
    """Open (and create or migrate) the store file at ``path``, refusing with one line what is not a store this
    user can use; ``read_only`` never writes and never creates. ``on_open`` runs on a writable store once it is
    migrated, inside the same error handling (a store locked for 30 s is one line there too)."""
    try:
        mode = path.stat().st_mode if os.path.lexists(path) else None
    except OSError as exc:  # a folder on the way this user cannot search, a name too long
        raise RightsizeError(f"--store: cannot open {str(path)!r} ({exc.strerror}); pass a path this user "
                             "can reach") from None  # fmt: skip
    if mode is not None and stat.S_ISDIR(mode):
        raise _directory_error(path)
    if mode is not None and not stat.S_ISREG(mode):  # /dev/null: SQLite made /dev/null-journal beside it
        raise RightsizeError(f"--store: {str(path)!r} is a device or pipe, not a store file; point --store "
                             "or RIGHTSIZE_STORE at a file path")  # fmt: skip
    if not read_only and mode is not None and not os.access(path, os.W_OK):
        # refused before SQLite opens it: it would open read-only and fail at the first write, mid-command
        raise unwritable_error(path, "the file is read-only for this user")
    try:
        if read_only:
            if not path.is_file():
                raise NotFoundError(f"--store: {str(path)!r} does not exist; run `rightsize bench` or `plan` "
                                    "first")  # fmt: skip
            uri = path.resolve().as_uri()
            conn = sqlite3.connect(f"{uri}?mode=ro", uri=True, timeout=30)
            if not os.access(path.parent, os.W_OK) and not Path(f"{path}-shm").exists():
                # a WAL store in a folder this user cannot write: SQLite cannot make the -shm file a reader needs,
                # "unable to open database file". Nobody can be writing it (no -shm): read it as immutable,
                # unless its -wal holds commits (immutable reads skip them: the newest runs went missing).
                conn.close()
                wal = Path(f"{path}-wal")
                if wal.exists() and wal.stat().st_size > 0:
                    raise RightsizeError(f"--store: {str(path)!r} has commits in its -wal file that this user "
                                         "cannot fold in (its folder is read-only); open it once where it can be "
                                         "written, e.g. `rightsize results` as its owner")  # fmt: skip
                conn = sqlite3.connect(f"{uri}?mode=ro&immutable=1", uri=True, timeout=30)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
    except (OSError, sqlite3.Error) as exc:
        if isinstance(exc, (FileExistsError, NotADirectoryError)):  # "([Errno 17] File exists: 'small.yaml')"
            file = next((p for p in path.parents if p.is_file()), path.parent)
            raise RightsizeError(f"--store: cannot open {str(path)!r}: {str(file)!r} is a file, not a folder; "
                                 "pass a path in a folder") from None  # fmt: skip
        raise RightsizeError(f"--store: cannot open {str(path)!r} ({exc}); pass a writable path") from None
    conn.row_factory = sqlite3.Row
    try:
        # A damaged file (pages overwritten) still opens and answers some queries: listing would show part of
        # the runs, and a write would build on the damage. quick_check reads every page once (milliseconds
        # for a store of a few MB) and finds it before anything is read or written.
        verdict = str(conn.execute("PRAGMA quick_check(1)").fetchone()[0])
    except sqlite3.DatabaseError as exc:  # "file is not a database" is not damage: refused below as not a store
        verdict = str(exc) if "malformed" in str(exc) else "ok"
    if verdict != "ok":
        conn.close()
        what = " ".join(verdict.replace("*** in database main ***", "").split())[:100]
        raise RightsizeError(f"--store: {str(path)!r} is damaged ({what}); nothing was read from "
                             "or written to it: restore a copy, or pass another path")  # fmt: skip
    if not read_only:
        _check_writable(conn, path)
    try:
        if read_only and not conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
            conn.close()  # an empty file (or a database nothing was ever written to): not "not ours"
            raise RightsizeError(f"--store: {str(path)!r} is empty, not yet a rightsize store; a command "
                                 "that stores results (`rightsize bench` or `plan`) makes it one, or pass "
                                 "another path")  # fmt: skip
        check_ours(conn)  # before the first write: another application's database is never changed
        if read_only:
            check_version(conn)
            conn.execute("SELECT count(*) FROM runs").fetchone()
            return conn
        switch_to_wal(conn)
        conn.execute("PRAGMA foreign_keys=ON")
        migrate(conn)
        if on_open is not None:
            on_open(conn)
    except NewerStore as exc:
        conn.close()
        raise RightsizeError(f"--store: {str(path)!r} {exc}: upgrade rightsize to read it (or pass "
                             "another path)") from None  # fmt: skip
    except sqlite3.OperationalError as exc:
        conn.close()
        if is_busy(exc):  # another process held it for all of BUSY_TIMEOUT_S
            raise store_busy_error(path, "nothing was run or written") from None
        if "readonly" in str(exc) and Path(f"{path}-journal").exists():  # a hot journal to roll back
            raise RightsizeError(
                f"--store: {str(path)!r} has a -journal file left by an interrupted write, "
                "which a read-only command cannot roll back: run one that writes the store "
                "(e.g. `rightsize plan`) where it can be written, or pass another path"
            ) from None
        if "disk I/O error" in str(exc) or "full" in str(exc):  # "not a store" had invited deleting a good one
            raise RightsizeError(
                f"--store: cannot open {str(path)!r} ({exc}: a full disk or a file-size "
                "limit?); nothing in it was changed: free space and try again"
            ) from None
        raise RightsizeError(f"--store: {str(path)!r} is not a rightsize store ({exc}); pass another "
                             "path") from None  # fmt: skip
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise RightsizeError(f"--store: {str(path)!r} is not a rightsize store ({exc}); pass another path") from None
    return conn
