"""The store's schema: its migrations by ``PRAGMA user_version``, and the checks made when a store is opened
(another application's database is never changed; a newer rightsize's store is refused; concurrent first opens
migrate once)."""

from __future__ import annotations

import sqlite3
import time

__all__ = ["NewerStore", "check_ours", "check_version", "migrate", "switch_to_wal"]

_MIGRATIONS: list[str] = [
    # v1
    """
    CREATE TABLE envs (id TEXT PRIMARY KEY, created_at TEXT NOT NULL, json TEXT NOT NULL);
    CREATE TABLE runs (
        id TEXT PRIMARY KEY, created_at TEXT NOT NULL, finished_at TEXT, kind TEXT NOT NULL,
        name TEXT, model TEXT, env_id TEXT REFERENCES envs(id), status TEXT NOT NULL, spec_json TEXT
    );
    CREATE TABLE measurements (
        id INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL REFERENCES runs(id),
        env_id TEXT NOT NULL REFERENCES envs(id), key TEXT NOT NULL, model TEXT NOT NULL, mode TEXT NOT NULL,
        device TEXT NOT NULL, precision TEXT NOT NULL, batch_size INTEGER NOT NULL, status TEXT NOT NULL,
        created_at TEXT NOT NULL, json TEXT NOT NULL
    );
    CREATE INDEX measurements_key ON measurements(env_id, key);
    CREATE INDEX measurements_model ON measurements(model, mode);
    CREATE TABLE artifacts (
        id TEXT PRIMARY KEY, run_id TEXT REFERENCES runs(id), kind TEXT NOT NULL, created_at TEXT NOT NULL,
        json TEXT NOT NULL
    );
    CREATE INDEX artifacts_kind ON artifacts(kind);
    """,
    # v2: who owns a running run, so a killed one can be found and closed
    """
    ALTER TABLE runs ADD COLUMN pid INTEGER;
    ALTER TABLE runs ADD COLUMN host TEXT;
    """,
]

_TABLES = ("envs", "runs", "measurements", "artifacts")  # what every store version has


class NewerStore(sqlite3.DatabaseError):
    """A store written by a newer rightsize (a schema version past this one's migrations)."""


def check_ours(conn: sqlite3.Connection) -> None:
    """Raise ``sqlite3.DatabaseError`` (reported as "not a rightsize store") for a database rightsize did not
    make: one with tables but no schema version (another application's), or a versioned one without the
    store's tables. Only an empty database is initialised as a new store. Both are read in one snapshot: a
    process creating the store between the two reads made it look like "tables and no schema version"."""
    in_tx = conn.in_transaction
    if not in_tx:
        conn.execute("BEGIN")
    try:
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        tables = sorted(r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"))  # fmt: skip
        n_schema = int(conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0])
    finally:
        if not in_tx and conn.in_transaction:
            conn.execute("COMMIT")
    if version < 0:  # SQLite stores any integer; migrate() would index its migrations from the end
        raise sqlite3.DatabaseError(f"schema v{version} is not one rightsize writes; it was left untouched")
    if version == 0:
        others = [str(t) for t in tables]
        if others or n_schema:
            shown = ", ".join(others[:5]) + (f" and {len(others) - 5} more" if len(others) > 5 else "")
            held = f"tables {shown}" if shown else "views or triggers"
            raise sqlite3.DatabaseError(f"another application's database: it holds {held} and no rightsize "
                                        "schema; it was left untouched")  # fmt: skip
        return
    missing = [t for t in _TABLES if t not in tables]
    if missing:
        raise sqlite3.DatabaseError(f"schema v{version} but no table {missing[0]}; it was left untouched")


def switch_to_wal(conn: sqlite3.Connection, wait_s: float = 30.0) -> None:
    """Switch the store to WAL. The switch answers "database is locked" at once, busy timeout or not, while
    another process opening the same new store holds a lock: retried for ``wait_s``."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def check_version(conn: sqlite3.Connection) -> int:
    version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    if version > len(_MIGRATIONS):
        raise NewerStore(f"has schema v{version}, newer than this rightsize's (v{len(_MIGRATIONS)})")
    return version


def migrate(conn: sqlite3.Connection) -> None:
    """Bring the schema to this version, one step per transaction. The version is read again inside each
    step's IMMEDIATE transaction: two processes opening a new store at once both saw v0 outside it, and the
    second re-ran the first's CREATE TABLE ("table envs already exists" read as "not a rightsize store")."""
    while check_version(conn) < len(_MIGRATIONS):
        conn.execute("BEGIN IMMEDIATE")
        try:
            i = check_version(conn)
            if i < len(_MIGRATIONS):  # else another process finished it while this one waited for the lock
                for stmt in _MIGRATIONS[i].split(";"):
                    if stmt.strip():
                        conn.execute(stmt)
                conn.execute(f"PRAGMA user_version = {i + 1}")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
