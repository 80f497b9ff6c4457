"""A read of a closed SQLite store raises ``StoreClosedError``, never a raw ``sqlite3`` error.

``events_of_runs`` reads its rows a page at a time as its consumer asks: the close came between two
pages and closed the connection under the open statement, and the next page raised
``sqlite3.ProgrammingError: Cannot operate on a closed database``. The paged read is now one use of
its connection: ``close()`` leaves the connection to it, the next page raises ``StoreClosedError``,
and the connection closes as the read ends. The store opened for reading only raised the same raw
error for any read after its close.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Generator
from pathlib import Path

import pytest

from actionspace.errors import StoreClosedError
from actionspace.ledger.run_state import SqliteRunStateStore
from actionspace.ledger.sqlite import SqliteLedgerStore
from actionspace.trace.events import TraceEvent
from actionspace.trace.sqlite import SqliteTraceReader, SqliteTraceStore


def _open_files(path: Path) -> int:
    found = 0
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # the listing's own descriptor, gone by now
            found += os.readlink(f"/proc/self/fd/{fd}").startswith(str(path))
    return found


def _fill(store: SqliteTraceStore, runs: int, events: int) -> None:
    store.append_many(
        [
            TraceEvent(run_id=f"r{n}", seq=seq, kind="note" if seq else "run_started", ts=1.0 + seq, data={})
            for n in range(runs)
            for seq in range(events)
        ]
    )


def test_a_paged_read_beside_close_raises_store_closed_and_its_connection_closes(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    store = SqliteTraceStore(path)
    _fill(store, 3, 4)
    pages = store.events_of_runs(["r0", "r1", "r2"], page=1)
    run_id, first = next(pages)
    assert (run_id, [e.seq for e in first]) == ("r0", [0, 1, 2, 3])
    closer = threading.Thread(target=store.close)
    closer.start()
    closer.join(10)
    assert not closer.is_alive()  # close() does not wait for the read
    with pytest.raises(StoreClosedError):
        next(pages)
    assert isinstance(pages, Generator)
    pages.close()
    assert _open_files(path) == 0


def test_a_read_only_trace_read_after_close_raises_store_closed(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    with SqliteTraceStore(path) as store:
        _fill(store, 1, 2)
    reader = SqliteTraceReader(path)
    assert [e.seq for e in reader.events("r0")] == [0, 1]
    reader.close()
    with pytest.raises(StoreClosedError):
        reader.events("r0")
    with pytest.raises(StoreClosedError):
        reader.runs()


def test_every_sqlite_store_read_after_close_raises_store_closed(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    ledger, trace, states = SqliteLedgerStore(path), SqliteTraceStore(path), SqliteRunStateStore(path)
    _fill(trace, 1, 1)
    assert states.save("r0", {"turn": 1})
    reads: list[Callable[[], object]] = [
        lambda: ledger.get("k"),
        lambda: ledger.list(),
        lambda: trace.events("r0"),
        lambda: trace.runs(),
        lambda: states.load("r0"),
        lambda: states.rev("r0"),
    ]
    for read in reads:
        read()
    for store in (ledger, trace, states):
        store.close()
    for read in reads:
        with pytest.raises(StoreClosedError):
            read()
    assert _open_files(path) == 0
