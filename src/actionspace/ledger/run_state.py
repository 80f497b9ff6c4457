"""Run state that outlives a process: what any process continuing a run rebuilds it from.

A run's principal, its context label (everything the model was shown joins it), the artifacts it
was shown, its user turn and its offer pins decide what a later call of the run may do. Kept only
in the memory of the process that opened the run, they are lost when another process continues
it (a restart, an API resume, another worker): a secret read in one process could be sent out by
the next without the declassification gate. The engine writes a snapshot here whenever one of
them changes — before the observation that changed it reaches the caller — and any process that
opens the run reads it back. The call ids kept behind each label (which calls a label came from,
named in a denial's details) change with most calls and decide nothing: a snapshot that differs
from the saved one only in them is written without waiting (``save_later``, where a store has it;
the SQLite store's writer commits it within its linger).

A snapshot is a JSON object (see :meth:`actionspace.discovery.runs.RunState.snapshot`); the stores
here keep the latest one per run: in memory (``memory://``), in the SQLite file shared with the
ledger (table ``run_state``), or in PostgreSQL (table ``actionspace_run_state``).

The user's messages are part of a run's state (``sources=["user"]`` checks read them) but not of
its snapshot: a conversation would write every earlier message again at each turn. A save hands
in the messages new since the last one, numbered, and the store keeps them beside the snapshot
(tables ``run_state_text`` and ``actionspace_run_state_text``), in the same transaction; a load
returns the latest :data:`TEXTS_KEPT` of them as ``"user_texts"`` beside the snapshot's keys.

Several processes may continue one run at once. A snapshot holding an integer ``"rev"`` is
written only over the one it was made from (compare and set): ``save`` over revision ``rev - 1``
(none stored counts as 0), ``save_later`` over ``rev`` itself; otherwise nothing is written and
``save`` returns False, so the saver reads the newer snapshot back, merges and saves again
(:class:`actionspace.pipeline.runs.RunRegistry`). :meth:`rev` reads a run's revision alone.

A snapshot saved later is not lost to another process's save: given ``join``, the stores here
write ``join(stored, state)`` over whatever snapshot is stored (under its revision), and a save
writes ``join(state, stored)`` over revision ``rev - 1``: what one process saved later (the call
ids behind the run's labels, which ``join`` keeps from both) survives the other's next save.

A stored snapshot that cannot be read (another writer damaged the row, or a newer actionspace
wrote a later format) raises :class:`~actionspace.errors.RunStateError` on load, and a save over
a revision never writes over it: the process continuing the run stops instead of reading it as a
new run, and the row stays for a person to repair or delete.
"""

from __future__ import annotations

import functools
import itertools
import json
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, Protocol, cast, runtime_checkable

from actionspace._unicode import json_for_utf8, text_for_postgres, text_for_utf8
from actionspace.errors import RunStateError
from actionspace.ledger.run_nodes import PostgresNodeBlocks, SqliteNodeBlocks

__all__ = [
    "SNAPSHOT_VERSION",
    "TEXTS_KEPT",
    "MemoryRunStateStore",
    "RunStateStore",
    "SqliteRunStateStore",
    "open_run_states",
]

SNAPSHOT_VERSION: Final = 1
"""The format of a snapshot (its ``"v"``): a store refuses to read a snapshot of a later one."""
TEXTS_KEPT: Final = 1024
"""The user's messages a load returns per run, the latest (``policy.flow.MAX_REMEMBERED``)."""
_PRUNE_EVERY: Final = 256
"""A store drops a run's messages older than the latest :data:`TEXTS_KEPT` every so many."""

Texts = Sequence[tuple[int, str]]
"""The user's messages new since the last save, each with its number in the run (from 1)."""
Join = Callable[[Mapping[str, Any], Mapping[str, Any]], Mapping[str, Any]]
"""``join(base, other)``: the snapshot ``base`` with what only ``other`` holds of the run kept too."""

_SQLITE_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS run_state_meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS run_state (
    run_id     TEXT PRIMARY KEY,
    state      TEXT NOT NULL,
    updated_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS run_state_text (
    run_id TEXT NOT NULL,
    n      INTEGER NOT NULL,
    text   TEXT NOT NULL,
    PRIMARY KEY (run_id, n)
) WITHOUT ROWID
"""
SCHEMA_VERSION: Final = 2
"""2: the user's messages are kept beside the snapshots (a store of version 1 is read as it is;
an actionspace that reads only version 1 refuses a store created as version 2)."""
_UPSERT_TAIL: Final = (
    " ON CONFLICT (run_id) DO UPDATE SET state = excluded.state, updated_at = excluded.updated_at"
)
_SQLITE_UPSERT: Final = "INSERT INTO run_state (run_id, state, updated_at) VALUES (?, ?, ?)" + _UPSERT_TAIL
# A row that is not JSON has no revision (NULL; json_extract would raise a bare driver error):
# a save over a revision never replaces it, a read of its revision raises RunStateError.
_SQLITE_STORED_REV: Final = "CASE WHEN json_valid({0}) THEN coalesce(json_extract({0}, '$.rev'), 0) END"
_SQLITE_UPSERT_IF: Final = _SQLITE_UPSERT + f" WHERE {_SQLITE_STORED_REV.format('run_state.state')} = ?"
_SQLITE_REV: Final = f"SELECT {_SQLITE_STORED_REV.format('state')} FROM run_state WHERE run_id = ?"
# PostgreSQL keeps the revision in a column: ``jsonb`` (and ``json`` operators) refuse snapshots
# holding escapes of U+0000 or lone surrogates, which a run's call ids and texts may hold.
_PG_UPSERT: Final = (
    "INSERT INTO actionspace_run_state (run_id, state, updated_at) VALUES (%s, %s, %s)" + _UPSERT_TAIL
)
_PG_UPSERT_IF: Final = (
    "INSERT INTO actionspace_run_state (run_id, state, updated_at, rev) VALUES (%s, %s, %s, %s)"
    + _UPSERT_TAIL
    + ", rev = excluded.rev WHERE actionspace_run_state.rev = %s"
)
_PG_REV: Final = "SELECT rev FROM actionspace_run_state WHERE run_id = %s"
_PG_STATE: Final = "SELECT state FROM actionspace_run_state WHERE run_id = %s"
_PG_STATE_FOR_UPDATE: Final = _PG_STATE + " FOR UPDATE"
_PG_TEXTS: Final = "SELECT text FROM actionspace_run_state_text WHERE run_id = %s ORDER BY n DESC LIMIT %s"
_PG_PRUNE: Final = "DELETE FROM actionspace_run_state_text WHERE run_id = %s AND n <= %s"
_SQLITE_TEXT: Final = "INSERT OR REPLACE INTO run_state_text (run_id, n, text) VALUES (?, ?, ?)"
_SQLITE_PRUNE: Final = "DELETE FROM run_state_text WHERE run_id = ? AND n <= ?"
_SQLITE_TEXTS: Final = "SELECT text FROM run_state_text WHERE run_id = ? ORDER BY n DESC LIMIT ?"


@runtime_checkable
class RunStateStore(Protocol):
    """The latest snapshot of each run's state."""

    def load(self, run_id: str) -> Mapping[str, Any] | None:
        """The run's latest snapshot, or None when none was saved; with ``"user_texts"``, the
        latest :data:`TEXTS_KEPT` messages saved, oldest first, when there are any. Raises
        RunStateError when the stored snapshot cannot be read (never None: see the module)."""
        ...

    def save(self, run_id: str, state: Mapping[str, Any], texts: Texts = ()) -> bool | None:
        """Replace the run's snapshot and add the user's messages ``texts`` (durable when this
        returns, for a database store; both or neither).

        A store may also offer ``save_later(run_id, state, texts)``: the same without waiting,
        used when only the call ids kept behind the run's labels changed; without it ``save`` is
        used. A snapshot saved later never replaces a newer one; its texts are written anyway.
        A store that keeps revisions (see the module docstring) returns False when another
        snapshot was saved since revision ``state["rev"] - 1``, and ``rev(run_id)`` gives it.
        A store may take ``join=`` (:data:`Join`) with both methods: see the module docstring.
        """
        ...


def _decoded(run_id: str, text: str) -> dict[str, Any]:
    """The snapshot of ``run_id`` stored as ``text``. Raises RunStateError when it is not a JSON
    object or is of a format this version does not read: a damaged row is never a new run."""
    try:
        state: object = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise RunStateError(f"the stored state of run {run_id!r} is not JSON ({exc})") from exc
    version = state.get("v", SNAPSHOT_VERSION) if isinstance(state, dict) else None
    if type(version) is not int or not 0 < version <= SNAPSHOT_VERSION:
        what = f"of format {version!r}" if isinstance(state, dict) else f"a {type(state).__name__}"
        raise RunStateError(
            f"the stored state of run {run_id!r} is {what}: this actionspace reads format {SNAPSHOT_VERSION}"
        )
    return cast("dict[str, Any]", state)


def _rev(state: Mapping[str, Any]) -> int | None:
    """The revision a snapshot holds (None: it holds none, and is written unconditionally)."""
    rev = state.get("rev")
    return rev if type(rev) is int else None


def _encode(state: Mapping[str, Any]) -> str:
    text = json.dumps(dict(state), ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return text if text.isascii() else json_for_utf8(text)  # an unpaired surrogate as its escape


def _joined(
    run_id: str, state: Mapping[str, Any], stored: str | None, join: Join | None, step: int
) -> Mapping[str, Any] | None:
    """What a save (``step`` 1) or a later save (0) of ``state`` writes over the ``stored``
    snapshot (None: another one was saved since the save's revision). Raises RunStateError
    over a stored snapshot that cannot be read (:func:`_decoded`): nothing is written over it."""
    if join is None or stored is None:
        return state
    old = _decoded(run_id, stored)
    if step == 0:
        return join(old, state)  # its revision, with the call ids saved later kept
    if (_rev(old) or 0) != (_rev(state) or 0) - 1:
        return None
    return join(state, old)


def _with_texts(run_id: str, text: str, texts: list[str]) -> dict[str, Any]:
    state = _decoded(run_id, text)
    if texts:
        state["user_texts"] = texts
    return state


def _pruned_below(texts: Texts) -> int:
    """The number up to which a run's older messages go, when ``texts`` crossed a prune point (else 0)."""
    if not texts:
        return 0
    first, last = texts[0][0], texts[-1][0]
    if last <= TEXTS_KEPT or (first - 1) // _PRUNE_EVERY == last // _PRUNE_EVERY:
        return 0
    return last - TEXTS_KEPT


class MemoryRunStateStore:
    """Snapshots in this process (``memory://``): a run evicted from the engine comes back from here."""

    def __init__(self) -> None:
        self._states: dict[str, str] = {}
        self._texts: dict[str, dict[int, str]] = {}
        self._revs: dict[str, int] = {}
        self._lock = threading.Lock()

    def load(self, run_id: str) -> Mapping[str, Any] | None:
        with self._lock:
            text = self._states.get(run_id)
            kept = self._texts.get(run_id) or {}
            texts = [kept[n] for n in sorted(kept)[-TEXTS_KEPT:]]
        return None if text is None else _with_texts(run_id, text, texts)

    def rev(self, run_id: str) -> int | None:
        """The revision of the run's snapshot (0: saved without one; None: none saved)."""
        with self._lock:
            return self._revs.get(run_id)

    def save(
        self, run_id: str, state: Mapping[str, Any], texts: Texts = (), *, join: Join | None = None
    ) -> bool:
        return self._save(run_id, state, texts, 1, join)

    def save_later(
        self, run_id: str, state: Mapping[str, Any], texts: Texts = (), *, join: Join | None = None
    ) -> bool:
        return self._save(run_id, state, texts, 0, join)

    def _save(
        self, run_id: str, state: Mapping[str, Any], texts: Texts, step: int, join: Join | None
    ) -> bool:
        text = _encode(state)  # a snapshot that cannot be encoded fails here, as in a database store
        below = _pruned_below(texts)
        rev = _rev(state)
        with self._lock:
            if rev is not None and join is not None:
                joined = _joined(run_id, state, self._states.get(run_id), join, step)
                if joined is None:
                    return False
                if joined is not state:
                    text, rev = _encode(joined), _rev(joined)
            if rev is not None and self._revs.get(run_id, 0) != rev - step:
                return False
            self._states[run_id] = text
            self._revs[run_id] = rev or 0
            if texts:
                kept = self._texts.setdefault(run_id, {})
                kept.update((int(n), str(t)) for n, t in texts)
                for n in [n for n in kept if n <= below]:
                    del kept[n]
        return True


class SqliteRunStateStore(SqliteNodeBlocks):
    """Snapshots in the SQLite file shared with the ledger and the trace (table ``run_state``).

    A save returns once on disk; it shares the file's writer (and its fsync) with the ledger.
    :meth:`save_later` returns at once: the snapshot is one of the writer's deferred operations,
    committed within its linger, unless a newer snapshot of the run was saved meanwhile."""

    def __init__(self, path: str | Path, *, busy_timeout_s: float = 30.0) -> None:
        from actionspace.ledger.sqlite import GroupCommit, SqliteConnections

        self._db = SqliteConnections(path, synchronous="FULL", busy_timeout_s=busy_timeout_s)
        try:
            self._db.init_schema(_SQLITE_SCHEMA, "run_state_meta", "schema_version", SCHEMA_VERSION)
        except BaseException:
            self._db.close()
            raise
        self._group = GroupCommit.open(path, busy_timeout_s=busy_timeout_s)
        self.rev_row = functools.partial(self._group.read_kept, _SQLITE_REV, readers=self._db)
        """:meth:`rev` without a frame (C only): its row, the revision unchecked; None: none saved."""
        self._latest: dict[str, int] = {}
        """Run → number of its newest snapshot handed in (a deferred older one is not written)."""
        self._numbers = itertools.count(1)
        self._lock = threading.Lock()

    def load(self, run_id: str) -> Mapping[str, Any] | None:
        self._group.settle()  # a snapshot saved for later is read back like any other
        conn = self._db.conn()
        row = conn.execute("SELECT state FROM run_state WHERE run_id = ?", (run_id,)).fetchone()
        if row is None:
            return None
        texts = [t for (t,) in conn.execute(_SQLITE_TEXTS, (run_id, TEXTS_KEPT)).fetchall()]
        texts.reverse()
        return _with_texts(run_id, row[0], texts)

    def rev(self, run_id: str) -> int | None:
        """The revision of the run's snapshot (0: saved without one; None: none saved), by one indexed read
        (:meth:`GroupCommit.read_kept`; the writes ``forget`` it) that commits nothing deferred."""
        row = self.rev_row(run_id)
        if row is not None and type(row[0]) is not int:
            raise RunStateError(f"the stored state of run {run_id!r} holds no readable revision ({row[0]!r})")
        return None if row is None else int(row[0])

    def save(
        self, run_id: str, state: Mapping[str, Any], texts: Texts = (), *, join: Join | None = None
    ) -> bool:
        self._db.check_open()
        self._number(run_id)
        params, rows, below = self._params(run_id, state, texts, 1)

        def write(conn: Any) -> bool:
            upsert = self._joined_upsert(conn, run_id, state, join, 1, params)
            if upsert is None or conn.execute(*upsert).rowcount == 0:
                return False  # another snapshot was saved since this one's revision
            self._write_texts(conn, run_id, rows, below)
            return True

        return bool(self._group.run(write))

    def save_later(
        self, run_id: str, state: Mapping[str, Any], texts: Texts = (), *, join: Join | None = None
    ) -> None:
        """:meth:`save` without waiting: the file's writer commits it within ``LINGER_S`` (or a
        read commits it first), unless a newer snapshot of the run was saved meanwhile, here or,
        for a snapshot with a revision, by another process (then, given ``join``, it is joined
        to that one; the texts are written in any case)."""
        self._db.check_open()
        number = self._number(run_id)
        params, rows, below = self._params(run_id, state, texts, 0)

        def write(conn: Any) -> None:
            if self._latest.get(run_id) == number:  # else a newer snapshot was saved: keep it
                conn.execute(*(self._joined_upsert(conn, run_id, state, join, 0, params) or params))
            self._write_texts(conn, run_id, rows, below)

        self._group.defer(write)

    @classmethod
    def _joined_upsert(
        cls,
        conn: Any,
        run_id: str,
        state: Mapping[str, Any],
        join: Join | None,
        step: int,
        params: tuple[str, tuple[Any, ...]],
    ) -> tuple[str, tuple[Any, ...]] | None:
        """The upsert of :func:`_joined` over the stored snapshot (``params``: of ``state`` itself)."""
        if join is None or _rev(state) is None:
            return params
        row = conn.execute("SELECT state FROM run_state WHERE run_id = ?", (run_id,)).fetchone()
        joined = _joined(run_id, state, None if row is None else row[0], join, step)
        if joined is None or joined is state:
            return None if joined is None else params
        return cls._upsert(run_id, joined, step)

    @classmethod
    def _params(
        cls, run_id: str, state: Mapping[str, Any], texts: Texts, step: int
    ) -> tuple[tuple[str, tuple[Any, ...]], list[tuple[str, int, str]], int]:
        """The upsert of ``state`` (over revision ``rev - step`` only, when it holds one)."""
        return (cls._upsert(run_id, state, step), *cls._rows(run_id, texts))

    @staticmethod
    def _upsert(run_id: str, state: Mapping[str, Any], step: int) -> tuple[str, tuple[Any, ...]]:
        rev, row = _rev(state), (run_id, _encode(state), time.time())
        return (_SQLITE_UPSERT, row) if rev is None else (_SQLITE_UPSERT_IF, (*row, rev - step))

    @staticmethod
    def _rows(run_id: str, texts: Texts) -> tuple[list[tuple[str, int, str]], int]:
        return [(run_id, int(n), text_for_utf8(str(t))) for n, t in texts], _pruned_below(texts)

    def _write_texts(self, conn: Any, run_id: str, rows: list[tuple[str, int, str]], below: int) -> None:
        self._group.forget(run_id)  # by every write of a snapshot: the revision :meth:`rev` kept is old
        if rows:
            conn.executemany(_SQLITE_TEXT, rows)
        if below:
            conn.execute(_SQLITE_PRUNE, (run_id, below))

    def _number(self, run_id: str) -> int:
        with self._lock:
            number = self._latest[run_id] = next(self._numbers)
            if len(self._latest) > 65_536:  # runs long gone: their deferred writes are committed
                self._group.settle()
                self._latest = {run_id: number}
            return number

    def close(self) -> None:
        if not self._db.closed:
            self._group.close()
        self._db.close()


class PostgresRunStateStore(PostgresNodeBlocks):
    """Snapshots in PostgreSQL (table ``actionspace_run_state``), shared by every process and host.
    ``settle_s`` (seconds, default 30, ``postgres_pool.SETTLE_S``): how long a save whose ``COMMIT``
    got no answer is asked about before it is ``unknown_commit`` (``PostgresConnections``)."""

    remote = True
    """Its reads wait on the network: async callers read it from a worker thread."""

    def __init__(self, url: str, *, connect_timeout_s: float = 10.0, settle_s: float = 30.0) -> None:
        from actionspace.ledger.postgres import PostgresConnections

        self._db = PostgresConnections(
            url, name="run_state", max_size=4, connect_timeout_s=connect_timeout_s, settle_s=settle_s
        )
        try:
            self._db.init_schema(
                (
                    "CREATE TABLE IF NOT EXISTS actionspace_run_state_meta"
                    " (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
                    "CREATE TABLE IF NOT EXISTS actionspace_run_state"
                    " (run_id TEXT PRIMARY KEY, state TEXT NOT NULL, updated_at DOUBLE PRECISION NOT NULL)",
                    "CREATE TABLE IF NOT EXISTS actionspace_run_state_text"
                    " (run_id TEXT NOT NULL, n BIGINT NOT NULL, text TEXT NOT NULL, PRIMARY KEY (run_id, n))",
                    "ALTER TABLE actionspace_run_state"
                    " ADD COLUMN IF NOT EXISTS rev BIGINT NOT NULL DEFAULT 0",
                ),
                meta_table="actionspace_run_state_meta",
                meta_key="schema_version",
                version=SCHEMA_VERSION,
                what="the run state",
            )
        except BaseException:
            self._db.close()
            raise

    def load(self, run_id: str) -> Mapping[str, Any] | None:
        with self._db.connection() as conn:
            row = conn.execute(_PG_STATE, (run_id,)).fetchone()
            if row is None:
                return None
            rows = conn.execute(_PG_TEXTS, (run_id, TEXTS_KEPT)).fetchall()
        return _with_texts(run_id, row["state"], [r["text"] for r in reversed(rows)])

    def rev(self, run_id: str) -> int | None:
        """The revision of the run's snapshot (0: saved without one; None: none saved)."""
        with self._db.connection() as conn:
            row = conn.execute(_PG_REV, (run_id,)).fetchone()
        return None if row is None else int(row["rev"])

    def save(
        self, run_id: str, state: Mapping[str, Any], texts: Texts = (), *, join: Join | None = None
    ) -> bool:  # a session the server ended under it: asked again on a new connection (none was kept)
        return self._db.transaction_again(lambda conn: self._save(conn, run_id, state, texts, 1, join))

    def save_later(
        self, run_id: str, state: Mapping[str, Any], texts: Texts = (), *, join: Join | None = None
    ) -> bool:
        """:meth:`save` over the revision ``state`` holds itself (what changed beside it is kept);
        given ``join``, over whichever revision is stored, joined to it."""
        return self._db.transaction_again(lambda conn: self._save(conn, run_id, state, texts, 0, join))

    def _save(
        self, conn: Any, run_id: str, state: Mapping[str, Any], texts: Texts, step: int, join: Join | None
    ) -> bool:
        text = _encode(state)
        below = _pruned_below(texts)
        rev = _rev(state)
        if rev is not None and join is not None:
            row = conn.execute(_PG_STATE_FOR_UPDATE, (run_id,)).fetchone()
            joined = _joined(run_id, state, None if row is None else row["state"], join, step)
            if joined is None:
                return False  # another snapshot was saved since this one's revision
            if joined is not state:
                text, rev = _encode(joined), _rev(joined)
        if rev is None:
            conn.execute(_PG_UPSERT, (run_id, text, time.time()))
        elif conn.execute(_PG_UPSERT_IF, (run_id, text, time.time(), rev, rev - step)).rowcount == 0:
            return False  # another snapshot was saved since this one's revision
        if texts:
            with conn.cursor() as cur:
                cur.executemany(
                    "INSERT INTO actionspace_run_state_text (run_id, n, text) VALUES (%s, %s, %s)"
                    " ON CONFLICT (run_id, n) DO UPDATE SET text = excluded.text",
                    [(run_id, int(n), text_for_postgres(str(t))) for n, t in texts],
                )
        if below:
            conn.execute(_PG_PRUNE, (run_id, below))
        return True

    def close(self) -> None:
        self._db.close()


def open_run_states(url: str) -> RunStateStore:
    """The run-state store ``url`` names (the same URL as the ledger's)."""
    from actionspace.ledger.open import scheme_of, sqlite_file

    scheme = scheme_of(url)
    if scheme == "memory":
        return MemoryRunStateStore()
    if scheme == "sqlite":
        return SqliteRunStateStore(sqlite_file(url))
    return PostgresRunStateStore(url)
