"""A durable call on SQLite: the statements its file's writer runs, and the system calls around them.

The writing connection stays at ``synchronous=NORMAL``; a durable commit (the intent) is followed by
an ``fdatasync`` of the WAL file before its caller is answered, the system call SQLite makes at FULL,
so the level is not switched twice a call. A forked child is noticed without asking the kernel for
the process id on every statement. What is written, and when it is on disk, is unchanged: the intent
is synced before the tool runs, the outcome is only written to the WAL.
"""

from __future__ import annotations

import functools
import gc
import os
import sqlite3
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actionspace import Runtime, ToolCall
from actionspace.ledger import sqlite_writer
from actionspace.ledger.sqlite import GroupCommit, SqliteConnections, SqliteLedgerStore
from tests.ledger.factories import entry

CALLS = 60
STATEMENTS = 7
"""Statements a durable call runs on its thread, as the statement trace reports them: a ``BEGIN``,
the pending read, the insert (reported twice: once more for its tenant trigger) and a ``COMMIT`` for
the intent, the writer's ``data_version`` read, and the outcome's update, which commits by itself
(``test_w22_outcome_autocommit``). Earlier code ran 11 (two ``PRAGMA synchronous`` switches more),
then 9 (a ``BEGIN`` and a ``COMMIT`` around the update)."""
_SCHEMA = {"type": "object", "properties": {"key": {"type": "string"}, "value": {"type": "integer"}}}


def _wal_inode(path: Path) -> int:
    return os.stat(f"{path}-wal").st_ino


class _Watch:
    """The statements run and the process ids and syncs asked for on one thread, while counting."""

    def __init__(self) -> None:
        self.on = False
        self.thread = threading.get_ident()
        self.statements: Counter[str] = Counter()
        self.getpid = 0
        self.synced: list[int] = []
        """The inode of each descriptor synced by ``os.fdatasync``."""

    def mine(self) -> bool:
        return self.on and threading.get_ident() == self.thread


@pytest.fixture
def watch(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Watch]:
    w = _Watch()
    connect, getpid, fdatasync = sqlite3.connect, os.getpid, os.fdatasync

    def watching(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn: sqlite3.Connection = connect(*args, **kwargs)
        conn.set_trace_callback(
            lambda sql: w.statements.update([sql.split()[0].upper()]) if w.mine() else None
        )
        return conn

    def counting_getpid() -> int:
        w.getpid += w.mine()
        return getpid()

    def syncing(fd: int) -> None:
        fdatasync(fd)
        if w.mine():
            w.synced.append(os.fstat(fd).st_ino)

    monkeypatch.setattr(sqlite3, "connect", watching)
    monkeypatch.setattr(os, "getpid", counting_getpid)
    monkeypatch.setattr(os, "fdatasync", syncing)
    monkeypatch.setattr(sqlite_writer, "LINGER_S", 600.0)  # the trace waits for the close
    yield w


def _runtime(path: Path, tool: Any) -> Runtime:
    rt = Runtime(f"sqlite:///{path}", recover_on_start=False)
    rt.add_tool(name="put", input_schema=_SCHEMA, fn=tool, effect="write", blocking=False)
    return rt


def test_a_durable_call_switches_no_sync_level_and_asks_no_process_id(tmp_path: Path, watch: _Watch) -> None:
    rt = _runtime(tmp_path / "a.db", lambda key, value: value)
    try:
        run = rt.new_run()

        def call(i: int) -> None:
            obs = rt.call(
                ToolCall(name="put", arguments={"key": f"k{i}", "value": i}), run_id=run, node_id=f"n{i}"
            )
            assert (obs.status, obs.data) == ("ok", i), obs

        for i in range(20):
            call(i)
        watch.on = True
        for i in range(20, 20 + CALLS):
            call(i)
        watch.on = False
        pragmas = watch.statements["PRAGMA"]
        assert pragmas <= CALLS, watch.statements  # data_version once a call; no level switched
        assert sum(watch.statements.values()) / CALLS <= STATEMENTS, watch.statements
        assert watch.getpid == 0
        entries = rt.ledger.entries_of(run, [f"n{i}" for i in range(20 + CALLS)])
        assert {e.state for e in entries.values()} == {"committed"} and len(entries) == 20 + CALLS
    finally:
        rt.close()


def test_the_intent_is_synced_on_the_wal_before_the_tool_runs_and_the_outcome_is_not(
    tmp_path: Path, watch: _Watch
) -> None:
    path = tmp_path / "a.db"
    at_tool: dict[str, Any] = {}

    def put(key: str, value: int) -> int:
        at_tool["synced"] = list(watch.synced)
        other = sqlite3.connect(path)
        try:
            row = other.execute("SELECT state FROM ledger_entries WHERE node_id = ?", (key,)).fetchone()
        finally:
            other.close()
        at_tool["state"] = row[0]
        return value

    rt = _runtime(path, put)
    try:
        run = rt.new_run()
        for i in range(5):
            rt.call(ToolCall(name="put", arguments={"key": f"w{i}", "value": i}), run_id=run, node_id=f"w{i}")
        watch.on = True
        obs = rt.call(ToolCall(name="put", arguments={"key": "n1", "value": 7}), run_id=run, node_id="n1")
        watch.on = False
        assert (obs.status, obs.data) == ("ok", 7)
        assert at_tool["state"] == "dispatched"
        assert at_tool["synced"] == [_wal_inode(path)]  # the intent: the WAL itself, once, before the tool
        assert watch.synced == at_tool["synced"]  # the outcome: written to the WAL, not synced
        assert rt.ledger.get_node(run, "n1").state == "committed"  # type: ignore[union-attr]
    finally:
        rt.close()


def test_a_file_not_in_wal_mode_keeps_every_commit_at_its_own_level(tmp_path: Path, watch: _Watch) -> None:
    db = SqliteConnections(tmp_path / "j.db", synchronous="FULL", busy_timeout_s=10.0)
    with db.write() as conn:  # a rollback journal: the writer has no WAL to sync
        conn.execute("CREATE TABLE t (v INTEGER)")
    group = GroupCommit(db)
    try:
        group.run(lambda conn: conn.execute("INSERT INTO t VALUES (1)"), durable=False)
        group.run(lambda conn: conn.execute("INSERT INTO t VALUES (2)"))
        writer = db.writer()
        assert writer.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
        assert writer.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL, never lowered
        assert [r[0] for r in db.conn().execute("SELECT v FROM t ORDER BY v")] == [1, 2]
    finally:
        group.close()
        db.close()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_syncs_the_wal_through_a_descriptor_of_its_own(tmp_path: Path) -> None:
    path = tmp_path / "f.db"
    store = SqliteLedgerStore(path)
    store.begin(entry(node_id="parent"))
    inherited = store._group._wal
    assert inherited is not None and inherited[1] is not None
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: begin through the inherited store, report, leave at once
        ok = b"0"
        try:
            created = store.begin(entry(node_id="child")).created
            wal = store._group._wal
            own = wal is not None and wal[1] is not None and wal[0] is not inherited[0]
            same_file = own and wal is not None and os.fstat(wal[1]).st_ino == _wal_inode(path)  # type: ignore[arg-type]
            ok = b"1" if created and own and same_file else b"0"
        finally:
            os.write(write, ok)
            os._exit(0)
    os.close(write)
    assert os.read(read, 1) == b"1"
    os.waitpid(pid, 0)
    assert store.begin(entry(node_id="parent-again")).created
    assert store._group._wal is inherited  # the parent's own, untouched by the child
    assert store.get_node("r1", "child") is not None
    store.close()


def _insert_meta(conn: sqlite3.Connection, key: str) -> None:
    conn.execute("INSERT INTO meta VALUES (?, '1')", (key,))


def _wal_descriptors(path: Path) -> int:
    wal = f"{path}-wal"
    found = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            found += os.readlink(f"/proc/self/fd/{fd}") == wal
        except OSError:
            continue
    return found


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc")
def test_a_writer_closed_or_dropped_leaves_no_descriptor_of_the_wal_open(tmp_path: Path) -> None:
    path = tmp_path / "d.db"
    keep = SqliteConnections(path, synchronous="FULL", busy_timeout_s=10.0)
    keep.init_schema("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)", "meta", "v", 1)
    before = _wal_descriptors(path)
    for i in range(20):
        db = SqliteConnections(path, synchronous="FULL", busy_timeout_s=10.0)
        group = GroupCommit(db)
        group.run(functools.partial(_insert_meta, key=f"k{i}"))
        assert group._wal is not None and group._wal[1] is not None
        if i % 2:
            group.close()
        else:  # dropped without closing: its connections go with it, and so does the descriptor
            db.close()
            del group
    del group, db  # the last writer, closed (its connections are the caller's)
    gc.collect()
    assert _wal_descriptors(path) == before
    assert keep.conn().execute("SELECT count(*) FROM meta").fetchone()[0] == 21
    keep.close()
