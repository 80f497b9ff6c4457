"""An identical unsettled action is found inside the intent's own transaction on SQLite."""

from __future__ import annotations

from pathlib import Path

from actionspace.ledger.entries import BeginsUnlessPending
from actionspace.ledger.sqlite import SqliteLedgerStore
from tests.ledger.factories import entry


def test_a_twin_of_an_unsettled_action_is_not_inserted_and_names_it(tmp_path: Path) -> None:
    store = SqliteLedgerStore(tmp_path / "l.db")
    assert isinstance(store, BeginsUnlessPending)
    first = entry("a", state="dispatched", attempts=1)
    assert store.begin_unless_pending(first).created
    twin = entry("b", state="dispatched", attempts=1, key="as1_twin", args_digest=first.args_digest)
    begun = store.begin_unless_pending(twin)
    assert not begun.created and begun.pending is not None
    assert begun.pending.key == first.key and begun.entry.key == first.key
    assert store.get_node("r1", "b") is None  # nothing written for the twin
    store.close()


def test_the_same_action_again_or_a_settled_twin_is_begun_as_before(tmp_path: Path) -> None:
    store = SqliteLedgerStore(tmp_path / "l.db")
    first = entry("a", state="dispatched", attempts=1)
    store.begin_unless_pending(first)
    again = store.begin_unless_pending(first)  # its own key: the stored entry, not a twin
    assert not again.created and again.pending is None and again.entry.key == first.key
    store.transition(first.key, ["dispatched"], first.evolve(state="committed"))
    twin = entry("b", state="dispatched", attempts=1, key="as1_twin", args_digest=first.args_digest)
    begun = store.begin_unless_pending(twin)
    assert begun.created and begun.pending is None
    store.close()
