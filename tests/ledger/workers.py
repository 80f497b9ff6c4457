"""Process entry points for the SQLite ledger concurrency and crash tests (importable under spawn)."""

from __future__ import annotations

import threading
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier, Event

from actionspace.ledger.sqlite import SqliteLedgerStore
from tests.ledger.factories import entry

BARRIER_TIMEOUT_S = 60.0


def begin_and_dispatch(path: str, index: int, start: Barrier, results: Queue[tuple[int, bool, bool]]) -> None:
    """Wait for the other processes, then begin node ``n1`` and try to mark it dispatched.

    Puts ``(index, created, won_the_dispatch)`` on ``results``.
    """
    store = SqliteLedgerStore(path)
    try:
        start.wait(BARRIER_TIMEOUT_S)
        begun = store.begin(entry())
        sent = begun.entry.evolve(
            state="dispatched", attempts=begun.entry.attempts + 1, remote_id=f"p{index}"
        )
        won = store.transition(begun.entry.key, ["accepted"], sent) is not None
        results.put((index, begun.created, won))
    finally:
        store.close()


def dispatch_then_hang(path: str, recorded: Event) -> None:
    """Begin node ``n1``, mark it dispatched, set ``recorded``, then wait to be killed."""
    store = SqliteLedgerStore(path)
    begun = store.begin(entry())
    store.transition(begun.entry.key, ["accepted"], begun.entry.evolve(state="dispatched", attempts=1))
    recorded.set()
    threading.Event().wait()


def begin_in_child(store: SqliteLedgerStore, node_id: str) -> None:
    """Use a store inherited through fork; exits non-zero if that fails."""
    if not store.begin(entry(node_id)).created:
        raise SystemExit(3)
    store.close()
