"""A durable call on SQLite: the Python its stores run on the calling thread.

A side-effecting call on the SQLite store is bound by its processor time: one caller's call costs
several times a raw fsync'd insert's, eight callers run their Python one at a time. What the
stores run per call is counted here in Python calls on the calling thread (load-independent),
within the files that write it: the ledger store, the file's writer and the trace store. A lone
write is led at once with no slot of its own and no hand-over when nobody queued, and a row's
NULL columns are bound without a call. What is written is unchanged (the other tests of these
stores hold it).
"""

from __future__ import annotations

import sys
import threading
from collections import Counter
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

import actionspace.ledger.sqlite as ledger_sqlite
import actionspace.trace._payload_texts as payload_texts
import actionspace.trace.sqlite as trace_sqlite
from actionspace import Runtime, ToolCall
from actionspace.ledger import sqlite_writer

BUDGET = 29
"""Python calls a durable call runs in the four files below on its thread, the flusher kept out: 29
now (the ledger store 11, the writer 8, the payload cache 9, the trace store 1); the code before 37
(16 in the ledger store and 11 in the writer)."""
CALLS = 60
_FILES = frozenset(m.__file__ for m in (ledger_sqlite, sqlite_writer, trace_sqlite, payload_texts))


def _put(key: str, value: int) -> int:
    return 3


def test_a_durable_call_runs_few_python_calls_of_its_stores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_writer, "LINGER_S", 600.0)  # the trace waits for the settle below
    rt = Runtime(f"sqlite:///{tmp_path / 'a.db'}", recover_on_start=False)
    try:
        schema = {"type": "object", "properties": {"key": {"type": "string"}, "value": {"type": "integer"}}}
        rt.add_tool(name="put", input_schema=schema, fn=_put, effect="write", blocking=False)
        run = rt.new_run()

        def call(i: int) -> None:
            put = ToolCall(name="put", arguments={"key": f"k{i}", "value": i})
            obs = rt.call(put, run_id=run, node_id=f"n{i}")
            assert (obs.status, obs.data) == ("ok", 3), obs

        for i in range(20):  # the run's label settles, the tool's shared payloads are kept
            call(i)
        seen: Counter[str] = Counter()
        me = threading.get_ident()

        def profile(frame: FrameType, event: str, arg: Any) -> None:
            if event == "call" and frame.f_code.co_filename in _FILES and threading.get_ident() == me:
                seen[f"{Path(frame.f_code.co_filename).name}:{frame.f_code.co_name}"] += 1

        sys.setprofile(profile)
        try:
            for i in range(20, 20 + CALLS):
                call(i)
        finally:
            sys.setprofile(None)
        per_call = sum(seen.values()) / CALLS
        assert per_call <= BUDGET, (per_call, seen.most_common())
        entries = rt.ledger.entries_of(run, [f"n{i}" for i in range(20 + CALLS)])
        assert {e.state for e in entries.values()} == {"committed"} and len(entries) == 20 + CALLS
        kinds = Counter(event.kind for event in rt.trace.events(run))
        assert kinds["dispatched"] == kinds["flow_checked"] == 20 + CALLS
    finally:
        rt.close()
