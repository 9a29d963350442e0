"""Crash-safe local state for the agents: one SQLite file per agent, WAL mode.

Every agent keeps what it must not lose or repeat across a `kill -9` here: the worker's
submissions (written *before* the transaction is sent, marked sent after its receipt, so a
restart finds an in-flight one and checks the chain instead of submitting twice), the
validator's verdicts and attestations, the trainer's consumed submissions and steps, and the
event-stream cursors. SQLite gives atomic, durable commits without a server; WAL lets the
agent's HTTP thread read while the main loop writes: `page` (what the HTTP routes serve strangers) reads on
a connection of its own, so a reader never waits for the main loop's lock nor holds it.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = ["StateStore"]

log = logging.getLogger(__name__)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS kv (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS records (
    kind       TEXT NOT NULL,
    id         TEXT NOT NULL,
    status     TEXT NOT NULL,
    data       TEXT NOT NULL,
    updated_at REAL NOT NULL,
    PRIMARY KEY (kind, id)
);
CREATE INDEX IF NOT EXISTS records_by_status ON records (kind, status);
CREATE INDEX IF NOT EXISTS records_by_time ON records (kind, updated_at, CAST(id AS INTEGER));
CREATE INDEX IF NOT EXISTS records_by_status_time ON records (kind, status, updated_at);
"""
_VERSION = 3
_MIGRATIONS: dict[int, str] = {
    # 1 → 2: `records_by_time` (created by _SCHEMA above, on an old file too), which `page` seeks in
    1: "",
    # 2 → 3: `records_by_status_time` (likewise), which `latest(kind, n, status=...)` reads backwards
    2: "",
}
"""SQL that takes a state file from version k to k + 1 (run in one transaction after `_SCHEMA`)."""


class StateStore:
    """A small durable store: a key/value table and typed records with a status.

    Records are the unit agents reason about (`kind` = "submission", "verdict", "rollout", ...;
    `id` = the on-chain id as text; `status` = a lifecycle word of the agent's own). All writes
    commit before returning. Thread-safe (one connection guarded by a lock).
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=30)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.executescript(_SCHEMA)
        version = self.get("_schema_version")
        if version is None:
            self.set("_schema_version", _VERSION)
        elif isinstance(version, int) and version < _VERSION and all(v in _MIGRATIONS for v in range(version, _VERSION)):
            with self.transaction():
                for v in range(version, _VERSION):
                    if _MIGRATIONS[v]:
                        self._db.execute(_MIGRATIONS[v])
                self.set("_schema_version", _VERSION)
            log.info("state file %s migrated from schema version %s to %s", self.path, version, _VERSION)
        elif version != _VERSION:
            raise RuntimeError(
                f"state file {self.path} has schema version {version}, this agent knows {_VERSION}; "
                "move it aside or use a matching release"
            )
        # the HTTP threads' reads (`page`): their own connection and lock, never the writers'
        self._read_lock = threading.Lock()
        self._reader = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=30)
        self._reader.execute("PRAGMA query_only=ON")

    def close(self) -> None:
        with self._read_lock:
            self._reader.close()
        with self._lock:
            self._db.close()

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the store's (re-entrant) lock: for a read-modify-write of a caller's own values that must stay in
        step with the store. Take no other lock inside it that another thread holds while it calls the store:
        this lock comes first (the agent's counters use it rather than a lock of their own, which deadlocked a
        trainer whose publish transaction counted while an HTTP thread counting held that other lock)."""
        with self._lock:
            yield

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Group several writes into one atomic commit."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            else:
                self._db.execute("COMMIT")

    # key/value
    def get(self, key: str, default: Any = None) -> Any:
        with self._lock:
            row = self._db.execute("SELECT value FROM kv WHERE key = ?", (key,)).fetchone()
        return default if row is None else json.loads(row[0])

    def set(self, key: str, value: Any) -> None:
        with self._lock:
            self._db.execute(
                "INSERT INTO kv (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                (key, json.dumps(value)),
            )

    # records
    def put(self, kind: str, id: str | int, status: str, data: dict[str, Any] | None = None) -> None:
        """Insert or replace a record (data merged over any existing data)."""
        with self._lock:
            old = self.record(kind, id)
            merged = {**(old["data"] if old else {}), **(data or {})}
            self._db.execute(
                "INSERT INTO records (kind, id, status, data, updated_at) VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT(kind, id) DO UPDATE SET status = excluded.status, data = excluded.data, "
                "updated_at = excluded.updated_at",
                (kind, str(id), status, json.dumps(merged), time.time()),
            )

    def delete(self, kind: str, id: str | int) -> None:
        """Remove a record (none: nothing happens)."""
        with self._lock:
            self._db.execute("DELETE FROM records WHERE kind = ? AND id = ?", (kind, str(id)))

    def record(self, kind: str, id: str | int) -> dict[str, Any] | None:
        with self._lock:
            row = self._db.execute(
                "SELECT status, data, updated_at FROM records WHERE kind = ? AND id = ?", (kind, str(id))
            ).fetchone()
        if row is None:
            return None
        return {"id": str(id), "status": row[0], "data": json.loads(row[1]), "updated_at": row[2]}

    def records(self, kind: str, status: str | None = None) -> list[dict[str, Any]]:
        where, args = _where(kind, status)
        with self._lock:
            rows = self._db.execute(
                f"SELECT id, status, data, updated_at FROM records {where} ORDER BY updated_at, id", args).fetchall()
        return [{"id": r[0], "status": r[1], "data": json.loads(r[2]), "updated_at": r[3]} for r in rows]

    def page(self, kind: str, since: float, after: int, limit: int) -> list[dict[str, Any]]:
        """The first `limit` records of `kind` after the cursor (since, after) in (updated_at, numeric id)
        order: a keyset seek in the `records_by_time` index, so a page costs the page, whatever the history.
        A stable paging: no record whose `updated_at` ties across a page boundary is skipped or repeated.
        Records of `kind` must have integer ids (on-chain ids). Reads on the readers' own connection (WAL: it
        never waits for a writer, nor a writer for it); the rows are decoded after its lock is let go."""
        if limit < 1:
            return []
        with self._read_lock:
            rows = self._reader.execute(
                "SELECT id, status, data, updated_at FROM records WHERE kind = ? "
                "AND (updated_at, CAST(id AS INTEGER)) > (?, ?) "
                "ORDER BY updated_at, CAST(id AS INTEGER) LIMIT ?", (kind, float(since), int(after), int(limit)),
            ).fetchall()
        return [{"id": r[0], "status": r[1], "data": _decode(r[2]), "updated_at": r[3]} for r in rows]

    def latest(self, kind: str, limit: int, *, status: str | None = None,
               not_status: str | tuple[str, ...] | None = None) -> list[dict[str, Any]]:
        """The newest `limit` records of `kind` (of `status`, or of any status but `not_status`'s), newest
        first: a backwards walk of `records_by_time` / `records_by_status_time`, so it costs the `limit`
        rows (plus, with `not_status`, the skipped ones), never the whole history. What `/status` lists."""
        if limit < 1:
            return []
        args: tuple[Any, ...]
        if status is not None:
            sql, args = ("SELECT id, status, data, updated_at FROM records WHERE kind = ? AND status = ? "
                         "ORDER BY updated_at DESC LIMIT ?"), (kind, status, int(limit))
        elif not_status is not None:
            skip = (not_status,) if isinstance(not_status, str) else tuple(not_status)
            sql = ("SELECT id, status, data, updated_at FROM records WHERE kind = ? AND status NOT IN "
                   f"({', '.join('?' * len(skip))}) ORDER BY updated_at DESC, CAST(id AS INTEGER) DESC LIMIT ?")
            args = (kind, *skip, int(limit))
        else:
            sql, args = ("SELECT id, status, data, updated_at FROM records WHERE kind = ? "
                         "ORDER BY updated_at DESC, CAST(id AS INTEGER) DESC LIMIT ?"), (kind, int(limit))
        with self._read_lock:
            rows = self._reader.execute(sql, args).fetchall()
        return [{"id": r[0], "status": r[1], "data": _decode(r[2]), "updated_at": r[3]} for r in rows]

    def with_prefix(self, kind: str, prefix: str) -> list[dict[str, Any]]:
        """The records of `kind` whose id starts with `prefix` (a range seek in the primary key: ids that
        share a prefix sort together), in id order. The trainer keys attestations `"<submission>:<validator>"`."""
        if not prefix:
            raise ValueError("prefix must be non-empty")
        upper = prefix[:-1] + chr(ord(prefix[-1]) + 1)
        with self._read_lock:
            rows = self._reader.execute(
                "SELECT id, status, data, updated_at FROM records WHERE kind = ? AND id >= ? AND id < ? ORDER BY id",
                (kind, prefix, upper)).fetchall()
        return [{"id": r[0], "status": r[1], "data": _decode(r[2]), "updated_at": r[3]} for r in rows]

    def count(self, kind: str, status: str | None = None) -> int:
        where, args = _where(kind, status)
        with self._lock:
            return int(self._db.execute(f"SELECT COUNT(*) FROM records {where}", args).fetchone()[0])


def _decode(data: str) -> Any:
    """A record's data (one place, so a test can count the rows a request decodes)."""
    return json.loads(data)


def _where(kind: str, status: str | None) -> tuple[str, tuple[Any, ...]]:
    """The WHERE clause (and its arguments) picking records of `kind`, and of `status` when given."""
    if status is None:
        return "WHERE kind = ?", (kind,)
    return "WHERE kind = ? AND status = ?", (kind, status)
