"""Trace stores write strict JSON and never drop an event (issue item 6)."""

from __future__ import annotations

import json
import math
import sqlite3
from pathlib import Path
from typing import Any

from actionspace.trace.memory import COMPACT_AT, MemoryTraceStore
from actionspace.trace.sqlite import SqliteTraceStore
from actionspace.trace.store_encoding import MAX_DEPTH, MAX_EVENT_CHARS, encode_data


def _nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = {"x": value}
    return value


def test_a_nan_is_never_written_as_a_number_and_listings_still_aggregate(tmp_path: Path) -> None:
    store = SqliteTraceStore(tmp_path / "t.db")
    try:
        store.append_records("r", [(0, "observation", 1.0, None, {"status": "error", "x": math.nan})])
        store.append_records("r", [(1, "observation", 2.0, None, {"status": "ok", "y": -math.inf})])
        (summary,) = store.runs()
        data = [e.data for e in store.events("r")]
    finally:
        store.close()
    assert summary.calls == 2 and summary.errors == 1
    assert data == [{"status": "error", "x": "NaN"}, {"status": "ok", "y": "-Infinity"}]
    raw = sqlite3.connect(tmp_path / "t.db").execute("SELECT data FROM trace_events").fetchall()
    assert all("NaN" not in text or '"NaN"' in text for (text,) in raw)


def test_an_event_nested_thousands_deep_is_written_with_its_depth_capped(tmp_path: Path) -> None:
    deep = {"status": "ok", "arguments": _nested(5000)}
    store = SqliteTraceStore(tmp_path / "t.db")
    try:
        store.append_records(
            "r", [(0, "validated", 1.0, "c1", deep), (1, "observation", 2.0, "c1", {"x": 1})]
        )
        kinds = [e.kind for e in store.events("r")]
        stored = store.events("r")[0].data
    finally:
        store.close()
    assert kinds == ["validated", "observation"]
    assert stored["status"] == "ok" and "$truncated" in json.dumps(stored)
    memory = MemoryTraceStore()
    memory.append_records("r", [(i, "observation", 1.0, None, deep) for i in range(COMPACT_AT)])
    assert len(memory.events("r")) == COMPACT_AT


def test_an_oversized_event_keeps_its_short_fields_label_and_digest() -> None:
    label = {"confidentiality": "secret", "integrity": "trusted", "readers": None}
    data = {"status": "ok", "tool": "read", "label": label, "blob": "x" * (MAX_EVENT_CHARS + 10)}
    kept = json.loads(encode_data(data))
    assert kept["status"] == "ok" and kept["tool"] == "read" and kept["label"] == label
    assert "blob" not in kept and kept["$truncated"]["chars"] > MAX_EVENT_CHARS
    assert len(kept["$truncated"]["sha256"]) == 64
    assert json.loads(encode_data({"a": _nested(MAX_DEPTH - 2)})) == {"a": _nested(MAX_DEPTH - 2)}
