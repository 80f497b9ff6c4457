"""What SQLite runs for a durable call's two writes: no sorter for the pending check, no rows read
back after an outcome, and the same answers as before whatever the entry names."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace.ledger.entries import LedgerEntry
from actionspace.ledger.sqlite import SqliteLedgerStore
from tests.ledger.factories import NOW, entry


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteLedgerStore]:
    s = SqliteLedgerStore(tmp_path / "l.db")
    yield s
    s.close()


def _traced(store: SqliteLedgerStore) -> list[str]:
    """The statements the store's writer runs from now on, their parameters written in."""
    statements: list[str] = []
    store._group.run(lambda conn: conn.set_trace_callback(statements.append))
    return statements


def test_the_pending_check_of_an_intent_builds_no_sorter(store: SqliteLedgerStore) -> None:
    statements = _traced(store)
    statements.clear()  # the tracing operation's own COMMIT
    assert store.begin_unless_pending(entry(node_id="n1", state="dispatched", attempts=1)).created
    # the check is a subquery of the intent's one insert (a lone intent runs nothing else)
    assert len(statements) == 1 and statements[0].lstrip().upper().startswith("INSERT")
    program = {row[1] for row in store._conn().execute(f"EXPLAIN {statements[0]}")}
    assert "SELECT" in statements[0] and {"OpenRead", "SeekGE"} <= program  # the read seeks, as it ran
    assert not {"SorterOpen", "SorterSort", "OpenEphemeral"} & program


def test_an_outcome_of_an_entry_with_its_begun_identity_reads_nothing_back(store: SqliteLedgerStore) -> None:
    begun = store.begin(entry(node_id="n1", state="dispatched", attempts=1)).entry
    statements = _traced(store)
    stored = store.transition(
        begun.key, ("dispatched",), begun.evolve(state="committed", observation={"a": 1})
    )
    assert stored is not None and stored.state == "committed"
    updates = [s for s in statements if s.lstrip().upper().startswith("UPDATE")]
    assert len(updates) == 1
    assert "RETURNING" not in updates[0].upper()
    assert store.get(begun.key) == stored


def _moved(e: LedgerEntry, run_id: str, node_id: str, tool: str, digest: str) -> LedgerEntry:
    return e.evolve(run_id=run_id, node_id=node_id, tool=tool, args_digest=digest, updated_at=e.updated_at)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    other=st.tuples(
        st.sampled_from(["r1", "r2"]),
        st.sampled_from(["n1", "n2"]),
        st.sampled_from(["t", "u"]),
        st.sampled_from(["d1", "d2"]),
    ),
    expected=st.lists(st.sampled_from(["dispatched", "unknown", "accepted"]), min_size=1, max_size=3),
    at=st.booleans(),
)
def test_a_transition_keeps_the_begun_identity_whatever_identity_its_entry_names(
    tmp_path_factory: pytest.TempPathFactory,
    other: tuple[str, str, str, str],
    expected: list[str],
    at: bool,
) -> None:
    s = SqliteLedgerStore(tmp_path_factory.mktemp("l") / "l.db")
    try:
        begun = s.begin(entry(node_id="n1", state="dispatched", attempts=1)).entry
        offered = _moved(begun.evolve(state="committed", updated_at=NOW + 5), *other)
        if at:
            stored = s.transition_at(begun.key, expected[0], 1, offered)
        else:
            stored = s.transition(begun.key, tuple(expected), offered)
        moved = (expected[0] if at else None) == "dispatched" or (not at and "dispatched" in expected)
        if not moved:
            assert stored is None
            assert s.get(begun.key) == begun
            return
        assert stored is not None
        identity = (stored.run_id, stored.node_id, stored.tool, stored.args_digest)
        assert identity == (begun.run_id, begun.node_id, begun.tool, begun.args_digest)
        assert stored == s.get(begun.key)
        assert stored.state == "committed" and stored.updated_at == NOW + 5
    finally:
        s.close()
