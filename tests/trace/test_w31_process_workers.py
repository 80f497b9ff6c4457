"""Process entry points for tests/trace/test_w31_processes.py (importable under spawn); no tests."""

from __future__ import annotations

from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier, Event

from actionspace.trace.store import open_trace_store

BARRIER_TIMEOUT_S = 60.0
RECORDS_PER_CALL = 3


def append_calls(url: str, run_id: str, proc: int, calls: int, start: Barrier, won: Queue[bool]) -> None:
    """Claim ``run_id``, report whether this process won, then append ``calls`` calls of records
    (the runtime's path: ``append_records``, numbered by the store), each saying who and which."""
    store = open_trace_store(url)
    try:
        start.wait(BARRIER_TIMEOUT_S)
        won.put(bool(store.claim_run(run_id)))  # type: ignore[attr-defined]
        for n in range(calls):
            records = [
                (i, "parsed", float(n), f"{proc}-{n}", {"proc": proc, "n": n, "i": i})
                for i in range(RECORDS_PER_CALL)
            ]
            store.append_records(run_id, records)  # type: ignore[attr-defined]
    finally:
        store.close()


def append_until_killed(url: str, run_id: str, proc: int, signal_after: int, appended: Event) -> None:
    """Append calls of records to ``run_id`` for ever; set ``appended`` after ``signal_after``."""
    store = open_trace_store(url)
    n = 0
    while True:
        records = [
            (i, "parsed", float(n), f"{proc}-{n}", {"proc": proc, "n": n, "i": i})
            for i in range(RECORDS_PER_CALL)
        ]
        store.append_records(run_id, records)  # type: ignore[attr-defined]
        n += 1
        if n == signal_after:
            appended.set()
