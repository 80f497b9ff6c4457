"""Failure detection between workers: heartbeats, and the hand-over of a dead worker's workflows.

Every process that runs plan or node workflows writes a heartbeat to ``actionspace_executors`` in
the store's database. A process that saw no heartbeat of another for ``dead_after_s`` claims it
(one ``UPDATE … RETURNING``: only one claimant wins, and the claim is a lease that lapses if the
claimant dies in turn) and asks DBOS to recover that executor's pending workflows, which puts them
back on a queue for any live worker. A worker that stops in order drops its heartbeat to 0, so its
work moves on at the next look of any other worker.

Each executor also holds a session advisory lock (:func:`session_key`) on its heartbeat's connection
for as long as its process lives. The claim rewrites ``beat_at`` (the claimant's lease), so once an
executor is claimed only that lock tells a dead process (the lock is gone: its interrupted nodes move
on at once) from one merely paused (still held: it counts as alive as long as before).
"""

from __future__ import annotations

import hashlib
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

import psycopg
from psycopg_pool import ConnectionPool

__all__ = ["Heartbeat", "live_executors", "session_key"]

_log = logging.getLogger("actionspace.durable")

_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS actionspace_executors (
    executor_id text PRIMARY KEY,
    host        text NOT NULL,
    pid         integer NOT NULL,
    started_at  double precision NOT NULL,
    beat_at     double precision NOT NULL,
    state       text NOT NULL DEFAULT 'alive'
)
"""

_NODE_CLAIMS: Final = (
    """
CREATE TABLE IF NOT EXISTS actionspace_node_attempts (
    run_id      text NOT NULL,
    node_id     text NOT NULL,
    executor_id text NOT NULL,
    attempt_id  text NOT NULL,
    started_at  double precision NOT NULL
)
""",
    "CREATE INDEX IF NOT EXISTS actionspace_node_attempts_node"
    " ON actionspace_node_attempts (run_id, node_id, started_at)",
)

_CLAIM: Final = """
UPDATE actionspace_executors SET state = 'recovering', beat_at = %(now)s
WHERE executor_id <> %(me)s AND state IN ('starting', 'alive', 'recovering') AND beat_at < %(cutoff)s
RETURNING executor_id
"""

_NOTE_ATTEMPTS: Final = """
INSERT INTO actionspace_node_attempts (run_id, node_id, executor_id, attempt_id, started_at)
SELECT %s, node_id, %s, attempt_id, %s FROM unnest(%s::text[], %s::text[]) AS a(node_id, attempt_id)
"""


_CLAIMED: Final = frozenset({"recovering", "gone"})
"""States of an executor another one claimed."""

_LIVENESS: Final = """
SELECT e.beat_at, e.state, EXISTS (
    SELECT 1 FROM pg_locks l
    WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
      AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
      AND l.classid = %(high)s::bigint::oid AND l.objid = %(low)s::bigint::oid
) AS held
FROM actionspace_executors e WHERE e.executor_id = %(id)s
"""


def session_key(executor_id: str) -> int:
    """The advisory lock (a signed 64-bit key) an executor's process holds while it lives."""
    digest = hashlib.blake2b(f"actionspace-executor:{executor_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def _hold_session(conn: psycopg.Connection[Any], executor_id: str) -> None:
    """Take this executor's session lock on ``conn`` (released when the connection ends)."""
    conn.execute("SELECT pg_try_advisory_lock(%s)", (session_key(executor_id),))


def _no_commit_wait(conn: psycopg.Connection[Any]) -> None:
    """Commits of the heartbeat's pool do not wait for their fsync (see ``begin_attempts``)."""
    conn.execute("SET synchronous_commit = off")


def ensure_table(url: str) -> None:
    """Create the heartbeat table when missing (safe to run from many processes)."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT pg_advisory_lock(764110)")
        try:
            conn.execute(_SCHEMA)
            for ddl in _NODE_CLAIMS:
                conn.execute(ddl)
        finally:
            conn.execute("SELECT pg_advisory_unlock(764110)")


def live_executors(url: str, *, within_s: float) -> list[str]:
    """Executor ids with a heartbeat in the last ``within_s`` seconds."""
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT executor_id FROM actionspace_executors WHERE state = 'alive' AND beat_at >= %s",
            (time.time() - within_s,),
        ).fetchall()
    return [r[0] for r in rows]


class Heartbeat:
    """A daemon thread: beat every ``every_s``; hand over executors silent for ``dead_after_s``.

    ``recover(executor_id)`` puts a dead executor's pending workflows back on a queue (idempotent).
    """

    def __init__(
        self,
        url: str,
        executor_id: str,
        *,
        every_s: float,
        dead_after_s: float,
        recover: Callable[[str], int],
    ) -> None:
        self.url = url
        self.executor_id = executor_id
        self.every_s = every_s
        self.dead_after_s = dead_after_s
        self._recover = recover
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="actionspace-heartbeat", daemon=True)
        # autocommit: every statement of this pool is one round trip, its own transaction
        self._pool: ConnectionPool[psycopg.Connection[tuple[Any, ...]]] = ConnectionPool(
            url,
            min_size=1,
            max_size=4,
            open=False,
            kwargs={"autocommit": True},
            configure=_no_commit_wait,
        )
        self.recovered: list[str] = []
        self._opened = False
        self._conn: psycopg.Connection[tuple[Any, ...]] | None = None
        """The heartbeat's own connection, which holds this executor's session lock."""

    def open(self) -> None:
        """Create the tables, register this executor and open the pool (no beating yet)."""
        if self._opened:
            return
        self._opened = True
        ensure_table(self.url)
        with psycopg.connect(self.url, autocommit=True) as conn:
            now = time.time()
            conn.execute(
                "INSERT INTO actionspace_executors (executor_id, host, pid, started_at, beat_at, state)"
                " VALUES (%s, %s, %s, %s, %s, 'starting') ON CONFLICT (executor_id) DO UPDATE SET"
                " beat_at = excluded.beat_at, state = 'starting', pid = excluded.pid",
                (self.executor_id, socket.gethostname(), os.getpid(), now, now),
            )
        self._conn = self._session()
        self._pool.open()

    @property
    def pool(self) -> ConnectionPool[psycopg.Connection[tuple[Any, ...]]]:
        """Connections to the store's database, each statement its own transaction (whose commit
        does not wait for its fsync): for short statements of this process's workflows."""
        return self._pool

    def start(self) -> None:
        """Open (if not yet) and start beating and watching the other executors."""
        self.open()
        self._thread.start()

    def begin_attempt(self, run_id: str, node_id: str, attempt_id: str) -> None:
        """Note that this executor starts attempt ``attempt_id`` at the node now."""
        self.begin_attempts(run_id, [(node_id, attempt_id)])

    def begin_attempts(self, run_id: str, attempts: Sequence[tuple[str, str]]) -> None:
        """Note, in one statement, that this executor starts each (node id, attempt id) now.

        The commit does not wait for its fsync: an attempt matters only once the ledger holds its
        action ``dispatched``, a synchronous commit after this one, which makes it durable too.
        """
        if not attempts:
            return
        nodes = [node_id for node_id, _ in attempts]
        ids = [attempt_id for _, attempt_id in attempts]
        with self._pool.connection() as conn:
            conn.execute(_NOTE_ATTEMPTS, (run_id, self.executor_id, time.time(), nodes, ids))

    def attempt_at(self, run_id: str, node_id: str, at: float) -> tuple[str, str] | None:
        """(executor id, attempt id) of the last attempt at the node that started by ``at``."""
        with self._pool.connection() as conn:
            row = conn.execute(
                "SELECT executor_id, attempt_id FROM actionspace_node_attempts"
                " WHERE run_id = %s AND node_id = %s AND started_at <= %s"
                " ORDER BY started_at DESC LIMIT 1",
                (run_id, node_id, at),
            ).fetchone()
        return (str(row[0]), str(row[1])) if row is not None else None

    def attempted_before(self, run_id: str, attempts: Mapping[str, str]) -> bool:
        """True when a node of ``attempts`` (node id → attempt id) had another attempt than the
        one given: the step running these attempts runs again."""
        with self._pool.connection() as conn:
            row = conn.execute(
                "SELECT 1 FROM actionspace_node_attempts WHERE run_id = %s AND node_id = ANY(%s)"
                " AND NOT attempt_id = ANY(%s) LIMIT 1",
                (run_id, list(attempts), list(attempts.values())),
            ).fetchone()
        return row is not None

    def is_alive(self, executor_id: str, *, within_s: float) -> bool:
        """True when ``executor_id`` wrote a heartbeat (or was claimed) in the last ``within_s``
        seconds, unless it was claimed and its process no longer holds its session lock."""
        key = session_key(executor_id)
        with self._pool.connection() as conn:
            row = conn.execute(
                _LIVENESS, {"id": executor_id, "high": (key >> 32) & 0xFFFFFFFF, "low": key & 0xFFFFFFFF}
            ).fetchone()
        if row is None:
            return False
        beat_at, state, held = row
        if state in _CLAIMED and not held:
            return False  # claimed, and its process has gone: nothing of it still runs
        return float(beat_at) >= time.time() - within_s

    def stop(self, *, hand_over: bool = True) -> None:
        """Stop beating; ``hand_over`` lets other workers take this one's workflows at once."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)
        if self._conn is not None:  # the session lock goes with it
            self._conn.close()
            self._conn = None
        self._pool.close()
        if hand_over:
            try:
                with psycopg.connect(self.url, autocommit=True) as conn:
                    conn.execute(
                        "UPDATE actionspace_executors SET beat_at = 0 WHERE executor_id = %s",
                        (self.executor_id,),
                    )
            except psycopg.Error:
                _log.warning("actionspace: could not hand over executor %s", self.executor_id)

    def _session(self) -> psycopg.Connection[tuple[Any, ...]]:
        """A connection of the heartbeat's own, holding this executor's session lock."""
        conn = psycopg.connect(self.url, autocommit=True)
        try:
            _hold_session(conn, self.executor_id)
        except BaseException:
            conn.close()
            raise
        return conn

    def _loop(self) -> None:
        while not self._stop.wait(self.every_s):
            conn = self._conn
            try:
                if conn is None or conn.closed:
                    conn = self._conn = self._session()
                self._tick(conn)
            except Exception:  # a database hiccup: beat again next time
                _log.warning("actionspace: heartbeat of %s failed", self.executor_id, exc_info=True)
                if conn is not None:
                    conn.close()

    def _tick(self, conn: psycopg.Connection[tuple[Any, ...]]) -> None:
        now = time.time()
        conn.execute(
            "UPDATE actionspace_executors SET beat_at = %s, state = 'alive' WHERE executor_id = %s",
            (now, self.executor_id),
        )
        dead = conn.execute(
            _CLAIM, {"now": now, "me": self.executor_id, "cutoff": now - self.dead_after_s}
        ).fetchall()
        for (executor_id,) in dead:
            count = self._recover(str(executor_id))
            conn.execute(
                "UPDATE actionspace_executors SET state = 'gone' WHERE executor_id = %s", (executor_id,)
            )
            self.recovered.append(str(executor_id))
            _log.info("actionspace: took over %d workflows of dead executor %s", count, executor_id)
