"""An entry the protocol holds that is purged before its move (an operator's ``ledger purge``
of old failed entries running beside a re-proposal) ends the call with a typed error, nothing
sent; the protocol never retries a move of an entry that no longer exists."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import pytest

from actionspace.errors import ActionError
from actionspace.ledger.entries import LedgerEntry
from actionspace.ledger.memory import MemoryLedgerStore
from tests.ledger.factories import entry as make_entry
from tests.ledger.test_w24_protocol_admit_send import _run

FAILED = {"state": "failed", "error": ActionError.of("transient", "reset").to_dict()}


class PurgedAtMove(MemoryLedgerStore):
    """Purges the entry (as ``purge`` does a failed one) when the protocol first moves it."""

    def __init__(self) -> None:
        super().__init__()
        self.armed = False
        self.moves = 0

    def transition(self, key: str, expected: Sequence[str], entry: LedgerEntry) -> LedgerEntry | None:
        if self.armed:
            self.moves += 1
            with self._lock:
                gone = self._by_key.pop(key, None)
                if gone is not None:
                    self._by_node.pop((gone.run_id, gone.node_id), None)
        return super().transition(key, expected, entry)


@pytest.mark.parametrize("fields", [FAILED, {"state": "accepted"}], ids=["failed_retryable", "accepted"])
def test_an_entry_purged_before_its_move_ends_the_call_unsent(fields: dict[str, Any]) -> None:
    store = PurgedAtMove()
    fresh = make_entry()
    store.begin(fresh.evolve(state="dispatched", attempts=1))
    current = store.get(fresh.key)
    assert current is not None
    assert store.transition(fresh.key, ("dispatched",), current.evolve(**fields)) is not None
    store.armed = True
    out: list[Any] = []
    worker = threading.Thread(target=lambda: out.append(_run(store, fresh, None)), daemon=True)
    worker.start()
    worker.join(10)
    assert not worker.is_alive(), f"the protocol retried the move of a purged entry {store.moves} times"
    obs, sends, _asked = out[0]
    assert sends == 0
    assert obs.error is not None and obs.error.category == "transient"
    assert obs.error.details.get("sent") is False
    assert store.moves == 1
