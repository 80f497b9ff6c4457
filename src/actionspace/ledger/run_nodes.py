"""Blocks of a run's node numbers, reserved in the run-state store shared by every process.

A call the model gave no id is named ``<run>:n<k>`` by the runtime, ``k`` a node number of the
run. Each process counts node numbers in memory; two processes on one run (two workers of a
service, a process continuing a run another one left) would count the same numbers and name two
calls alike, so the trace, a denial's details, an approval and the session's answer could point at
the wrong call. A process therefore takes its numbers in blocks: one atomic write reserves the
next ``count`` numbers of the run, and no other process is given any of them, before or after a
restart (:class:`actionspace.pipeline.runs.RunRegistry` hands them out in memory).

The stores keep, per run, the first number no process was given yet (tables ``run_state_nodes``
in the SQLite file and ``actionspace_run_state_nodes`` in PostgreSQL, created on first use beside
the run states). ``reserve_nodes(run_id, floor, count)`` returns the first number of a block of
``count`` numbers, none below ``floor`` and none of an earlier block.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from actionspace.ledger._connections import SqliteConnections
    from actionspace.ledger.postgres_pool import PostgresConnections
    from actionspace.ledger.sqlite_writer import GroupCommit

__all__ = ["PostgresNodeBlocks", "SqliteNodeBlocks"]

_SQLITE_TABLE: Final = (
    "CREATE TABLE IF NOT EXISTS run_state_nodes (run_id TEXT PRIMARY KEY, next INTEGER NOT NULL)"
)
_SQLITE_RESERVE: Final = (
    "INSERT INTO run_state_nodes (run_id, next) VALUES (?1, ?2 + ?3)"
    " ON CONFLICT (run_id) DO UPDATE SET next = max(run_state_nodes.next, ?2) + ?3 RETURNING next"
)
_PG_TABLE: Final = (
    "CREATE TABLE IF NOT EXISTS actionspace_run_state_nodes (run_id TEXT PRIMARY KEY, next BIGINT NOT NULL)"
)
_PG_RESERVE: Final = (
    "INSERT INTO actionspace_run_state_nodes (run_id, next) VALUES (%(run)s, %(floor)s + %(count)s)"
    " ON CONFLICT (run_id) DO UPDATE"
    " SET next = GREATEST(actionspace_run_state_nodes.next, %(floor)s) + %(count)s RETURNING next"
)


def _checked(floor: int, count: int) -> None:
    if type(floor) is not int or type(count) is not int or floor < 0 or count < 1:
        raise ValueError(
            f"a block of node numbers needs a floor >= 0 and a count >= 1, not {floor!r}, {count!r}"
        )


class SqliteNodeBlocks:
    """``reserve_nodes`` of :class:`~actionspace.ledger.run_state.SqliteRunStateStore`: one
    upsert, committed (and synced) by the file's writer beside whatever else it commits."""

    _db: SqliteConnections
    _group: GroupCommit
    _nodes_table = False
    """The table is known to be there (created by this store, or found)."""

    def reserve_nodes(self, run_id: str, floor: int, count: int) -> int:
        """The first of ``count`` node numbers of ``run_id`` reserved for this process (see the
        module): at least ``floor``, past every block reserved before, durable when it returns."""
        _checked(floor, count)
        self._db.check_open()

        def reserve(conn: Any) -> int:
            if not self._nodes_table:
                conn.execute(_SQLITE_TABLE)
            (row,) = conn.execute(_SQLITE_RESERVE, (run_id, floor, count)).fetchall()
            return int(row[0]) - count

        first = int(self._group.run(reserve))
        self._nodes_table = True
        return first


class PostgresNodeBlocks:
    """``reserve_nodes`` of :class:`~actionspace.ledger.run_state.PostgresRunStateStore`: one
    upsert, which PostgreSQL orders against every other process's on the run's row."""

    _db: PostgresConnections
    _nodes_table = False
    _nodes_lock = threading.Lock()

    def reserve_nodes(self, run_id: str, floor: int, count: int) -> int:
        """The first of ``count`` node numbers of ``run_id`` reserved for this process (see the
        module): at least ``floor``, past every block reserved before, committed when it returns."""
        _checked(floor, count)
        if not self._nodes_table:
            self._create_nodes_table()
        with self._db.connection() as conn:
            row = conn.execute(_PG_RESERVE, {"run": run_id, "floor": floor, "count": count}).fetchone()
        assert row is not None  # an upsert with RETURNING returns its row
        return int(row["next"]) - count

    def _create_nodes_table(self) -> None:
        """Create the table under the schema's lock (a bare ``CREATE TABLE IF NOT EXISTS`` of two
        processes at once can fail in one of them)."""
        from actionspace.ledger.run_state import SCHEMA_VERSION

        with self._nodes_lock:
            if self._nodes_table:
                return
            self._db.init_schema(
                (
                    "CREATE TABLE IF NOT EXISTS actionspace_run_state_meta"
                    " (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
                    _PG_TABLE,
                ),
                meta_table="actionspace_run_state_meta",
                meta_key="schema_version",
                version=SCHEMA_VERSION,
                what="the run state",
            )
            self._nodes_table = True
