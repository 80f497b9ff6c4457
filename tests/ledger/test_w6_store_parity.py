"""The three ledger stores driven with the same random operations answer alike (DESIGN §6).

Memory (tests), SQLite (default) and PostgreSQL (shared) implement one contract; a difference in
what they answer is a bug in one of them. The identity of an entry (key, run, node, tool, argument
digest) is fixed when it is begun: a transition never moves an action to another node.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, rule, run_state_machine_as_test

from actionspace.ledger.entries import STATES, LedgerEntry, LedgerStore
from actionspace.ledger.memory import MemoryLedgerStore
from actionspace.ledger.sqlite import SqliteLedgerStore
from tests.ledger.factories import NOW, entry

NODES = st.sampled_from(["n0", "n1", "n2"])
STATE = st.sampled_from(STATES)


def _answer(value: Any) -> Any:
    if isinstance(value, LedgerEntry):
        return value.to_dict()
    if isinstance(value, list):
        return [_answer(v) for v in value]
    if isinstance(value, dict):
        return {k: _answer(v) for k, v in value.items()}
    return value


def _run(stores: list[LedgerStore], op: Callable[[LedgerStore], Any]) -> Any:
    answers = []
    for store in stores:
        try:
            answers.append(("ok", _answer(op(store))))
        except ValueError as exc:
            answers.append(("ValueError", type(exc).__name__))
    first = answers[0]
    for store, other in zip(stores[1:], answers[1:], strict=True):
        assert other == first, f"{type(store).__name__} answered {other}, memory {first}"
    return first[1]


def machine(open_stores: Callable[[], list[LedgerStore]]) -> type[RuleBasedStateMachine]:
    class Parity(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.stores = open_stores()
            self.now = NOW

        def teardown(self) -> None:
            for store in self.stores:
                store.close()

        def tick(self, same: bool) -> float:
            self.now += 0.0 if same else 1.0
            return self.now

        def stored(self, node: str) -> LedgerEntry | None:
            got = _run(self.stores, lambda s: s.get_node("r1", node))
            return None if got is None else LedgerEntry.from_dict(got)

        @rule(node=NODES, amount=st.integers(0, 2), state=st.sampled_from(["accepted", "dispatched"]))
        def begin(self, node: str, amount: int, state: str) -> None:
            new = entry(node, amount=amount, at=self.tick(False), state=state)
            _run(self.stores, lambda s: (lambda b: (b.created, b.entry))(s.begin(new)))

        @rule(
            node=NODES,
            expected=st.lists(STATE, max_size=3),
            to=STATE,
            same_time=st.booleans(),
            tamper=st.sampled_from(["none", "node", "digest", "key"]),
        )
        def transition(self, node: str, expected: list[str], to: str, same_time: bool, tamper: str) -> None:
            current = self.stored(node)
            if current is None:
                return
            new = current.evolve(state=to, attempts=current.attempts + 1, updated_at=self.tick(same_time))
            if tamper == "node":
                new = new.evolve(node_id="n9", updated_at=new.updated_at)
            elif tamper == "digest":
                new = new.evolve(args_digest="0" * 64, updated_at=new.updated_at)
            elif tamper == "key":
                other = self.stored("n2" if node != "n2" else "n0")
                if other is None:
                    return
                new = other.evolve(state=to, updated_at=new.updated_at)
            _run(self.stores, lambda s: s.transition(current.key, expected, new))
            _run(self.stores, lambda s: s.get(current.key))
            _run(self.stores, lambda s: s.get_node("r1", "n9"))

        @rule(node=NODES, state=STATE, attempts_off=st.integers(-1, 1), to=STATE)
        def transition_at(self, node: str, state: str, attempts_off: int, to: str) -> None:
            current = self.stored(node)
            if current is None:
                return
            new = current.evolve(state=to, updated_at=self.tick(False))
            attempts = current.attempts + attempts_off
            _run(self.stores, lambda s: s.transition_at(current.key, state, attempts, new))  # type: ignore[attr-defined]

        @rule(state=st.none() | STATE, limit=st.integers(1, 4))
        def listing(self, state: str | None, limit: int) -> None:
            _run(self.stores, lambda s: s.list(state=state, limit=limit))

        @rule(node=NODES)
        def pending(self, node: str) -> None:
            current = self.stored(node)
            if current is not None:
                _run(self.stores, lambda s: s.pending_action("r1", current.tool, current.args_digest))

        @rule()
        def entries_of(self) -> None:
            _run(self.stores, lambda s: s.entries_of("r1", ["n0", "n1", "n2", "n9"]))

        @rule(back=st.floats(0, 5))
        def purge(self, back: float) -> None:
            _run(self.stores, lambda s: s.purge(older_than=self.now - back))

    return Parity


@pytest.fixture
def folder() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="w6-parity-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _sqlite(folder: Path) -> SqliteLedgerStore:
    path = Path(tempfile.mkdtemp(dir=folder)) / "a.db"
    return SqliteLedgerStore(path)


PARITY = settings(
    max_examples=40, stateful_step_count=25, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


def test_memory_and_sqlite_stores_answer_every_operation_alike(folder: Path) -> None:
    run_state_machine_as_test(machine(lambda: [MemoryLedgerStore(), _sqlite(folder)]), settings=PARITY)


def test_memory_sqlite_and_postgres_stores_answer_every_operation_alike(folder: Path, pg_url: str) -> None:
    from actionspace.ledger.postgres import PostgresLedgerStore
    from tests.pg import fresh_schema

    schemas: list[Iterator[str]] = []

    def open_stores() -> list[LedgerStore]:
        schema = fresh_schema(pg_url)
        schemas.append(schema)
        return [MemoryLedgerStore(), _sqlite(folder), PostgresLedgerStore(next(schema))]

    try:
        run_state_machine_as_test(machine(open_stores), settings=PARITY)
    finally:
        for schema in schemas:
            for _ in schema:  # drops the schema
                pass


def test_entries_updated_at_one_time_list_in_the_same_order_in_every_store(ledger_store: LedgerStore) -> None:
    begun = sorted((entry(node, at=NOW) for node in ("n0", "n1", "n2", "n3")), key=lambda e: e.key)
    for e in reversed(begun):  # inserted in the order opposite to the keys'
        ledger_store.begin(e)
    assert [e.key for e in ledger_store.list(limit=2)] == [e.key for e in begun[:2]]


def test_the_pending_action_is_the_oldest_identical_one_whatever_order_it_was_begun_in(
    ledger_store: LedgerStore,
) -> None:
    younger = entry("n0", at=NOW + 5, state="dispatched")
    older = entry("n1", at=NOW, state="dispatched", args_digest=younger.args_digest)
    ledger_store.begin(younger)
    ledger_store.begin(older)
    found = ledger_store.pending_action("r1", younger.tool, younger.args_digest)
    assert found is not None and found.key == older.key
