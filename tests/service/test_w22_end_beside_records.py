"""A run's end written beside its last records, on PostgreSQL: the records are renumbered, not lost.

The service writes a run's ``run_finished`` at the number after the last event it read
(``service/finishing.py``), without the lock the writers of a call's records take; those number
their batch after the run's stored events under that lock. When the end takes the number between a
batch's read of it and its insert, the insert repeats a stored ``(run_id, seq)``: the store must say
so as every store does (``ValueError``), so that the writer renumbers the batch after the stored
events, instead of the driver's ``UniqueViolation``, on which the batch was dropped from the trace
("the trace store rejected 1 events"). Seen under load with plans run through the API.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from actionspace.trace import postgres
from actionspace.trace.events import TraceEvent
from actionspace.trace.postgres import PostgresTraceStore
from tests.pg import fresh_schema


@pytest.fixture
def url(pg_url: str) -> Iterator[str]:
    yield from fresh_schema(pg_url)


def _event(seq: int, kind: str) -> TraceEvent:
    return TraceEvent(run_id="r", seq=seq, kind=kind, ts=time.time(), data={})


def test_records_whose_number_the_end_took_meanwhile_are_refused_typed_and_then_stored_after_it(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, ender_store = PostgresTraceStore(url), PostgresTraceStore(url)
    try:
        store.append_many([_event(0, "run_started")])
        real = store._db.connection  # what the batch's transaction is begun on (``transaction_again``)
        ended: list[bool] = []

        @contextmanager
        def end_taken_meanwhile() -> Iterator[Any]:
            """The batch's transaction, the end written by another writer (a store of its own, as
            another server's) right after the batch read its next number: the end takes no lock
            the batch holds."""
            with real() as conn:
                execute = conn.execute

                def step(query: Any, *args: Any, **kwargs: Any) -> Any:
                    answer = execute(query, *args, **kwargs)
                    if query is postgres._NEXT_SEQ and not ended:
                        ended.append(True)
                        ender = threading.Thread(
                            target=ender_store.append_many, args=([_event(1, "run_finished")],)
                        )
                        ender.start()
                        ender.join(timeout=30)
                    return answer

                conn.execute = step  # type: ignore[method-assign]
                yield conn

        monkeypatch.setattr(store._db, "connection", end_taken_meanwhile)
        records = [(1, "observation", time.time(), "c1", {"status": "ok"})]
        with pytest.raises(ValueError):
            store.append_records("r", records)
        assert ended, "the end was not written between the batch's read of its number and its insert"
        monkeypatch.undo()
        store.append_records("r", records)  # what the writer does on ValueError: numbered again
        assert [(e.seq, e.kind) for e in store.events("r")] == [
            (0, "run_started"),
            (1, "run_finished"),
            (2, "observation"),
        ]
    finally:
        store.close()
        ender_store.close()
