"""Process entry points for the run-claim race tests (importable under spawn)."""

from __future__ import annotations

from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier

from actionspace.trace.store import open_trace_store

BARRIER_TIMEOUT_S = 60.0


def claim_once(url: str, run_id: str, start: Barrier, results: Queue[tuple[int, bool]], index: int) -> None:
    """Open the store at ``url``, wait for the other claimants, claim ``run_id``; report the answer."""
    store = open_trace_store(url)
    try:
        start.wait(BARRIER_TIMEOUT_S)
        results.put((index, bool(store.claim_run(run_id))))  # type: ignore[attr-defined]
    finally:
        store.close()
