"""The ledger state machine, driven at random against a store and checked against a model.

Callers move an entry the way ``commit.py`` does: a compare-and-set naming every state the target
may legally follow (``TRANSITIONS``), or a stale read naming a state the entry has left. The store
must refuse every move the model refuses, so it never holds a state outside the legal graph, never
changes a committed entry, and lets an entry be dispatched at most once per time it was accepted
(or answered a retryable failure, which proves it did not commit).
"""

from __future__ import annotations

import shutil
import tempfile
from collections import Counter
from dataclasses import replace
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from actionspace.ledger.entries import STATES, TERMINAL, TRANSITIONS, LedgerEntry, LedgerState, LedgerStore
from actionspace.ledger.memory import MemoryLedgerStore
from actionspace.ledger.sqlite import SqliteLedgerStore
from tests.ledger.factories import NOW, entry

NODES = st.sampled_from(["n0", "n1", "n2"])
TARGETS = st.sampled_from(STATES)


def _reachable() -> frozenset[str]:
    seen, todo = {"accepted"}, ["accepted"]
    while todo:
        for nxt in TRANSITIONS[todo.pop()]:
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return frozenset(seen)


REACHABLE = _reachable()
PREDECESSORS = {target: [s for s in STATES if target in TRANSITIONS[s]] for target in STATES}


class LedgerMachine(RuleBasedStateMachine):
    """Model: the stored entry per key, plus how often each key was accepted and dispatched."""

    def __init__(self) -> None:
        super().__init__()
        self.folder = Path(tempfile.mkdtemp(prefix="ledger-machine-"))
        self.store = self.open_store(self.folder / "actionspace.db")
        self.now = NOW
        self.keys: dict[str, str] = {}
        self.entries: dict[str, LedgerEntry] = {}
        self.committed: dict[str, LedgerEntry] = {}
        self.accepted = Counter[str]()
        self.dispatched = Counter[str]()

    def open_store(self, path: Path) -> LedgerStore:
        return SqliteLedgerStore(path)

    def teardown(self) -> None:
        self.store.close()
        shutil.rmtree(self.folder, ignore_errors=True)

    def tick(self) -> float:
        self.now += 1.0
        return self.now

    def key_of(self, node: str) -> str:
        return self.keys.get(node, entry(node).key)

    @rule(node=NODES, amount=st.integers(0, 2))
    def begin(self, node: str, amount: int) -> None:
        begun = self.store.begin(entry(node, amount=amount, at=self.tick()))
        if node in self.keys:
            assert not begun.created
            assert begun.entry == self.entries[self.keys[node]]
            return
        assert begun.created
        self.keys[node] = begun.entry.key
        self.entries[begun.entry.key] = begun.entry
        self.accepted[begun.entry.key] += 1

    @rule(node=NODES, to=TARGETS)
    def advance(self, node: str, to: LedgerState) -> None:
        """Try ``to`` from whatever state allows it; illegal from the current state is refused."""
        key = self.key_of(node)
        current = self.entries.get(key)
        moved = replace(current or entry(node), state=to, updated_at=self.tick(), remote_id=f"t{self.now}")
        stored = self.store.transition(key, PREDECESSORS[to], moved)
        if current is None or current.state not in PREDECESSORS[to]:
            assert stored is None
            return
        assert stored == moved
        self.entries[key] = moved
        if to == "accepted" or (to == "dispatched" and current.state == "failed"):
            # re-accepted after a status query, or sent again after a retryable failure (not committed)
            self.accepted[key] += 1
        elif to == "dispatched":
            self.dispatched[key] += 1
        elif to == "committed":
            self.committed[key] = moved

    @rule(node=NODES, to=TARGETS, believed=st.sets(TARGETS, min_size=1))
    def stale_transition(self, node: str, to: LedgerState, believed: set[str]) -> None:
        """A caller that read an old state loses, whatever it wanted to move to."""
        key = self.key_of(node)
        current = self.entries.get(key)
        expected = sorted(believed - {current.state} if current is not None else believed)
        moved = replace(current or entry(node), state=to, updated_at=self.tick())
        assert self.store.transition(key, expected, moved) is None

    @rule(lag=st.integers(0, 6))
    def purge(self, lag: int) -> None:
        older_than = self.now - lag
        gone = [k for k, e in self.entries.items() if e.state in TERMINAL and e.updated_at < older_than]
        assert self.store.purge(older_than=older_than) == len(gone)
        for key in gone:
            removed = self.entries.pop(key)
            del self.keys[removed.node_id]
            self.committed.pop(key, None)

    @invariant()
    def the_store_holds_exactly_the_model(self) -> None:
        stored = {e.key: e for e in self.store.list(limit=1_000)}
        assert stored == self.entries
        assert all(e.state in REACHABLE for e in stored.values())

    @invariant()
    def a_committed_entry_never_changes(self) -> None:
        for key, committed in self.committed.items():
            assert self.store.get(key) == committed

    @invariant()
    def no_key_is_dispatched_twice_per_acceptance(self) -> None:
        for key, count in self.dispatched.items():
            assert count <= self.accepted[key]


class MemoryLedgerMachine(LedgerMachine):
    def open_store(self, path: Path) -> LedgerStore:
        return MemoryLedgerStore()


MACHINE_SETTINGS = settings(max_examples=40, stateful_step_count=30, deadline=None)
TestSqliteLedgerStateMachine = LedgerMachine.TestCase
TestSqliteLedgerStateMachine.settings = MACHINE_SETTINGS
TestMemoryLedgerStateMachine = MemoryLedgerMachine.TestCase
TestMemoryLedgerStateMachine.settings = MACHINE_SETTINGS
