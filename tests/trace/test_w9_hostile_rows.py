"""A trace store written by another version, or edited by hand, holds rows this version never
writes. Each reads back as an event of the declared types, its oddity said in its data, and
``trace show``, ``show --json`` and ``export`` print the run instead of failing on it."""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from typer.testing import CliRunner

from actionspace.trace.cli import trace_app
from actionspace.trace.events import TraceEvent
from actionspace.trace.postgres import PostgresTraceReader, PostgresTraceStore
from actionspace.trace.sqlite import SqliteTraceReader, SqliteTraceStore
from tests.pg import fresh_schema

_EDITS: dict[str, tuple[str, Any]] = {
    "data-not-json": ("data", "{not json"),
    "data-a-list": ("data", "[1, 2]"),
    "data-null": ("data", "null"),
    "data-a-number": ("data", "7"),
    "data-nested-too-deep": ("data", "[" * 100_000 + "]" * 100_000),
    "data-bytes": ("data", b'{"a": "\xff"}'),
    "kind-bytes": ("kind", b"\x1b[2Jkind"),
    "call-id-bytes": ("call_id", b"c\xff"),
    "call-id-number": ("call_id", 5),
    "seq-text": ("seq", "later"),
    "ts-text": ("ts", "noon"),
}


def _edited(tmp_path: Path, column: str, value: Any) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "t.db"
    with SqliteTraceStore(path) as store:
        store.append_many(
            [
                TraceEvent(run_id="r", seq=0, kind="run_started", ts=1.0, data={"principal": "p"}),
                TraceEvent(run_id="r", seq=1, kind="observation", ts=2.0, call_id="c", data={"status": "ok"}),
            ]
        )
    with sqlite3.connect(path) as conn:
        conn.execute(f"UPDATE trace_events SET {column} = ? WHERE seq = 1", (value,))
    return path


def _typed(event: TraceEvent) -> None:
    assert type(event.run_id) is str and type(event.kind) is str and type(event.seq) is int
    assert type(event.ts) is float and (event.call_id is None or type(event.call_id) is str)
    assert type(event.data) is dict
    json.dumps(event.to_dict())


@pytest.mark.parametrize(("column", "value"), list(_EDITS.values()), ids=list(_EDITS))
def test_an_edited_row_reads_back_as_a_typed_event(tmp_path: Path, column: str, value: Any) -> None:
    path = _edited(tmp_path, column, value)
    with SqliteTraceStore(path) as store:
        events = store.events("r")
    with SqliteTraceReader(path) as reader:
        assert [e.to_dict() for e in reader.events("r")] == [e.to_dict() for e in events]
    assert len(events) == 2
    for event in events:
        _typed(event)
    assert events[0].data == {"principal": "p"}  # the other rows are untouched


def test_data_that_is_no_json_object_says_why_and_keeps_a_prefix(tmp_path: Path) -> None:
    expected = {
        "{not json": {"$unreadable": "not JSON", "chars": 9, "prefix": "{not json"},
        "[1, 2]": {"$unreadable": "not a JSON object", "chars": 6, "prefix": "[1, 2]"},
        "null": {"$unreadable": "not a JSON object", "chars": 4, "prefix": "null"},
    }
    for n, (text, data) in enumerate(expected.items()):
        path = _edited(tmp_path / str(n), "data", text)
        with SqliteTraceStore(path) as store:
            assert store.events("r")[1].data == data
    deep = _edited(tmp_path / "deep", "data", "[" * 100_000 + "]" * 100_000)
    with SqliteTraceStore(deep) as store:
        read = store.events("r")[1].data
    assert read["$unreadable"] == "nested too deep" and read["chars"] == 200_000
    assert len(read["prefix"]) == 512


def test_fields_of_the_wrong_type_read_as_declared() -> None:
    from actionspace.trace._stored_rows import stored_event

    event = stored_event(b"r\xff", "12", b"kind", "noon", 7, b'{"a": 1}')
    assert (event.run_id, event.seq, event.kind, event.call_id, event.data) == (
        "r\ufffd",
        12,
        "kind",
        "7",
        {"a": 1},
    )
    assert math.isnan(event.ts)
    assert stored_event("r", "x", "k", 10**400, None, "{}").seq == -1
    assert math.isnan(stored_event("r", 1, "k", 10**400, None, "{}").ts)


@pytest.mark.parametrize(("column", "value"), list(_EDITS.values()), ids=list(_EDITS))
def test_trace_show_and_export_print_a_run_holding_an_edited_row(
    tmp_path: Path, column: str, value: Any
) -> None:
    url = f"sqlite:///{_edited(tmp_path, column, value)}"
    runner = CliRunner()
    for args in (["show", "r"], ["show", "r", "--json"], ["export"]):
        result = runner.invoke(trace_app, [*args, "--store", url], env={"COLUMNS": "200"})
        assert result.exit_code == 0, (args, result.output, result.exception)
        assert "\x1b" not in result.stdout
    shown = runner.invoke(trace_app, ["show", "r", "--json", "--store", url]).stdout
    assert [event["seq"] for event in json.loads(shown)] in (
        [0, 1],
        [0, -1],
    )  # a text seq sorts after the numbers


@pytest.fixture
def pg_schema(pg_url: str) -> Iterator[str]:
    yield from fresh_schema(pg_url)


def test_postgres_reads_jsonb_that_is_no_object_as_a_typed_event(pg_schema: str) -> None:
    with PostgresTraceStore(pg_schema) as store:
        store.append_many(
            [TraceEvent(run_id="r", seq=n, kind="parsed", ts=1.0, data={"n": n}) for n in range(3)]
        )
    with psycopg.connect(pg_schema, autocommit=True) as conn:
        for seq, value in ((0, "[1, 2]"), (1, "null"), (2, '"text"')):
            conn.execute("UPDATE trace_events SET data = %s::jsonb WHERE seq = %s", (value, seq))
    with PostgresTraceStore(pg_schema) as store, PostgresTraceReader(pg_schema) as reader:
        for events in (store.events("r"), reader.events("r")):
            assert [e.data["$unreadable"] for e in events] == ["not a JSON object"] * 3
            assert [e.data["prefix"] for e in events] == ["[1, 2]", "null", '"text"']
            for event in events:
                _typed(event)


@pytest.mark.parametrize(
    "ts", ["noon", 1e300, -1e300, math.inf], ids=["text", "far-future", "far-past", "infinite"]
)
def test_trace_list_and_show_print_a_run_whose_start_is_no_time(tmp_path: Path, ts: Any) -> None:
    path = _edited(tmp_path, "ts", ts)
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE trace_events SET ts = ? WHERE seq = 0", (ts,))
        conn.execute("UPDATE trace_runs SET started_at = ?", (ts,))
    url = f"sqlite:///{path}"
    runner = CliRunner()
    for args in (["show", "r"], ["list"], ["list", "--json"], ["show", "r", "--json"]):
        result = runner.invoke(trace_app, [*args, "--store", url], env={"COLUMNS": "200"})
        assert result.exit_code == 0, (args, result.output, result.exception)
    shown = runner.invoke(trace_app, ["show", "r", "--store", url], env={"COLUMNS": "200"}).stdout
    assert "started ?" in shown and "observation" in shown
    with SqliteTraceStore(path) as store:
        (summary,) = store.runs()
    assert type(summary.started_at) is float
