"""``LedgerStore.entries_of``: the entries of several nodes of a run in one read (every store)."""

from __future__ import annotations

from actionspace.ledger.entries import LedgerStore
from tests.ledger.factories import entry


def test_entries_of_returns_the_stored_entry_of_each_known_node(ledger_store: LedgerStore) -> None:
    ledger_store.begin(entry("n1"))
    ledger_store.begin(entry("n2"))
    moved = entry("n2", state="dispatched", attempts=1)
    assert ledger_store.transition(moved.key, ["accepted"], moved) is not None
    found = ledger_store.entries_of("r1", ["n1", "n2", "n3"])
    assert found == {"n1": entry("n1"), "n2": moved}


def test_entries_of_reads_only_the_run_and_nodes_asked_for(ledger_store: LedgerStore) -> None:
    ledger_store.begin(entry("n1"))
    ledger_store.begin(entry("n2"))
    ledger_store.begin(entry("n1", run_id="r2"))
    assert ledger_store.entries_of("r2", ["n1", "n2"]) == {"n1": entry("n1", run_id="r2")}
    assert ledger_store.entries_of("r1", ["n2"]) == {"n2": entry("n2")}
    assert ledger_store.entries_of("r3", ["n1"]) == {}


def test_entries_of_no_nodes_is_empty(ledger_store: LedgerStore) -> None:
    ledger_store.begin(entry("n1"))
    assert ledger_store.entries_of("r1", []) == {}


def test_entries_of_a_node_named_twice_returns_it_once(ledger_store: LedgerStore) -> None:
    ledger_store.begin(entry("n1"))
    assert ledger_store.entries_of("r1", ["n1", "n1"]) == {"n1": entry("n1")}


def test_entries_of_many_nodes_returns_every_one(ledger_store: LedgerStore) -> None:
    nodes = [f"n{i}" for i in range(501)]  # more than SQLite takes in one statement's list
    for k in nodes[::2]:
        ledger_store.begin(entry(k))
    found = ledger_store.entries_of("r1", nodes)
    assert sorted(found) == sorted(nodes[::2])
    assert all(found[k] == entry(k) for k in found)
