"""Process entry points for the SQLite concurrency and crash tests (importable under spawn)."""

from __future__ import annotations

from multiprocessing.synchronize import Barrier, Event

from actionspace.trace.sqlite import SqliteTraceStore
from tests.trace.factories import batch

BARRIER_TIMEOUT_S = 60.0


def append_batches(path: str, run_id: str, batches: int, size: int, start: Barrier) -> None:
    """Wait for the other writers, then append ``batches`` batches of ``size`` events to ``run_id``."""
    store = SqliteTraceStore(path)
    start.wait(BARRIER_TIMEOUT_S)
    for i in range(batches):
        store.append_many(batch(run_id, i * size, size))
    store.close()


def append_until_killed(path: str, run_ids: list[str], size: int, signal_after: int, written: Event) -> None:
    """Append batches round-robin over ``run_ids`` forever; set ``written`` after ``signal_after``."""
    store = SqliteTraceStore(path)
    seqs = dict.fromkeys(run_ids, 0)
    count = 0
    while True:
        run_id = run_ids[count % len(run_ids)]
        store.append_many(batch(run_id, seqs[run_id], size))
        seqs[run_id] += size
        count += 1
        if count == signal_after:
            written.set()
