"""The SQLite writer runs its own statements (``BEGIN``, ``COMMIT``, the run's ``data_version``
read) on a cursor it keeps per writing connection: ``Connection.execute`` makes (and registers) a
new cursor for every statement, three a durable call on the caller's thread before."""

from __future__ import annotations

import os
import sqlite3
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

from actionspace import Runtime, ToolCall
from actionspace.ledger import sqlite_writer
from actionspace.ledger.sqlite import SqliteLedgerStore
from tests.ledger.factories import entry

CALLS = 40
_SCHEMA = {"type": "object", "properties": {"key": {"type": "string"}, "value": {"type": "integer"}}}
_MADE = ("Connection.execute", "Connection.cursor", "Connection.commit")


class _Counted:
    def __init__(self) -> None:
        self.on = False
        self.thread = threading.get_ident()
        self.made = 0
        """Cursors made by the connection on the watched thread (``execute``, ``cursor``, ``commit``)."""


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Counted]:
    c = _Counted()

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        mine = event == "c_call" and c.on and threading.get_ident() == c.thread
        if mine and getattr(arg, "__qualname__", "") in _MADE:
            c.made += 1

    monkeypatch.setattr(sqlite_writer, "LINGER_S", 600.0)  # the trace's rows wait for the close
    sys.setprofile(profile)
    try:
        yield c
    finally:
        sys.setprofile(None)


def test_durable_calls_make_no_cursor_a_statement_on_the_callers_thread(
    tmp_path: Path, counted: _Counted
) -> None:
    rt = Runtime(f"sqlite:///{tmp_path / 'a.db'}", recover_on_start=False)
    rt.add_tool(name="put", input_schema=_SCHEMA, fn=lambda key, value: value, effect="write", blocking=False)
    try:
        run = rt.new_run()
        for i in range(20 + CALLS):
            counted.on = i >= 20
            obs = rt.call(
                ToolCall(name="put", arguments={"key": f"k{i}", "value": i}), run_id=run, node_id=f"n{i}"
            )
            assert (obs.status, obs.data) == ("ok", i)
        counted.on = False
        assert counted.made == 0
        entries = rt.ledger.entries_of(run, [f"n{i}" for i in range(20 + CALLS)])
        assert len(entries) == 20 + CALLS and {e.state for e in entries.values()} == {"committed"}
    finally:
        rt.close()


def test_the_kept_cursor_is_of_the_writing_connection_and_a_forked_child_gets_its_own(tmp_path: Path) -> None:
    store = SqliteLedgerStore(tmp_path / "f.db")
    try:
        assert store.begin(entry(node_id="parent")).created
        wal = store._group._wal
        assert wal is not None and wal[2].connection is wal[0] is store._group._db.writer()
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: a writer of its own, its cursor with it
            ok = b"0"
            try:
                created = store.begin(entry(node_id="child")).created
                mine = store._group._wal
                own = mine is not None and mine[0] is not wal[0] and mine[2].connection is mine[0]
                ok = b"1" if created and own else b"0"
            finally:
                os.write(write, ok)
                os._exit(0)
        os.close(write)
        assert os.read(read, 1) == b"1"
        os.waitpid(pid, 0)
        assert store.begin(entry(node_id="parent-again")).created
        assert store._group._wal is wal
        assert store.get_node("r1", "child") is not None
    finally:
        store.close()


def test_a_failed_statement_on_the_kept_cursor_leaves_the_writer_ready(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    store = SqliteLedgerStore(path, busy_timeout_s=0.05)
    other = sqlite3.connect(path, isolation_level=None, timeout=0.05)
    try:
        assert store.begin(entry(node_id="n1")).created
        other.execute("BEGIN IMMEDIATE")  # another process's writer holds the file: BEGIN fails
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            store.begin(entry(node_id="n2"))
        other.execute("ROLLBACK")
        assert not store._group._db.writer().in_transaction
        assert store.begin(entry(node_id="n2")).created
        assert [r[0] for r in other.execute("SELECT node_id FROM ledger_entries ORDER BY node_id")] == [
            "n1",
            "n2",
        ]
    finally:
        other.close()
        store.close()
