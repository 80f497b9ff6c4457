"""Concurrent ledger writes that share a transaction run no savepoint each: a ``SAVEPOINT`` and its
``RELEASE`` are two statements, each a release of the interpreter's lock that the writing thread
must take back from the other callers. A group whose operation raises is rolled back whole and run
again in savepoints, so the others still commit and the one that raised writes nothing."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace.ledger.sqlite import GroupCommit, SqliteConnections, SqliteLedgerStore
from tests.ledger.factories import entry
from tests.ledger.waits import until

CALLERS = 8
DEADLINE_S = 20.0


def _until(condition: Callable[[], bool], what: str) -> None:
    until(condition, what, DEADLINE_S)


def _queued_behind_a_held_group(group: GroupCommit, writes: Sequence[Callable[..., Any]]) -> list[Any]:
    """Run ``writes`` each on its own thread while a first caller holds the writer, so that all of
    them queue and are committed as one group; each write's result or exception, in order."""
    started, release = threading.Event(), threading.Event()

    def hold(conn: sqlite3.Connection) -> None:
        started.set()
        release.wait(DEADLINE_S)

    outcomes: list[Any] = [None] * len(writes)

    def one(i: int) -> None:
        try:
            outcomes[i] = writes[i]()
        except Exception as exc:  # compared by the caller
            outcomes[i] = exc

    leader = threading.Thread(target=group.run, args=(hold,))
    leader.start()
    try:
        assert started.wait(DEADLINE_S)
        threads = [threading.Thread(target=one, args=(i,)) for i in range(len(writes))]
        for t in threads:
            t.start()
        _until(
            lambda: group.queued == len(writes) or not any(t.is_alive() for t in threads),
            "the writes to queue",
        )
    finally:
        release.set()
    for t in [leader, *threads]:
        t.join(DEADLINE_S)
    assert not any(t.is_alive() for t in [leader, *threads])
    return outcomes


def _statements(group: GroupCommit) -> list[str]:
    seen: list[str] = []
    group._db.writer().set_trace_callback(lambda sql: seen.append(sql.split(None, 1)[0].upper()))
    return seen


@pytest.mark.parametrize("kind", ["intents", "outcomes"])
def test_a_group_of_concurrent_ledger_writes_runs_no_savepoints(tmp_path: Path, kind: str) -> None:
    store = SqliteLedgerStore(tmp_path / "l.db")
    try:
        group = store._group
        entries = [entry(f"n{i}", state="dispatched") for i in range(CALLERS)]
        if kind == "outcomes":
            for e in entries:
                store.begin(e)
        seen = _statements(group)
        if kind == "intents":
            writes = [lambda e=e: store.begin(e).created for e in entries]
        else:
            done = [e.evolve(state="committed", observation={"ok": True}) for e in entries]
            writes = [lambda e=e: store.transition(e.key, ["dispatched"], e) is not None for e in done]
        assert _queued_behind_a_held_group(group, writes) == [True] * CALLERS
        assert seen.count("BEGIN") == 2  # the held group's, then one for all eight writes
        assert seen.count("SAVEPOINT") == 0
        assert seen.count("RELEASE") == 0
        group._db.writer().set_trace_callback(None)
        stored = [store.get(e.key) for e in entries]
        want = "dispatched" if kind == "intents" else "committed"
        assert [s.state if s is not None else None for s in stored] == [want] * CALLERS
    finally:
        store.close()


def _table(tmp_path: Path) -> GroupCommit:
    db = SqliteConnections(tmp_path / "g.db", synchronous="FULL", busy_timeout_s=10.0)
    db.init_schema("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)", "meta", "v", 1)
    with db.write() as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS t (k TEXT PRIMARY KEY)")
    return GroupCommit(db)


_OPS = st.lists(
    st.tuples(st.booleans(), st.sampled_from(["ok", "raises after writing", "statement fails"])),
    min_size=2,
    max_size=6,
)
"""Each queued write: (rerunnable, what its operation does)."""


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=_OPS)
def test_a_group_commits_what_each_write_alone_would_have(
    tmp_path: Path, ops: list[tuple[bool, str]]
) -> None:
    """Whatever mix of rerunnable operations and others, and whichever of them fail (a Python error
    after a write, or a statement of theirs refused), every caller gets its own result or error and
    the file holds the rows of exactly the writes that succeeded, each once."""
    group = _table(tmp_path)
    try:
        with group._db.write() as conn:
            conn.execute("DELETE FROM t")
            conn.execute("INSERT INTO t (k) VALUES ('taken')")
        runs = [0] * len(ops)

        def make(i: int, rerunnable: bool, does: str) -> Callable[[], Any]:
            def op(conn: sqlite3.Connection) -> str:
                runs[i] += 1
                conn.execute("INSERT INTO t (k) VALUES (?)", (f"k{i}",))
                if does == "raises after writing":
                    raise ValueError(f"op {i}")
                if does == "statement fails":
                    conn.execute("INSERT INTO t (k) VALUES ('taken')")
                return f"k{i}"

            return lambda: group.run(op, durable=i % 2 == 0, rerunnable=rerunnable)

        outcomes = _queued_behind_a_held_group(group, [make(i, r, d) for i, (r, d) in enumerate(ops)])
        for i, (_, does) in enumerate(ops):
            if does == "ok":
                assert outcomes[i] == f"k{i}"
            elif does == "raises after writing":
                assert isinstance(outcomes[i], ValueError)
            else:
                assert isinstance(outcomes[i], sqlite3.IntegrityError)
        other = sqlite3.connect(group._db.path)  # only committed rows are visible to it
        try:
            rows = sorted(r[0] for r in other.execute("SELECT k FROM t"))
        finally:
            other.close()
        assert rows == sorted(["taken", *(f"k{i}" for i, (_, d) in enumerate(ops) if d == "ok")])
        assert all(1 <= n <= 2 for n in runs)  # run again only after the whole group rolled back
        if all(d == "ok" for _, d in ops):
            assert runs == [1] * len(ops)
    finally:
        group._db.close()
