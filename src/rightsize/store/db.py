"""The results store: one SQLite file (opened and guarded by ``store.opening``), schema migrations by
``PRAGMA user_version`` (``store.schema``).

    envs          id (fingerprint hash) -> fingerprint JSON
    runs          one row per command that produced results (bench, plan, loadtest, pipeline, …)
    measurements  one row per measured config, keyed by (env_id, key) for reuse
    artifacts     JSON payloads (plan results, load-test results) attached to a run

Every write is one transaction, so an interrupted or failed command never leaves half a row, and
nothing already stored is touched by a later bad input. WAL mode lets the dashboard read while a
sweep writes.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import sqlite3
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypeVar

from rightsize.errors import NotFoundError, RightsizeError
from rightsize.profile import Environment, Measurement, Profile
from rightsize.store.opening import (
    begin_write,
    default_store_path,
    full_disk_error,
    is_busy,
    open_connection,
    out_of_space,
    store_busy_error,
)
from rightsize.store.precedence import newer_wins

MIN_RUN_PREFIX = 4  # a run id (12 hex characters) may be given by this many of its first characters or more


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def _process_gone(run: sqlite3.Row, alive: Callable[[int], bool] = _pid_alive) -> bool:
    """Whether ``run`` still reads ``running`` though its process on this host has gone (killed, crashed, power cut):
    runs of other hosts cannot be told, and are left as they read."""
    return (run["status"] == "running" and run["pid"] is not None and run["host"] == socket.gethostname()
            and not alive(int(run["pid"])))  # fmt: skip


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


@dataclass(frozen=True)
class RunInfo:
    id: str
    created_at: str
    finished_at: str | None
    kind: str
    name: str | None
    model: str | None
    env_id: str | None
    status: str
    n_measurements: int
    n_failed: int


T = TypeVar("T")


def _from_row(build: Callable[[dict[str, Any]], T], text: str, table: str, ident: object) -> T:
    """``build`` over a stored row's JSON object; a one-line RightsizeError naming the row when the row is damaged
    (not JSON, not an object, fields missing): it was a JSONDecodeError traceback from every read of the store."""
    try:
        value = json.loads(text)
        if not isinstance(value, dict):
            raise TypeError(f"a JSON {type(value).__name__}, not an object")
        return build(value)
    except (ValueError, TypeError, KeyError) as exc:
        raise RightsizeError(
            f"--store: row {ident} of table {table} is damaged ({type(exc).__name__}: "
            f"{str(exc)[:80]}); delete that row with sqlite3, or restore a copy of the store"
        ) from None


class Store:
    """A results store on one SQLite file (created with its parent directory on first use)."""

    def __init__(self, path: str | Path | None = None, *, read_only: bool = False) -> None:
        """Open (and create or migrate) the store; ``read_only`` never writes and never creates."""
        self.path = Path(path) if path is not None else default_store_path()
        self.read_only = read_only
        self._conn = open_connection(self.path, read_only=read_only, on_open=self._adopt)

    def _adopt(self, conn: sqlite3.Connection) -> None:
        """A writable store just opened: runs whose process has gone read ``interrupted`` from now on."""
        self._conn = conn
        self.close_dead_runs()

    # -- plumbing ---------------------------------------------------------------------------------

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        """One IMMEDIATE transaction: all or nothing. A disk that fills during it is one line (its COMMIT had failed
        outside any handler: a traceback, the transaction left open). A store another process keeps locked is one
        line too, after a line on stderr saying what it waits for (``begin_write``)."""
        begin_write(self._conn, self.path, "this command's results from here on were not stored")
        try:
            yield self._conn
            self._conn.execute("COMMIT")
        except BaseException as exc:
            if self._conn.in_transaction:
                with suppress(sqlite3.Error):  # SQLite rolls back on close all the same
                    self._conn.execute("ROLLBACK")
            if isinstance(exc, sqlite3.OperationalError) and out_of_space(self.path, exc):
                raise full_disk_error(self.path, exc, "this write was undone") from None
            if isinstance(exc, sqlite3.Error) and is_busy(exc):  # a COMMIT of a rollback-journal store kept waiting
                raise store_busy_error(self.path, "this command's results from here on were not stored") from None
            raise

    def close(self) -> None:
        self._conn.close()

    @property
    def is_open(self) -> bool:
        """False once closed (its ``with`` block left): a call on it would raise sqlite3.ProgrammingError."""
        try:
            self._conn.execute("SELECT 1")
        except sqlite3.ProgrammingError:
            return False
        return True

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- environments -------------------------------------------------------------------------------

    def save_env(self, env: Environment | Mapping[str, Any]) -> str:
        """Store a fingerprint once per id; a stored one of the same id gains the fields it lacks (a fingerprint
        written before ``cpu_signature`` was recorded), its own kept."""
        env = env if isinstance(env, Environment) else Environment.from_dict(env)
        new = env.to_dict()
        with self._tx() as c:
            row = c.execute("SELECT json FROM envs WHERE id = ?", (env.id,)).fetchone()
            if row is None:
                c.execute("INSERT INTO envs(id, created_at, json) VALUES (?, ?, ?)", (env.id, _now(), json.dumps(new)))
                return env.id
            with suppress(ValueError):  # a damaged row stays as it is (reading it says so)
                old = json.loads(row["json"])
                if isinstance(old, dict) and (missing := {k: v for k, v in new.items() if k not in old}):
                    c.execute("UPDATE envs SET json = ? WHERE id = ?", (json.dumps({**old, **missing}), env.id))
        return env.id

    def env(self, env_id: str) -> Environment:
        row = self._conn.execute("SELECT json FROM envs WHERE id = ?", (env_id,)).fetchone()
        if row is None:
            raise NotFoundError(f"environment {env_id!r} is not in the store; see `rightsize results`")
        return _from_row(Environment.from_dict, row["json"], "envs", env_id)

    def envs(self) -> list[Environment]:
        rows = self._conn.execute("SELECT id, json FROM envs ORDER BY created_at")
        return [_from_row(Environment.from_dict, r["json"], "envs", r["id"]) for r in rows]

    # -- runs --------------------------------------------------------------------------------------

    def start_run(self, kind: str, *, name: str | None = None, model: str | None = None, env_id: str | None = None,
                  spec: dict[str, Any] | None = None) -> str:  # fmt: skip
        run_id = uuid.uuid4().hex[:12]
        with self._tx() as c:
            c.execute(
                "INSERT INTO runs(id, created_at, kind, name, model, env_id, status, spec_json, pid, host)"
                " VALUES (?,?,?,?,?,?,?,?,?,?)",
                (run_id, _now(), kind, name, model, env_id, "running", json.dumps(spec) if spec else None,
                 os.getpid(), socket.gethostname()),
            )  # fmt: skip
        return run_id

    def close_dead_runs(self, alive: Callable[[int], bool] | None = None) -> int:
        """Mark ``interrupted`` every run still ``running`` whose process on this host has gone (killed,
        crashed, power cut); returns how many. Runs of other hosts are left alone."""
        rows = self._conn.execute("SELECT id, status, pid, host FROM runs WHERE status = 'running'").fetchall()
        dead = [r["id"] for r in rows if _process_gone(r, alive or _pid_alive)]
        if dead:
            with self._tx() as c:
                c.executemany(
                    "UPDATE runs SET status = 'interrupted', finished_at = ? WHERE id = ? AND status = 'running'",
                    [(_now(), run_id) for run_id in dead],
                )
        return len(dead)

    @contextmanager
    def sweep_lock(self, on_wait: Callable[[], None] | None = None) -> Iterator[None]:
        """Hold the store's sweep lock (an advisory lock on ``<store>.lock``): two sweeps on one store
        take turns, so the second reuses what the first measured instead of measuring it again on the
        same cores. ``on_wait`` is called once if another process holds it."""
        real = self.path.resolve()  # one lock per store file, whichever link or path names it
        lock_path = real.with_name(real.name + ".lock")
        try:
            lock = open(lock_path, "a+")  # noqa: SIM115  (closed by the with below)
        except OSError as exc:  # a folder of that name, a read-only folder
            raise RightsizeError(f"--store: cannot open the sweep lock {str(lock_path)!r} ({exc.strerror}); remove "
                                 "it or make its folder writable") from None  # fmt: skip
        with lock as fh:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if on_wait is not None:
                    on_wait()
                fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def finish_run(self, run_id: str, status: str = "done") -> None:
        with self._tx() as c:
            c.execute("UPDATE runs SET status = ?, finished_at = ? WHERE id = ?", (status, _now(), run_id))

    def runs(self, limit: int | None = None, kind: str | None = None) -> list[RunInfo]:
        sql = (
            "SELECT r.*, COUNT(m.id) AS n, SUM(CASE WHEN m.status = 'failed' THEN 1 ELSE 0 END) AS nf "
            "FROM runs r LEFT JOIN measurements m ON m.run_id = r.id "
            + ("WHERE r.kind = ? " if kind else "")
            + "GROUP BY r.id ORDER BY r.created_at DESC, r.rowid DESC"
            + (f" LIMIT {int(limit)}" if limit else "")
        )
        rows = self._conn.execute(sql, (kind,) if kind else ())
        # a run whose process is gone reads 'interrupted' at once: only a command that writes the store marks it so
        # (``close_dead_runs``), and `results` had shown a killed sweep as running
        return [
            RunInfo(r["id"], r["created_at"], r["finished_at"], r["kind"], r["name"], r["model"], r["env_id"],
                    "interrupted" if _process_gone(r) else r["status"], int(r["n"]), int(r["nf"] or 0))
            for r in rows
        ]  # fmt: skip

    def run(self, run_id: str) -> RunInfo:
        """The run with id ``run_id``, or the one run whose id starts with it (``MIN_RUN_PREFIX`` characters or
        more); a prefix of several runs is refused, never guessed."""
        runs = self.runs()
        for r in runs:
            if r.id == run_id:
                return r
        if len(run_id) < MIN_RUN_PREFIX:
            what = "is too short for a run id prefix" if any(r.id.startswith(run_id) for r in runs) else (
                "is not in the store")  # fmt: skip
            raise NotFoundError(f"run {run_id!r} {what}: give the full id or its first {MIN_RUN_PREFIX}+ characters "
                                "(`rightsize results` lists runs)")  # fmt: skip
        found = [r for r in runs if r.id.startswith(run_id)]
        if len(found) > 1:
            names = ", ".join(f"{r.id} ({r.kind} {r.name or '?'})" for r in found[:4])
            raise NotFoundError(f"run {run_id!r} is a prefix of {len(found)} runs: {names}; give more characters")
        if found:
            return found[0]
        raise NotFoundError(f"run {run_id!r} is not in the store; `rightsize results` lists runs")

    def run_spec(self, run_id: str) -> dict[str, Any] | None:
        row = self._conn.execute("SELECT spec_json FROM runs WHERE id = ?", (run_id,)).fetchone()
        return json.loads(row["spec_json"]) if row and row["spec_json"] else None

    # -- measurements ------------------------------------------------------------------------------

    def add_measurements(self, run_id: str, measurements: Iterable[Measurement]) -> None:
        rows = [
            (run_id, m.env_id, m.key, m.model, m.mode, m.device, m.precision, m.batch_size, m.status, _now(),
             json.dumps(m.to_dict()))
            for m in measurements
        ]  # fmt: skip
        for r in rows:
            if r[1] is None:
                raise ValueError("measurement without env_id cannot be stored")
        with self._tx() as c:
            c.executemany(
                "INSERT INTO measurements(run_id, env_id, key, model, mode, device, precision, batch_size, status,"
                " created_at, json) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                rows,
            )

    def find_measurement(self, key: str, env_id: str, ok_only: bool = True) -> Measurement | None:
        """The newest stored result of a config on an environment (reused unless --fresh); a contended one never
        hides an older clean one (``newer_wins``)."""
        sql = "SELECT id, json FROM measurements WHERE env_id = ? AND key = ?"
        if ok_only:
            sql += " AND status = 'ok'"
        found: Measurement | None = None
        for row in self._conn.execute(sql + " ORDER BY id", (env_id, key)):
            m = _from_row(Measurement.from_dict, row["json"], "measurements", row["id"])
            found = m if found is None or newer_wins(found, m) else found
        return found

    def measurements(self, *, run_id: str | None = None, model: str | None = None, env_id: str | None = None,
                     mode: str | None = None, until: str | None = None) -> list[Measurement]:  # fmt: skip
        """Stored measurements, oldest first; ``until`` (an ISO time, as ``created_at``): only those stored by then."""
        where, args = [], []
        for test, val in (("run_id = ?", run_id), ("model = ?", model), ("env_id = ?", env_id), ("mode = ?", mode),
                          ("created_at <= ?", until)):  # fmt: skip
            if val is not None:
                where.append(test)
                args.append(val)
        sql = "SELECT id, json FROM measurements" + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY id"
        return [
            _from_row(Measurement.from_dict, r["json"], "measurements", r["id"]) for r in self._conn.execute(sql, args)
        ]

    def measured_models(self, run_id: str | None = None) -> dict[str, int]:
        """How many measurements each model has (of ``run_id`` when given), most first."""
        sql = "SELECT model, COUNT(*) AS n FROM measurements" + (" WHERE run_id = ?" if run_id else "")
        rows = self._conn.execute(sql + " GROUP BY model ORDER BY n DESC, model", (run_id,) if run_id else ())
        return {str(r["model"]): int(r["n"]) for r in rows}

    def profiles(
        self, model: str | None = None, *, tiny: bool | None = False, until: str | None = None
    ) -> list[Profile]:
        """One Profile per (env, model, mode, input): the newest result of each config (stored by ``until``)."""
        latest: dict[tuple[str, str], Measurement] = {}
        for m in self.measurements(model=model, until=until):
            if tiny is not None and m.tiny != tiny:
                continue
            slot = (m.env_id or "", m.key)
            if slot not in latest or newer_wins(latest[slot], m):  # later rows win, bar a contended one
                latest[slot] = m
        groups: dict[tuple[str, str, str, str], list[Measurement]] = {}
        for (env_id, _), m in latest.items():
            ident = json.dumps(m.input, sort_keys=True)
            groups.setdefault((env_id, m.model, m.mode, ident), []).append(m)
        envs = {e.id: e for e in self.envs()}
        return [
            Profile(model=mdl, mode=mode, input=json.loads(ident), env=envs.get(env_id, Environment(env_id)),
                    measurements=tuple(sorted(ms, key=lambda m: (m.device, m.precision, m.batch_size))))
            for (env_id, mdl, mode, ident), ms in groups.items()
        ]  # fmt: skip

    def profile(
        self, model: str, mode: str, input: dict[str, int], env_id: str, *, tiny: bool = False, until: str | None = None
    ) -> Profile | None:
        for p in self.profiles(model, tiny=tiny, until=until):
            if p.mode == mode and p.input == input and p.env.id == env_id:
                return p
        return None

    # -- artifacts ---------------------------------------------------------------------------------

    def save_artifact(self, run_id: str | None, kind: str, payload: dict[str, Any], *, internal: bool = False) -> str:
        """Attach a JSON payload (plan, load test, pipeline result) to a run; a run is made if None.

        ``internal`` payloads (caches) belong to no run and never show in ``rightsize results``. A run made here
        for the payload shares its id: `plan` says "stored as plan ID" and `rightsize results` lists run ID, one id
        (they had been two, both accepted by `report`)."""
        art_id = uuid.uuid4().hex[:12]
        if run_id is None and not internal:
            run_id = self.start_run(kind, name=str(payload.get("name", kind)), model=payload.get("model"))
            self.finish_run(run_id)
            if not self._conn.execute("SELECT 1 FROM artifacts WHERE id = ?", (run_id,)).fetchone():
                art_id = run_id
        with self._tx() as c:
            c.execute(
                "INSERT INTO artifacts(id, run_id, kind, created_at, json) VALUES (?,?,?,?,?)",
                (art_id, run_id, kind, _now(), json.dumps(payload)),
            )
        return art_id

    def artifacts(self, kind: str | None = None, run_id: str | None = None) -> list[dict[str, Any]]:
        """Artifacts newest first, each as ``{"id", "run_id", "kind", "created_at", "payload"}``."""
        where, args = [], []
        if kind:
            where.append("kind = ?")
            args.append(kind)
        if run_id:
            where.append("run_id = ?")
            args.append(run_id)
        sql = "SELECT * FROM artifacts" + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY rowid DESC"
        return [
            {"id": r["id"], "run_id": r["run_id"], "kind": r["kind"], "created_at": r["created_at"],
             "payload": _from_row(dict, r["json"], "artifacts", r["id"])}
            for r in self._conn.execute(sql, args)
        ]  # fmt: skip
