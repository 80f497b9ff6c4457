"""Every trace store reads back what was recorded, whatever the payload: hostile text, keys that
write alike, deep nesting, huge values, values that are not JSON. What a store cannot hold as it
is comes back in its documented form (``store_encoding``), never silently different, and what a
store refuses is a ``ValueError`` that names the problem, with nothing of the batch written."""

from __future__ import annotations

import hashlib
import io
import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from actionspace._unicode import json_for_postgres, json_for_utf8
from actionspace.trace.events import TraceEvent, TraceStore
from actionspace.trace.export import import_jsonl, loads_event
from actionspace.trace.store import open_trace_store
from actionspace.trace.store_encoding import MAX_EVENT_CHARS, strict_dumps
from tests.pg import STORES, store_url
from tests.text_strategies import json_values


@pytest.fixture(params=STORES)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    yield from store_url(request, tmp_path)


@pytest.fixture
def store(url: str) -> Iterator[TraceStore]:
    opened = open_trace_store(url)
    yield opened
    opened.close()


def _kind(store: TraceStore) -> str:
    return type(store).__name__.removesuffix("TraceStore").lower()


def _as_stored(store: TraceStore, data: dict[str, Any]) -> Any:
    """``data`` as the store documents keeping plain JSON (``store_encoding``): the memory store
    exactly; SQLite exactly, except that a high surrogate followed by a low one reads back as the
    character the pair encodes; PostgreSQL with U+FFFD for U+0000 and unpaired surrogates."""
    text = json.dumps(data, ensure_ascii=False)
    if _kind(store) == "postgres":
        return json.loads(json_for_postgres(text))
    if _kind(store) == "sqlite":
        return json.loads(json_for_utf8(text))
    return data


def _round_trip(store: TraceStore, run_id: str, data: dict[str, Any]) -> Any:
    store.append_many([TraceEvent(run_id=run_id, seq=0, kind="parsed", ts=1.0, data=data)])
    (event,) = store.events(run_id)
    return event.data


def _deep(depth: int) -> dict[str, Any]:
    value: Any = "leaf"
    for _ in range(depth):
        value = {"n": value}
    return {"deep": value}


def _strings(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [*value, *(s for v in value.values() for s in _strings(v))]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return [value] if isinstance(value, str) else []


_runs = iter(range(10**9))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(json_values)
def test_plain_json_with_hostile_text_reads_back_as_recorded(store: TraceStore, value: Any) -> None:
    data = {"value": value}
    assert _round_trip(store, f"r{next(_runs)}", data) == _as_stored(store, data)


def test_keys_that_write_alike_are_all_kept(store: TraceStore) -> None:
    data = {"args": {1: "int", "1": "str"}, "none": {None: "a", "null": "b"}}
    back = _round_trip(store, "collide", data)
    assert sorted(back["args"].values()) == ["int", "str"]
    assert sorted(back["none"].values()) == ["a", "b"]


def test_keys_that_write_alike_in_a_value_that_is_not_json_are_all_kept(store: TraceStore) -> None:
    data = {"args": {1: "int", "1": "str", "s": {1, 2}}}
    back = _round_trip(store, "collide-safe", data)
    values = back["args"].values()
    assert "int" in values and "str" in values and len(back["args"]) == 3


def test_nesting_too_deep_to_write_is_marked_never_dropped(store: TraceStore) -> None:
    data = _deep(5000)
    back = _round_trip(store, "deep", data)
    if back == data:
        assert _kind(store) == "memory"  # the memory store keeps the value itself
        return
    assert '"$truncated": "depth"' in json.dumps(back)
    level = back["deep"]
    for _ in range(32):  # the levels above the cut are kept
        level = level["n"]
    assert isinstance(level, dict)


def test_an_event_too_large_keeps_its_short_fields_and_a_digest_of_the_whole(store: TraceStore) -> None:
    data = {"status": "error", "category": "transient", "blob": "x" * (MAX_EVENT_CHARS + 10)}
    back = _round_trip(store, "huge", data)
    if back == data:
        return  # the memory store keeps the value itself
    assert back["status"] == "error" and back["category"] == "transient"
    cut = back["$truncated"]
    assert cut["sha256"] == hashlib.sha256(strict_dumps(data).encode()).hexdigest()
    assert cut["chars"] == len(strict_dumps(data)) and strict_dumps(data).startswith(cut["prefix"])


def test_values_that_are_not_json_come_back_in_their_documented_form(store: TraceStore) -> None:
    data = {"nan": math.nan, "inf": -math.inf, "set": {1}, "bytes": b"\x00", "big": 10**5000}
    back = _round_trip(store, "odd", data)
    if _kind(store) == "memory":
        assert back["set"] == {1} and back["big"] == 10**5000
        return
    assert back["nan"] == "NaN" and back["inf"] == "-Infinity"
    assert back["set"] == "{1}" and back["bytes"] == "b'\\x00'"
    assert back["big"].startswith("<int of ")


def test_text_a_store_cannot_hold_is_replaced_as_documented_and_never_lost(store: TraceStore) -> None:
    data = dict([("nul", "a\x00b"), ("lone", "x\ud800y"), ("\udfffkey", 1), ("\ud800key", 2)])
    back = _round_trip(store, "text", data)
    assert back == _as_stored(store, data)
    assert len(back) == 4


@pytest.mark.parametrize(
    ("run_id", "ts"),
    [("ok", math.nan), ("ok", math.inf), ("lone\ud800", 1.0), ("nul\x00", 1.0)],
    ids=["nan-ts", "inf-ts", "surrogate-run-id", "nul-run-id"],
)
def test_an_event_a_store_cannot_write_is_refused_with_a_value_error_and_nothing_is_written(
    store: TraceStore, run_id: str, ts: float
) -> None:
    good = TraceEvent(run_id="fine", seq=0, kind="parsed", ts=1.0, data={})
    bad = TraceEvent(run_id=run_id, seq=0, kind="parsed", ts=ts, data={})
    try:
        store.append_many([good, bad])
    except ValueError as exc:
        assert "repeats" not in str(exc)  # not mistaken for a duplicate (run_id, seq)
        assert store.events("fine") == []
        return
    assert [e.ts for e in store.events("fine")] == [1.0]
    (stored,) = store.events(run_id)
    assert stored.ts == ts or (math.isnan(ts) and math.isnan(stored.ts))


@pytest.mark.parametrize(
    "line",
    [
        '{"run_id": "r", "seq": 0, "kind": "parsed", "ts": NaN, "data": {}}',
        '{"run_id": "r", "seq": 0, "kind": "parsed", "ts": Infinity, "data": {}}',
        '{"run_id": "r\\ud800", "seq": 0, "kind": "parsed", "ts": 1.0, "data": {}}',
        '{"run_id": "r", "seq": -1, "kind": "parsed", "ts": 1.0, "data": {}}',
        '{"run_id": "r", "seq": 0, "kind": "parsed", "ts": 1.0, "data": [1]}',
    ],
    ids=["nan-ts", "inf-ts", "surrogate-run-id", "negative-seq", "data-not-an-object"],
)
def test_an_import_line_no_store_can_keep_is_refused_naming_its_line(line: str) -> None:
    with pytest.raises(ValueError, match="line 2"):
        import_jsonl(
            open_trace_store("memory://"),
            io.StringIO('{"run_id": "r", "seq": 5, "kind": "parsed", "ts": 1.0, "data": {}}\n' + line),
        )
    with pytest.raises(ValueError):
        loads_event(line)


def test_every_string_of_a_recorded_payload_survives_in_some_form(store: TraceStore) -> None:
    data = {"a": ["\x00", "\ud83d", "ok", {"k\x00": "\ude00"}], "b": {"x": {"y": "z"}}}
    back = _round_trip(store, "all", data)
    assert len(_strings(back)) == len(_strings(data))


def test_a_kind_a_store_cannot_hold_costs_no_other_run_its_events(store: TraceStore) -> None:
    append = store.append_records  # type: ignore[attr-defined]
    append("a", [(0, "parsed", 1.0, None, {"x": 1})])
    append("b", [(0, "odd\ud800\x00", 1.0, None, {})])
    assert [e.data for e in store.events("a")] == [{"x": 1}]
    (odd,) = store.events("b")
    assert odd.kind in ("odd\ud800\x00", "odd\ufffd\x00", "odd\ufffd\ufffd")
