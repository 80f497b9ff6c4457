"""The intent on SQLite is one ``INSERT`` in autocommit: the pending-action check is a subquery of it.

Every statement SQLite runs is a release of the interpreter's lock that the writing thread must take
back; with concurrent callers each is a hand-over to another thread and a wait to get it back. A lone
intent ran four (``BEGIN IMMEDIATE``, the pending read, the insert, ``COMMIT``), each intent of a
shared group two. The insert now writes the row unless the key or node is stored or an identical
action of the run is unsettled under another key; when it writes nothing, the reads and the insert
run as before in a transaction of their own, so every answer is the one the memory store gives.
"""

from __future__ import annotations

import functools
import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace.ledger.entries import Begun, LedgerEntry
from actionspace.ledger.memory import MemoryLedgerStore
from actionspace.ledger.sqlite import SqliteLedgerStore
from tests.ledger.factories import NOW, entry, key_for
from tests.ledger.test_w20_group_statements import _queued_behind_a_held_group

CALLERS = 8


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteLedgerStore]:
    s = SqliteLedgerStore(tmp_path / "l.db")
    yield s
    s.close()


def _statements(store: SqliteLedgerStore) -> list[str]:
    """The first word of each statement the writing connection runs from now on."""
    seen: list[str] = []
    store._group._db.writer().set_trace_callback(lambda sql: seen.append(sql.split(None, 1)[0].upper()))
    return seen


@pytest.mark.parametrize("unless_pending", [True, False])
def test_a_lone_intent_is_one_statement(store: SqliteLedgerStore, unless_pending: bool) -> None:
    begin = store.begin_unless_pending if unless_pending else store.begin
    begin(entry(node_id="n0", state="dispatched", attempts=1, amount=0))  # the writer made ready
    seen = _statements(store)
    begun = begin(entry(node_id="n1", state="dispatched", attempts=1, amount=1))
    assert begun.created and begun.entry == store.get(begun.entry.key)
    assert seen == ["INSERT"]


def test_a_group_of_intents_runs_one_statement_each(store: SqliteLedgerStore) -> None:
    seen = _statements(store)
    entries = [entry(node_id=f"n{i}", state="dispatched", attempts=1, amount=i) for i in range(CALLERS)]
    writes: list[Callable[[], Any]] = [functools.partial(store.begin_unless_pending, e) for e in entries]
    results = _queued_behind_a_held_group(store._group, writes)
    assert [r.created for r in results] == [True] * CALLERS
    assert [store.get(e.key) for e in entries] == entries
    group = seen[len(seen) - 1 - seen[::-1].index("BEGIN") :]  # the held caller's own one first
    assert group == ["BEGIN", *["INSERT"] * CALLERS, "COMMIT"]


def test_an_intent_waits_for_no_thread_of_its_own(store: SqliteLedgerStore) -> None:
    """The one statement is the whole transaction: nothing is left open on the writer after it."""
    e = entry(node_id="n1", state="dispatched", attempts=1)
    assert store.begin_unless_pending(e).created
    assert not store._group._db.writer().in_transaction
    other = threading.Thread(target=lambda: store.begin(entry(node_id="n2")))
    other.start()
    other.join(10)
    assert not other.is_alive() and store.get_node("r1", "n2") is not None


_NODES = ["n1", "n2", "n3"]
_STATES = ["accepted", "dispatched", "committed", "failed", "unknown"]
_step = st.tuples(
    st.sampled_from(["begin", "unless", "move"]),
    st.sampled_from(_NODES),
    st.sampled_from([1, 2]),  # the arguments: two digests, so identical actions under other keys
    st.sampled_from(_STATES),
)


def _unless_pending(memory: MemoryLedgerStore, e: LedgerEntry) -> Begun:
    """What ``begin_unless_pending`` answers, by its contract, from the memory store's reads."""
    pending = memory.pending_action(e.run_id, e.tool, e.args_digest)
    if pending is not None and pending.key != e.key:
        return Begun(pending, False, pending)
    return memory.begin(e)


def _answer(begun: Begun) -> tuple[Any, ...]:
    pending = None if begun.pending is None else begun.pending.key
    return (begun.entry.key, begun.entry.state, begun.created, pending)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(_step, min_size=1, max_size=12))
def test_every_intent_answers_as_the_memory_store(tmp_path_factory: Any, steps: list[Any]) -> None:
    """Begins with and without the pending check, over stored keys, stored nodes under other
    arguments, and identical actions settled or not, answer as the memory store does."""
    sqlite = SqliteLedgerStore(tmp_path_factory.mktemp("w91") / "l.db")
    memory = MemoryLedgerStore()
    try:
        for at, (what, node, amount, state) in enumerate(steps):
            e = entry(node_id=node, amount=amount, state=state, at=NOW + at)
            if what == "move":
                stored = memory.get_node("r1", node)
                if stored is None:
                    continue
                moved = LedgerEntry.from_dict({**stored.to_dict(), "state": state, "updated_at": NOW + at})
                expected = (stored.state,)
                assert sqlite.transition(stored.key, expected, moved) == memory.transition(
                    stored.key, expected, moved
                )
                continue
            if what == "unless":
                got, want = sqlite.begin_unless_pending(e), _unless_pending(memory, e)
            else:
                got, want = sqlite.begin(e), memory.begin(e)
            assert _answer(got) == _answer(want), (what, node, amount, state)
        for node in _NODES:
            assert sqlite.get_node("r1", node) == memory.get_node("r1", node)
        rows = sqlite._conn().execute("SELECT count(*) FROM ledger_entries").fetchone()[0]
        assert rows == sum(memory.get_node("r1", n) is not None for n in _NODES)
    finally:
        sqlite.close()


def test_a_refused_row_is_neither_written_nor_found(store: SqliteLedgerStore) -> None:
    """A row a ``NOT NULL`` check refuses is ignored by the one statement and by the transaction
    after it alike: the caller is told, nothing is stored."""
    bad = entry(node_id="n1", tool=None)
    with pytest.raises(RuntimeError, match="neither written nor found"):
        store.begin_unless_pending(bad)
    assert store._conn().execute("SELECT count(*) FROM ledger_entries").fetchone()[0] == 0
    assert key_for("r1", "n1", bad.args_digest) == bad.key
    assert isinstance(store._conn(), sqlite3.Connection)
