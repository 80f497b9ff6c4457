"""Which runs' held rows the SQLite trace store's writer took and may not have committed yet.

A read of one run commits what this process appended to that run, and no other run's (see
``SqliteTraceStore._settle_runs``): rows still held are written by the reader's own operation. Rows
the writer already took (the flusher's transaction, under way) are in no one's hands but that
transaction's, so a read of their run waits for the writer too. Each take is numbered; a number is
forgotten once a commit after it is known (the reader's operation returned, or a full settle did).
The table is bounded: past :data:`KEPT` runs a take is not entered and reads settle everything
until a full settle passed it, as every read did before.
"""

from __future__ import annotations

import functools
import sqlite3
import threading
from collections.abc import Collection, Iterable, Iterator, Sequence
from typing import Any, Final

from actionspace.ledger.sqlite import GroupCommit, SqliteConnections
from actionspace.trace._sqlite_reads import PartsOfRuns

__all__ = ["KEPT", "ReadsOfRuns", "Takes"]

KEPT: Final = 4096
"""Most runs whose taken rows are tracked until a commit is known."""


class Takes:
    """The takes of a store's held rows; every method is called under the store's held lock."""

    __slots__ = ("_taken", "_untracked", "count")

    def __init__(self) -> None:
        self.count = 0
        """The number of the last take."""
        self._taken: dict[str, int] = {}
        """Per run, the number of its last take not known to be committed."""
        self._untracked = 0
        """The last take not entered in ``_taken`` (it was full)."""

    def take(self, runs: Collection[str]) -> None:
        """Note that the writer took the held rows of ``runs`` (committed with its transaction)."""
        if not runs:
            return
        self.count += 1
        if len(self._taken) + len(runs) > KEPT:
            self._untracked = self.count
        else:
            self._taken.update(dict.fromkeys(runs, self.count))

    def pending(self, run_ids: Iterable[str], held: Collection[str]) -> bool | None:
        """Whether a read of ``run_ids`` must go through the writer (rows of theirs held, or taken
        and maybe not committed); None when that cannot be told (settle everything)."""
        if self._untracked:
            return None
        taken = self._taken
        return any([run_id in held or run_id in taken for run_id in run_ids])

    def committed(self, upto: int, run_ids: Sequence[str] | None = None) -> None:
        """Forget the takes numbered up to ``upto``, which a commit now known passed: of ``run_ids``
        only (a reader's operation), or of every run (a full settle)."""
        taken = self._taken
        if run_ids is not None:
            for run_id in run_ids:
                if taken.get(run_id, upto + 1) <= upto:
                    del taken[run_id]
            return
        if self.count == upto:
            taken.clear()
        elif taken:
            self._taken = {run_id: n for run_id, n in taken.items() if n > upto}
        if self._untracked <= upto:
            self._untracked = 0


class ReadsOfRuns(PartsOfRuns):
    """The SQLite trace store's settles: of everything, or of the runs a read reads (its reads of
    part of a run, ``_sqlite_reads``, among them)."""

    _db: SqliteConnections
    _group: GroupCommit
    _held: dict[str, list[Any]]
    _held_lock: threading.Lock
    _takes: Takes

    @staticmethod
    def _insert_held(conn: sqlite3.Connection, held: dict[str, list[Any]]) -> None:
        raise NotImplementedError

    def _read(self, sql: str, params: tuple[object, ...] = ()) -> list[tuple[Any, ...]]:
        rows: list[tuple[Any, ...]] = self._db.conn().execute(sql, params).fetchall()
        return rows

    def _pages(self, sql: str, params: tuple[object, ...], size: int) -> Iterator[list[tuple[Any, ...]]]:
        """The rows of ``sql``, ``size`` at a time, on this thread's connection (a consumer reads
        them on the thread that began, as every SQLite connection of the store is one thread's)."""
        return self._db.pages(sql, params, size)  # one use of the connection (SqliteConnections.pages)

    def _settle(self) -> None:
        """Wait for records queued by this process's writer, so that reads see them."""
        self._db.check_open()
        with self._held_lock:
            upto = self._takes.count
        self._group.settle()
        with self._held_lock:
            self._takes.committed(upto)

    def _settle_runs(self, run_ids: Sequence[str]) -> None:
        """Commit what this process appended to ``run_ids``, and no other run's held rows: they are
        written by an operation of this caller's, which also waits for a commit under way that took
        some of them. A read of one run (an approval's decision reads its own) so does not commit,
        nor wait for, every run's records under write load."""
        self._db.check_open()
        with self._held_lock:
            pending = self._takes.pending(run_ids, self._held)
        if pending is None:
            self._settle()
        elif pending:
            last: int = self._group.run(functools.partial(self._write_runs, run_ids), durable=False)
            with self._held_lock:
                self._takes.committed(last, run_ids)

    def _write_runs(self, run_ids: Sequence[str], conn: sqlite3.Connection) -> int:
        """A reader's operation: the held rows of ``run_ids`` alone (the others' stay for the
        flusher); the number of the last take so far, committed once the operation returned."""
        with self._held_lock:
            held = {run_id: rows for run_id in run_ids if (rows := self._held.pop(run_id, None))}
            self._takes.take(held)
            last = self._takes.count
        self._insert_held(conn, held)
        return last
