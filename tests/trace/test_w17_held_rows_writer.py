"""The SQLite trace store's deferred write runs no Python per held row while it holds the file's writer,
and the rows it writes read back as the events a write of the same events one by one reads back."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import actionspace.trace.sqlite as trace_sqlite
from actionspace.ledger import sqlite_writer
from actionspace.trace.events import TraceEvent
from actionspace.trace.sqlite import SqliteTraceStore


def _records(call: int, count: int) -> list[tuple[int, str, float, str | None, dict[str, Any]]]:
    return [
        (i, f"kind{i % 3}", 1000.0 + call + i / 100, f"c{call}", {"call": call, "i": i}) for i in range(count)
    ]


def _opcodes_of_the_write(store: SqliteTraceStore, calls: int) -> int:
    """Opcodes run in the trace package's modules while one transaction writes ``calls`` held calls."""
    for call in range(calls):
        store.append_records("r", _records(call, 9))
    count = 0
    package = str(Path(trace_sqlite.__file__).parent)

    def tracer(frame: FrameType, event: str, arg: Any) -> Any:
        nonlocal count
        if not frame.f_code.co_filename.startswith(package):
            return None
        frame.f_trace_opcodes = True
        if event == "opcode":
            count += 1
        return tracer

    sys.settrace(tracer)
    try:
        store.sync()  # the held rows' transaction, led on this thread
    finally:
        sys.settrace(None)
    return count


def test_the_held_rows_are_written_with_no_python_run_per_row_while_the_writer_is_held(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_writer, "LINGER_S", 600.0)  # the flusher waits: sync takes every held row
    store = SqliteTraceStore(tmp_path / "t.db")
    _opcodes_of_the_write(store, 1)  # statements compiled, the run's row made
    small = _opcodes_of_the_write(store, 30)  # 270 rows
    large = _opcodes_of_the_write(store, 60)  # 540 rows
    # The code before built a tuple per row and flattened them under the writer: 57 opcodes a row,
    # 15,500 more for the 270 more rows. Now the difference is three statements more (about 110).
    assert large - small < 270, (small, large)
    events = store.events("r")
    assert [e.seq for e in events] == list(range(9 + 270 + 540))
    expected = [(c, i) for n in (1, 30, 60) for c in range(n) for i in range(9)]
    assert [(e.data["call"], e.data["i"]) for e in events] == expected
    assert [e.call_id for e in events] == [f"c{c}" for c, _ in expected]
    store.close()


_texts = st.text(st.characters(exclude_categories=["Cs"]), max_size=6)
_loose = st.text(
    st.one_of(st.characters(), st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)), max_size=6
)
"""Texts that may hold an unpaired surrogate (written as U+FFFD, or escaped inside a payload)."""
_data = st.dictionaries(
    _texts,
    st.one_of(
        st.none(), st.booleans(), st.integers(-(2**60), 2**60), _loose, st.lists(st.integers(), max_size=3)
    ),
    max_size=3,
)
_record = st.tuples(
    st.sampled_from(["parsed", "observation", "ledger", "flow_checked", "dispatched", "ke\u00efnd"]),
    st.floats(min_value=0, max_value=2e9, allow_nan=False),
    st.one_of(st.none(), _loose),
    _data,
)


@settings(max_examples=40, deadline=None)
@given(
    calls=st.lists(
        st.tuples(st.sampled_from(["ra", "rb", "r\u00e9"]), st.lists(_record, min_size=1, max_size=70)),
        min_size=1,
        max_size=8,
    ),
    reads_between=st.sets(st.integers(min_value=0, max_value=7)),
)
def test_held_calls_read_back_as_the_same_events_written_one_by_one(
    calls: list[tuple[str, list[tuple[str, float, str | None, dict[str, Any]]]]], reads_between: set[int]
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        held = SqliteTraceStore(Path(tmp) / "held.db")
        plain = SqliteTraceStore(Path(tmp) / "plain.db")
        following: dict[str, int] = {}
        for at, (run, records) in enumerate(calls):
            held.append_records(
                run, [(i, kind, ts, cid, data) for i, (kind, ts, cid, data) in enumerate(records)]
            )
            first = following.get(run, 0)
            plain.append_many(
                [
                    TraceEvent(run_id=run, seq=first + i, kind=kind, ts=ts, call_id=cid, data=data)
                    for i, (kind, ts, cid, data) in enumerate(records)
                ]
            )
            following[run] = first + len(records)
            if at in reads_between:
                assert held.events(run) == plain.events(run)
        for run in following:
            assert held.events(run) == plain.events(run)
            assert held.next_seq(run) == plain.next_seq(run) == following[run]
        assert held.runs() == plain.runs()
        held.close()
        plain.close()
