"""A durable call on SQLite: the outcome is one statement, with no transaction of its own around it.

A transition is a conditional ``UPDATE`` (and, only when it changed nothing, one more that may
write): each statement is whole on its own, so a lone transition runs in SQLite's autocommit, the
statement taking the file's write lock when it starts and committing when it ends, with no
``BEGIN IMMEDIATE`` and ``COMMIT`` of ours around it. The writer's own ``COMMIT`` of a transaction
is a cached statement (``Connection.commit`` compiles one every time). What is written and when it
is durable is unchanged; a transition that fails writes nothing, and the writer is left ready.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

from actionspace import Runtime, ToolCall
from actionspace.ledger import sqlite_writer
from actionspace.ledger.sqlite import SqliteLedgerStore
from tests.ledger.factories import NOW, entry
from tests.proc import DEADLINE_S

CALLS = 60
STATEMENTS = 7
"""Statements a durable call runs on its thread: ``BEGIN``, the pending read, the insert (reported
twice: once more for its tenant trigger) and ``COMMIT`` for the intent, the writer's
``data_version`` read, and the outcome's ``UPDATE`` alone. The code before ran 9 (a ``BEGIN`` and a
``COMMIT`` around the ``UPDATE``)."""
_SCHEMA = {"type": "object", "properties": {"key": {"type": "string"}, "value": {"type": "integer"}}}


class _Seen:
    def __init__(self) -> None:
        self.on = False
        self.thread = threading.get_ident()
        self.statements: list[str] = []
        self.commits = 0
        """``Connection.commit`` calls on the watched thread (each compiles its ``COMMIT`` anew)."""

    def mine(self) -> bool:
        return self.on and threading.get_ident() == self.thread


@pytest.fixture
def seen(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Seen]:
    s = _Seen()
    connect = sqlite3.connect

    def watching(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn: sqlite3.Connection = connect(*args, **kwargs)
        conn.set_trace_callback(lambda sql: s.statements.append(sql.split()[0].upper()) if s.mine() else None)
        return conn

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event == "c_call" and getattr(arg, "__qualname__", "") == "Connection.commit" and s.mine():
            s.commits += 1

    monkeypatch.setattr(sqlite3, "connect", watching)
    monkeypatch.setattr(sqlite_writer, "LINGER_S", 600.0)  # the trace waits for the close
    sys.setprofile(profile)
    try:
        yield s
    finally:
        sys.setprofile(None)


def test_a_durable_calls_outcome_is_one_statement_and_no_commit_is_compiled(
    tmp_path: Path, seen: _Seen
) -> None:
    rt = Runtime(f"sqlite:///{tmp_path / 'a.db'}", recover_on_start=False)
    rt.add_tool(name="put", input_schema=_SCHEMA, fn=lambda key, value: value, effect="write", blocking=False)
    try:
        run = rt.new_run()

        def call(i: int) -> None:
            put = ToolCall(name="put", arguments={"key": f"k{i}", "value": i})
            obs = rt.call(put, run_id=run, node_id=f"n{i}")
            assert (obs.status, obs.data) == ("ok", i), obs

        for i in range(20):
            call(i)
        seen.on = True
        for i in range(20, 20 + CALLS):
            call(i)
        seen.on = False
        counted = Counter(seen.statements)
        assert len(seen.statements) / CALLS <= STATEMENTS, counted
        # the intent is one statement in autocommit too (``test_w91_intent_one_statement``)
        assert counted["UPDATE"] == CALLS and counted["BEGIN"] == counted["COMMIT"] == 0, counted
        for at, sql in enumerate(seen.statements):  # no transaction of ours is open around an outcome
            if sql == "UPDATE":
                assert seen.statements[:at].count("BEGIN") == seen.statements[:at].count("COMMIT")
        assert seen.commits == 0
        entries = rt.ledger.entries_of(run, [f"n{i}" for i in range(20 + CALLS)])
        assert {e.state for e in entries.values()} == {"committed"} and len(entries) == 20 + CALLS
        assert all(
            e.observation is not None and e.observation["data"] == int(e.node_id[1:])
            for e in entries.values()
        )
    finally:
        rt.close()


def test_an_outcome_refused_by_a_held_write_lock_writes_nothing_and_the_writer_goes_on(
    tmp_path: Path,
) -> None:
    path = tmp_path / "l.db"
    store = SqliteLedgerStore(path, busy_timeout_s=0.05)
    other = sqlite3.connect(path, isolation_level=None, timeout=0.05)
    try:
        begun = entry(node_id="n1", state="dispatched", attempts=1)
        assert store.begin(begun).created
        done = begun.evolve(state="committed", observation={"data": 1})
        other.execute("BEGIN IMMEDIATE")  # another process's writer holds the file
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            store.transition(begun.key, ("dispatched",), done)
        assert not store._group._db.writer().in_transaction
        other.execute("ROLLBACK")
        assert store.get(begun.key).state == "dispatched"  # type: ignore[union-attr]
        stored = store.transition(begun.key, ("dispatched",), done)
        assert stored is not None and stored.state == "committed"
        assert store.transition(begun.key, ("dispatched",), done) is None  # moved once only
        assert other.execute("SELECT state, observation FROM ledger_entries").fetchall() == [
            ("committed", '{"data": 1}')
        ]
        assert store.begin(entry(node_id="n2")).created  # the writer still begins transactions
    finally:
        other.close()
        store.close()


_RACER = """
import sys
from actionspace.ledger.sqlite import SqliteLedgerStore
from tests.ledger.factories import NOW, entry
store = SqliteLedgerStore(sys.argv[1])
print("ready", flush=True)
sys.stdin.readline()
won = 0
for i in range(int(sys.argv[2])):
    begun = entry(node_id=f"n{i}", state="dispatched", attempts=1, at=NOW + i)
    moved = store.transition(begun.key, ("dispatched",), begun.evolve(state="failed", error={"by": "child"}))
    won += moved is not None
store.close()
print(won, flush=True)
"""


def test_two_processes_moving_the_same_entries_each_entry_moves_once(tmp_path: Path) -> None:
    path, n = tmp_path / "race.db", 300
    store = SqliteLedgerStore(path)
    begun = [entry(node_id=f"n{i}", state="dispatched", attempts=1, at=NOW + i) for i in range(n)]
    for e in begun:
        assert store.begin(e).created  # kept: this store's transitions take the rowid statement
    child = subprocess.Popen(
        [sys.executable, "-c", _RACER, str(path), str(n)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).parents[2],
    )
    try:
        assert child.stdout is not None and child.stdin is not None
        assert child.stdout.readline().strip() == "ready"
        child.stdin.write("go\n")
        child.stdin.flush()
        mine = [  # from the other end: the two meet wherever the child has got to
            store.transition(
                e.key, ("dispatched",), e.evolve(state="committed", observation={"by": "parent"})
            )
            for e in reversed(begun)
        ][::-1]
        theirs = int(child.stdout.readline())
        assert child.wait(timeout=DEADLINE_S) == 0
    finally:
        if child.poll() is None:
            child.kill()
    won = sum(m is not None for m in mine)
    assert won + theirs == n
    for e, m in zip(begun, mine, strict=True):
        stored = store.get(e.key)
        assert stored is not None
        if m is not None:
            assert (stored.state, stored.observation, stored.error) == ("committed", {"by": "parent"}, None)
        else:
            assert (stored.state, stored.observation, stored.error) == ("failed", None, {"by": "child"})
        assert (stored.arguments, stored.created_at, stored.node_id) == (e.arguments, e.created_at, e.node_id)
    store.close()
