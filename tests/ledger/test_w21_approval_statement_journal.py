"""An approval request's insert on a SQLite file with the tenant trigger keeps no statement journal.

The approval store's insert runs the file's tenant trigger (``_sqlite_tenants``); its ``NOT NULL``
checks at their default ``ABORT`` made it a statement that may abort partway after a trigger ran,
so SQLite copied every page it changed into a statement journal first (as the ledger's intent
did). It is an ``INSERT OR IGNORE`` now: the same answer for every request (the stored pending
request of its binding and holder, or the one of its id), a request with a value its column
refuses is refused before the insert, and the trigger still sets the tenant.
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
from actionspace.approval.requests import ApprovalRequest
from actionspace.ledger.memory import MemoryApprovalStore
from actionspace.ledger.sqlite_approvals import SqliteApprovalStore
from actionspace.trace.events import TraceEvent
from tests.ledger.factories import request

_ABORT = 2
"""SQLite's ``OE_Abort`` in ``P2`` of a ``Halt``/``HaltIfNull``: the statement ends with an error and
what it wrote is undone (hence the journal)."""


def _runtime(path: Path) -> Runtime:
    """A runtime on one file (ledger, trace, approvals: the file has the tenant triggers) whose run
    ``qt`` has the tenant ``quiet``."""
    runtime = Runtime(f"sqlite:///{path}", recover_on_start=False)
    runtime.trace.append_many(
        [
            TraceEvent(
                run_id="qt", seq=0, kind="run_started", ts=1.0, data={"principal": "p", "tenant": "quiet"}
            )
        ]
    )
    return runtime


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteApprovalStore]:
    runtime = _runtime(tmp_path / "a.db")
    approvals = SqliteApprovalStore(tmp_path / "a.db")
    yield approvals
    approvals.close()
    runtime.close()


def _program(path: Path, statement: str) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(path)
    try:
        return [tuple(row) for row in conn.execute(f"EXPLAIN {statement}")]
    finally:
        conn.close()


def test_a_requests_insert_runs_the_tenant_trigger_in_a_statement_that_cannot_abort_partway(
    store: SqliteApprovalStore,
) -> None:
    statements: list[str] = []
    store._db.conn().set_trace_callback(statements.append)
    created = store.create(request(run_id="qt"))
    store._db.conn().set_trace_callback(None)
    assert created.id == "apr_1"
    inserts = sorted({s for s in statements if s.upper().startswith("INSERT") and "approval_requests" in s})
    assert len(inserts) == 1
    program = _program(store.path, inserts[0])
    assert "Program" in {row[1] for row in program}  # the tenant trigger still runs in the insert
    aborting = [r for r in program if r[1] in ("Halt", "HaltIfNull") and r[2] != 0 and r[3] == _ABORT]
    assert aborting == []  # so SQLite keeps no statement journal for it


def test_the_trigger_still_sets_the_tenant_of_a_request(store: SqliteApprovalStore) -> None:
    store.create(request(run_id="qt", request_id="apr_q"))
    store.create(request(run_id="none", request_id="apr_n"))
    store.create(
        request(run_id="none", request_id="apr_p", amount=3, details={"proposed_by": {"tenant": "t2"}})
    )
    tenants = dict(store._db.conn().execute("SELECT id, tenant FROM approval_requests").fetchall())
    assert tenants == {"apr_q": "quiet", "apr_n": None, "apr_p": "t2"}
    listed = store.tenant_requests("quiet")
    assert listed is not None and [r.id for r in listed] == ["apr_q"]


@pytest.mark.parametrize("field", ["id", "reason", "node_id", "status", "arguments"])
def test_a_request_its_columns_refuse_raises_and_writes_nothing(
    store: SqliteApprovalStore, field: str
) -> None:
    pending = store.create(request(run_id="qt", request_id="apr_1"))
    nothing: dict[str, Any] = {field: None}
    refused = request(run_id="qt", request_id="apr_2", **nothing)
    with pytest.raises(ValueError, match=field):  # not answered by the pending request of its binding
        store.create(refused)
    assert store.get("apr_2") is None
    assert [r.id for r in store.list()] == [pending.id]


_STEPS = st.lists(
    st.tuples(
        st.sampled_from(["qt", "r2"]),
        st.integers(1, 2),  # the amount: the binding
        st.sampled_from([None, "alice", "bob"]),  # the proposer: the holder
        st.sampled_from([None, "approved", "denied"]),  # decided after its create, or left pending
        st.booleans(),  # the id of an earlier step again
    ),
    min_size=1,
    max_size=8,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=_STEPS)
def test_creates_answer_as_the_memory_store_answers_whatever_collides(
    tmp_path_factory: pytest.TempPathFactory, steps: list[tuple[str, int, str | None, str | None, bool]]
) -> None:
    path = tmp_path_factory.mktemp("a") / "a.db"
    runtime = _runtime(path)
    sqlite, memory = SqliteApprovalStore(path), MemoryApprovalStore()
    made: list[ApprovalRequest] = []
    decided_ids: set[str] = set()
    try:
        for at, (run, amount, proposer, decision, again) in enumerate(steps):
            undecided = [m for m in made if m.id not in decided_ids]
            if again and undecided:  # a request filed again (a create retried before a decision)
                r = undecided[at % len(undecided)]
            else:
                details: dict[str, Any] = {"proposed_by": {"id": proposer}} if proposer else {}
                r = request(
                    run_id=run,
                    amount=amount,
                    request_id=f"apr_{at}",
                    details=details,
                    at=float(at),
                )
                made.append(r)
            stored = sqlite.create(r)
            assert stored == memory.create(r)
            if decision is not None:  # a person decides the request the create answered with
                decided = stored.evolve(status=decision, decided_at=float(at), decided_by="p")
                decided_ids.update((stored.id, r.id))
                got = sqlite.update(stored.id, ("pending",), decided)
                assert got == memory.update(stored.id, ("pending",), decided)
        assert sorted(sqlite.list(limit=100), key=lambda r: r.id) == sorted(
            memory.list(limit=100), key=lambda r: r.id
        )
    finally:
        sqlite.close()
        runtime.close()
