"""A transition of an entry the SQLite store began writes only the columns that move, found by rowid.

The intent writes the arguments (encoded once); an outcome handed the entry the call began (its
arguments object and ``created_at``) writes its state, attempts, times and results only, and finds
the row by the rowid its insert got rather than through the key's index. The key still guards the
row: a row purged and another written under the same rowid is not touched. Any other entry handed
in (other arguments, another ``created_at``, an entry begun elsewhere) is written whole, as before:
whatever is handed in, what is stored and answered is what the memory store stores and answers.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import actionspace.ledger.sqlite as ledger_sqlite
from actionspace import Runtime
from actionspace.ledger.entries import LedgerEntry
from actionspace.ledger.memory import MemoryLedgerStore
from actionspace.ledger.sqlite import SqliteLedgerStore
from actionspace.types import ToolCall
from tests.ledger.factories import entry

_KEY_INDEX = "sqlite_autoindex_ledger_entries_1"
"""The index of the table's ``key PRIMARY KEY`` (the first of its two unique constraints)."""


@pytest.fixture
def rt(tmp_path: Path) -> Iterator[Runtime]:
    runtime = Runtime(f"sqlite:///{tmp_path / 'a.db'}", recover_on_start=False)

    def put(key: str, value: int) -> int:
        return 3

    schema = {"type": "object", "properties": {"key": {"type": "string"}, "value": {"type": "integer"}}}
    runtime.add_tool(name="put", input_schema=schema, fn=put, effect="write", blocking=False)
    yield runtime
    runtime.close()


def _ledger(rt: Runtime) -> SqliteLedgerStore:
    store = rt.ledger
    assert isinstance(store, SqliteLedgerStore)
    return store


def _opened_indexes(path: Path, statement: str) -> set[str]:
    """The names of the indexes ``statement``'s program opens a cursor on, compiled against the file."""
    conn = sqlite3.connect(path)
    try:
        roots = {int(r[0]): str(r[1]) for r in conn.execute("SELECT rootpage, name FROM sqlite_master")}
        program = conn.execute(f"EXPLAIN {statement}").fetchall()
    finally:
        conn.close()
    return {roots[int(row[3])] for row in program if row[1] in ("OpenRead", "OpenWrite") and row[3] in roots}


def test_a_durable_calls_outcome_writes_neither_arguments_nor_created_at_and_skips_the_key_index(
    rt: Runtime,
) -> None:
    store = _ledger(rt)
    run = rt.new_run()
    marker = "argument-text-written-once"
    rt.call(ToolCall(name="put", arguments={"key": "warm", "value": 0}), run_id=run, node_id="w")
    statements: list[str] = []
    store._group.run(lambda conn: conn.set_trace_callback(statements.append))
    rt.call(ToolCall(name="put", arguments={"key": marker, "value": 1}), run_id=run, node_id="n")
    store._group.run(lambda conn: conn.set_trace_callback(None))
    ledger = [s for s in statements if "ledger_entries" in s and not s.startswith("SELECT")]
    updates = [s for s in ledger if s.startswith("UPDATE")]
    inserts = {s for s in ledger if s.startswith("INSERT")}
    assert len(inserts) == 1 and marker in next(iter(inserts))  # the intent writes the arguments
    assert len(updates) == 1  # one statement moved the entry to its outcome
    assignments = updates[0].partition(" SET ")[2].partition(" WHERE ")[0]
    assert marker not in assignments and "arguments" not in assignments and "created_at" not in assignments
    assert _KEY_INDEX not in _opened_indexes(store.path, updates[0])  # the row by its rowid
    stored = store.get_node(run, "n")
    assert stored is not None and stored.state == "committed" and stored.arguments["key"] == marker


def test_a_durable_call_encodes_its_arguments_once(rt: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    run = rt.new_run()
    rt.call(ToolCall(name="put", arguments={"key": "warm", "value": 0}), run_id=run, node_id="w")
    encoded: list[Any] = []
    to_json = ledger_sqlite.to_json

    def counting(value: Any) -> str | None:
        encoded.append(value)
        return to_json(value)

    monkeypatch.setattr(ledger_sqlite, "to_json", counting)
    rt.call(ToolCall(name="put", arguments={"key": "k", "value": 1}), run_id=run, node_id="n")
    arguments = [v for v in encoded if isinstance(v, dict) and v.get("key") == "k" and "value" in v]
    assert len(arguments) == 1  # at the intent; the outcome does not encode them again


def test_a_row_purged_and_another_written_under_its_rowid_is_not_moved(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    with SqliteLedgerStore(path) as mine, SqliteLedgerStore(path) as other:
        begun = entry("n1", state="dispatched", attempts=1)
        assert mine.begin(begun).created
        with sqlite3.connect(path) as conn:  # another writer purges it; a new entry takes its rowid
            rowid = conn.execute("SELECT rowid FROM ledger_entries WHERE key = ?", (begun.key,)).fetchone()[0]
            conn.execute("DELETE FROM ledger_entries WHERE key = ?", (begun.key,))
        newcomer = entry("n2", amount=11, state="dispatched", attempts=1)
        assert other.begin(newcomer).created
        with sqlite3.connect(path) as conn:
            assert (
                conn.execute("SELECT rowid FROM ledger_entries WHERE key = ?", (newcomer.key,)).fetchone()[0]
                == rowid
            )
        outcome = begun.evolve(state="committed", observation={"data": 1})
        assert mine.transition(begun.key, ("dispatched",), outcome) is None
        assert mine.get(begun.key) is None
        assert mine.get(newcomer.key) == newcomer
        # begun again after the purge: moved by its new row
        assert mine.begin(begun).created
        assert mine.transition(begun.key, ("dispatched",), outcome) == outcome
        assert other.get(begun.key) == outcome and other.get(newcomer.key) == newcomer


_HANDED = st.sampled_from(["same", "equal", "other_arguments", "other_created", "other_identity"])
"""What a transition is handed: the begun entry moved on (its arguments object, its created_at),
equal arguments in another object, other arguments, another created_at, another node."""
_STEP = st.tuples(
    st.sampled_from(["n1", "n2"]),
    _HANDED,
    st.sampled_from(["dispatched", "committed", "failed", "unknown", "accepted"]),
    st.sampled_from([("dispatched",), ("dispatched", "unknown"), ("committed",), ("accepted", "failed")]),
    st.booleans(),
    st.booleans(),
)
"""(node, what is handed, to which state, from which, by ``transition_at``, through a second store
of the file rather than the one that began the entry)."""


def _handed(begun: LedgerEntry, how: str, state: str, at: int) -> LedgerEntry:
    moved = begun.evolve(state=state, attempts=begun.attempts + 1, updated_at=float(at))
    if state == "committed":
        moved = moved.evolve(observation={"data": at}, remote_id=f"r{at}", updated_at=float(at))
    if how == "equal":
        return moved.evolve(arguments=dict(begun.arguments), updated_at=float(at))
    if how == "other_arguments":
        return moved.evolve(arguments={"amount": at, "memo": "other"}, updated_at=float(at))
    if how == "other_created":
        return moved.evolve(created_at=float(at) + 0.5, updated_at=float(at))
    if how == "other_identity":
        return moved.evolve(node_id="elsewhere", args_digest="d" * 64, updated_at=float(at))
    return moved


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(_STEP, min_size=1, max_size=10))
def test_transitions_store_and_answer_as_the_memory_store_whatever_is_handed_in(
    tmp_path_factory: pytest.TempPathFactory,
    steps: list[tuple[str, str, str, tuple[str, ...], bool, bool]],
) -> None:
    path = tmp_path_factory.mktemp("l") / "l.db"
    memory = MemoryLedgerStore()
    begun: dict[str, LedgerEntry] = {}
    with SqliteLedgerStore(path) as beginner, SqliteLedgerStore(path) as second:
        for at, (node, how, state, expected, at_attempts, elsewhere) in enumerate(steps, start=1):
            sqlite = second if elsewhere else beginner
            if node not in begun:
                made = entry(node, state="dispatched", attempts=1, at=float(at))
                assert beginner.begin(made) == memory.begin(made)
                begun[node] = made
            current = begun[node]
            handed = _handed(current, how, state, at)
            if at_attempts:
                got = sqlite.transition_at(current.key, expected[0], current.attempts, handed)
                want = memory.transition_at(current.key, expected[0], current.attempts, handed)
            else:
                got = sqlite.transition(current.key, expected, handed)
                want = memory.transition(current.key, expected, handed)
            assert got == want
            if want is not None and how == "same":
                begun[node] = want  # the next step moves it on from what it now is
            for e in begun.values():
                assert beginner.get(e.key) == memory.get(e.key) == second.get(e.key)
    with SqliteLedgerStore(path) as reopened:  # as read by another store of the file
        for e in begun.values():
            assert reopened.get(e.key) == memory.get(e.key)
