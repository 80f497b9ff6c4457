"""The rows a SQLite trace store holds for its writer go in by a few multi-row statements."""

from __future__ import annotations

import sqlite3
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace.ledger import sqlite_writer
from actionspace.trace.sqlite import SqliteTraceStore


def _watched(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The statements every connection opened from now on runs (one entry per row of an executemany)."""
    statements: list[str] = []
    connect = sqlite3.connect

    def watching(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn: sqlite3.Connection = connect(*args, **kwargs)
        conn.set_trace_callback(statements.append)
        return conn

    monkeypatch.setattr(sqlite3, "connect", watching)
    return statements


def _ts(call: int, i: int) -> float:
    return 1000.0 + call + i / 100


def _records(call: int, count: int) -> list[tuple[int, str, float, str | None, dict[str, Any]]]:
    return [
        (i, f"kind{i % 3}", _ts(call, i), None if i % 4 == 0 else f"c{call}", {"call": call, "i": i})
        for i in range(count)
    ]


def test_the_held_rows_of_thirty_calls_are_inserted_by_four_statements_not_one_a_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_writer, "LINGER_S", 600.0)  # the flusher waits: one transaction takes all
    statements = _watched(monkeypatch)
    store = SqliteTraceStore(tmp_path / "t.db")
    statements.clear()
    for call in range(30):  # nine records a call, as a durable call records: 270 rows
        store.append_records("r", _records(call, 9))
    events = store.events("r")  # a read commits what is held first
    inserts = [s for s in statements if s.startswith("INSERT INTO trace_events")]
    assert statements.count("BEGIN IMMEDIATE") == 1
    assert len(inserts) == 4  # 3 x 81 rows, then 27 (one statement a row before: 270; then 9)
    expected = [(call, i) for call in range(30) for i in range(9)]
    assert [(e.data["call"], e.data["i"]) for e in events] == expected
    assert [e.seq for e in events] == list(range(270))
    assert [e.ts for e in events] == [_ts(c, i) for c, i in expected]
    assert [e.call_id for e in events] == [None if i % 4 == 0 else f"c{c}" for c, i in expected]
    assert [e.kind for e in events] == [f"kind{i % 3}" for _, i in expected]
    [summary] = store.runs()
    assert (summary.started_at, summary.last_at) == (1000.0, 1029.08)
    store.close()


@settings(max_examples=30, deadline=None)
@given(
    calls=st.lists(st.tuples(st.sampled_from(["ra", "rb"]), st.integers(1, 40)), min_size=1, max_size=12),
    reads_between=st.sets(st.integers(min_value=0, max_value=11)),
)
def test_held_rows_of_any_count_read_back_numbered_in_the_order_appended(
    calls: list[tuple[str, int]], reads_between: set[int]
) -> None:
    expected: dict[str, list[tuple[int, int]]] = {"ra": [], "rb": []}
    with tempfile.TemporaryDirectory() as tmp:
        store = SqliteTraceStore(Path(tmp) / "t.db")
        for call, (run, count) in enumerate(calls):
            store.append_records(run, _records(call, count))
            expected[run] += [(call, i) for i in range(count)]
            if call in reads_between:  # a read commits what is held: the next rows number after them
                store.events(run)
        for run, rows in expected.items():
            events = store.events(run)
            assert [(e.data["call"], e.data["i"]) for e in events] == rows
            assert [e.seq for e in events] == list(range(len(rows)))
            assert [e.ts for e in events] == [_ts(c, i) for c, i in rows]
        store.close()
