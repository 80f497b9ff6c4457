"""JSON Lines export and idempotent import."""

from __future__ import annotations

import io
import json

import pytest

from actionspace.trace.events import TraceStore
from actionspace.trace.export import export_jsonl, import_jsonl, iter_jsonl
from actionspace.trace.memory import MemoryTraceStore
from tests.trace.factories import calendar_run


def _filled(store: TraceStore) -> TraceStore:
    store.append_many(calendar_run("run-a", start=100.0))
    store.append_many(calendar_run("run-b", start=200.0, finished=False))
    return store


def test_export_writes_one_event_dict_per_line(store: TraceStore) -> None:
    out = io.StringIO()
    assert export_jsonl(_filled(store), out, run_id="run-a") == 22
    lines = out.getvalue().splitlines()
    assert [json.loads(line) for line in lines] == [e.to_dict() for e in calendar_run("run-a", start=100.0)]


def test_export_of_all_runs_round_trips_into_another_store(store: TraceStore) -> None:
    out = io.StringIO()
    assert export_jsonl(_filled(store), out) == 43
    target = MemoryTraceStore()
    result = import_jsonl(target, io.StringIO(out.getvalue()), batch_size=7)
    assert (result.read, result.written) == (43, 43)
    for rid in ("run-a", "run-b"):
        assert target.events(rid) == store.events(rid)


def test_importing_the_same_file_twice_stores_each_event_once(store: TraceStore) -> None:
    text = io.StringIO()
    export_jsonl(_filled(MemoryTraceStore()), text)
    first = import_jsonl(store, io.StringIO(text.getvalue()))
    second = import_jsonl(store, io.StringIO(text.getvalue()))
    assert (first.written, second.read, second.written) == (43, 43, 0)
    assert [s.events for s in store.runs()] == [21, 22]


def test_an_event_repeated_within_one_file_is_stored_once(store: TraceStore) -> None:
    text = io.StringIO()
    export_jsonl(_filled(MemoryTraceStore()), text, run_id="run-a")
    lines = text.getvalue().splitlines(keepends=True)
    result = import_jsonl(store, lines + lines[:5], batch_size=1000)
    assert (result.read, result.written) == (27, 22)


def test_export_of_an_unknown_run_writes_nothing(store: TraceStore) -> None:
    out = io.StringIO()
    assert export_jsonl(store, out, run_id="nope") == 0
    assert out.getvalue() == ""


def test_blank_lines_are_skipped_on_import() -> None:
    line = json.dumps(calendar_run("r")[0].to_dict())
    assert len(list(iter_jsonl(["\n", line + "\n", "   \n"]))) == 1


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", "line 2: not JSON"),
        ("[1, 2]", "line 2: expected a JSON object"),
        ('{"run_id": "r", "seq": 1, "kind": "parsed"}', "line 2: missing field 'ts'"),
        ('{"run_id": "r", "seq": "x", "kind": "parsed", "ts": 1}', "line 2: bad field value"),
    ],
)
def test_a_malformed_line_is_reported_with_its_number(line: str, message: str) -> None:
    good = json.dumps(calendar_run("r")[0].to_dict())
    with pytest.raises(ValueError, match=message):
        list(iter_jsonl([good, line]))
