"""The intent's insert on a SQLite file with the tenant trigger copies no page to a statement journal.

SQLite keeps a statement journal (the pages a statement changes, copied before it changes them) for
a statement that both runs a trigger and may abort partway. The ledger's insert runs the file's
tenant trigger (``_sqlite_tenants``) on every intent; its ``NOT NULL`` checks, at their default
``ABORT``, made it such a statement. It is an ``INSERT OR IGNORE`` now: the same answer for every
entry the store writes (nothing when the key or the node is stored), no check that aborts, no
journal. The trigger still runs and still sets the tenant, for this store's rows and for those of a
writer that knows nothing of the column.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace import Runtime
from actionspace.ledger.entries import Begun, LedgerEntry
from actionspace.ledger.memory import MemoryLedgerStore
from actionspace.ledger.sqlite import SqliteLedgerStore
from actionspace.trace.events import TraceEvent
from tests.ledger.factories import entry

_ABORT = 2
"""SQLite's ``OE_Abort``: the conflict action in ``P2`` of a ``Halt``/``HaltIfNull`` that ends the
statement with an error, undoing what it wrote (hence the journal)."""


@pytest.fixture
def rt(tmp_path: Path) -> Iterator[Runtime]:
    """A runtime on one file: its ledger, trace and approvals, so the file has the tenant trigger."""
    runtime = Runtime(f"sqlite:///{tmp_path / 'a.db'}", recover_on_start=False)
    runtime.trace.append_many(
        [
            TraceEvent(
                run_id="qt", seq=0, kind="run_started", ts=1.0, data={"principal": "p", "tenant": "quiet"}
            )
        ]
    )
    yield runtime
    runtime.close()


def _ledger(rt: Runtime) -> SqliteLedgerStore:
    store = rt.ledger
    assert isinstance(store, SqliteLedgerStore)
    return store


def _traced(store: SqliteLedgerStore) -> list[str]:
    """The statements the store's writer runs from now on, their parameters written in."""
    statements: list[str] = []
    store._group.run(lambda conn: conn.set_trace_callback(statements.append))
    return statements


def _program(store: SqliteLedgerStore, statement: str) -> list[tuple[Any, ...]]:
    """The program of ``statement`` compiled against the file's schema as it is now (a connection
    opened before the trigger was made would compile it without: ``EXPLAIN`` does not check)."""
    conn = sqlite3.connect(store.path)
    try:
        return [tuple(row) for row in conn.execute(f"EXPLAIN {statement}")]
    finally:
        conn.close()


@pytest.mark.parametrize("unless_pending", [False, True])
def test_an_intent_runs_the_tenant_trigger_in_a_statement_that_cannot_abort_partway(
    rt: Runtime, unless_pending: bool
) -> None:
    store = _ledger(rt)
    statements = _traced(store)
    sent = entry(node_id="n1", run_id="qt", state="dispatched", attempts=1)
    begun = store.begin_unless_pending(sent) if unless_pending else store.begin(sent)
    assert begun.created
    # the trace reports the insert once more for each trigger program it runs
    inserts = sorted({s for s in statements if s.upper().startswith("INSERT") and "INTO ledger_entries" in s})
    assert len(inserts) == 1
    program = _program(store, inserts[0])
    names = {row[1] for row in program}
    assert "Program" in names  # the tenant trigger is still run by the insert
    aborting = [
        row for row in program if row[1] in ("Halt", "HaltIfNull") and row[2] != 0 and row[3] == _ABORT
    ]
    assert aborting == []  # so SQLite keeps no statement journal for it


def test_the_trigger_still_sets_the_tenant_of_an_intent_and_of_an_earlier_writers_row(rt: Runtime) -> None:
    store = _ledger(rt)
    assert store.begin(entry(node_id="n1", run_id="qt", state="dispatched", attempts=1)).created
    assert store.begin(entry(node_id="n1", run_id="none", state="dispatched", attempts=1)).created
    with sqlite3.connect(store.path) as conn:  # as an earlier version writes: no tenant column named
        conn.execute(
            "INSERT INTO ledger_entries (key, run_id, node_id, tool, args_digest, arguments, state,"
            " attempts, created_at, updated_at) VALUES ('as1_raw', 'qt', 'raw', 't@1', 'd', '{}',"
            " 'accepted', 0, 9, 9)"
        )
    listed = store.tenant_entries("quiet")
    assert listed is not None and sorted(e.node_id for e in listed) == ["n1", "raw"]
    assert {e.run_id for e in listed} == {"qt"}
    tenants = dict(store._conn().execute("SELECT run_id, tenant FROM ledger_entries").fetchall())
    assert tenants == {"qt": "quiet", "none": None}


def test_a_row_a_not_null_check_refuses_is_not_written_and_the_begin_raises(rt: Runtime) -> None:
    store = _ledger(rt)
    refused = entry(node_id="n1", run_id="qt", state="dispatched", attempts=1, created_at=None)
    with pytest.raises(Exception):  # noqa: B017 - the store's own error for a row it cannot write
        store.begin(refused)
    assert store.get(refused.key) is None
    assert store._conn().execute("SELECT count(*) FROM ledger_entries").fetchone()[0] == 0
    again = entry(node_id="n1", run_id="qt", state="dispatched", attempts=1)
    assert store.begin(again).created and store.get(again.key) == again


_SLOTS = st.tuples(st.sampled_from(["qt", "r2"]), st.sampled_from(["n1", "n2", "n3"]), st.integers(1, 3))
"""(run, node, amount): the amount decides the arguments, so the key; colliding nodes and keys."""


def _begun_in_memory(store: MemoryLedgerStore, e: LedgerEntry, unless_pending: bool) -> Begun:
    """What the protocol does on a store without ``begin_unless_pending``: the check, then the insert."""
    pending = store.pending_action(e.run_id, e.tool, e.args_digest) if unless_pending else None
    if pending is not None and pending.key != e.key:
        return Begun(pending, False, pending)
    return store.begin(e)


def _made(run: str, node: str, amount: int, at: int) -> LedgerEntry:
    e = entry(node_id=node, run_id=run, amount=amount, state="dispatched", attempts=1, at=float(at))
    if node == "n3":  # a key stored under another node: the key conflicts, the node does not
        e = entry(node_id="n3", run_id=run, amount=amount, state="dispatched", attempts=1, at=float(at))
        e = e.evolve(key=entry(node_id="n1", run_id=run, amount=amount).key, updated_at=float(at))
    return e


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(st.tuples(_SLOTS, st.booleans()), min_size=1, max_size=8))
def test_begins_answer_as_the_memory_store_answers_whatever_collides(
    tmp_path_factory: pytest.TempPathFactory, steps: list[tuple[tuple[str, str, int], bool]]
) -> None:
    runtime = Runtime(f"sqlite:///{tmp_path_factory.mktemp('l') / 'a.db'}", recover_on_start=False)
    try:
        runtime.trace.append_many(
            [TraceEvent(run_id="qt", seq=0, kind="run_started", ts=1.0, data={"tenant": "quiet"})]
        )
        sqlite, memory = _ledger(runtime), MemoryLedgerStore()
        for at, ((run, node, amount), unless_pending) in enumerate(steps):
            e = _made(run, node, amount, at)
            got = sqlite.begin_unless_pending(e) if unless_pending else sqlite.begin(e)
            assert got == _begun_in_memory(memory, e, unless_pending)
        stored = sorted(sqlite.list(limit=100), key=lambda e: e.key)
        assert stored == sorted(memory.list(limit=100), key=lambda e: e.key)
        listed = sqlite.tenant_entries("quiet")
        assert listed is not None and sorted(e.key for e in listed) == sorted(
            e.key for e in stored if e.run_id == "qt"
        )
    finally:
        runtime.close()
