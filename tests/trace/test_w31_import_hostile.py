"""``actionspace trace export`` / ``import`` against hostile files and shared stores.

A round trip is lossless (export, import into an empty store, export again: the same text);
importing twice changes nothing. A file no store can take ends in one ``error:`` line and writes
nothing; a run id the store holds for another run is skipped, counted, and never merged into it.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from actionspace.trace import export
from actionspace.trace.cli import trace_app
from actionspace.trace.events import TraceEvent, TraceStore
from actionspace.trace.export import dumps_event, export_jsonl, import_jsonl
from actionspace.trace.memory import MemoryTraceStore
from actionspace.trace.sqlite import SqliteTraceStore
from tests.pg import fresh_schema
from tests.trace.factories import calendar_run


def _line(**fields: Any) -> str:
    event: dict[str, Any] = {
        "run_id": "r",
        "seq": 0,
        "kind": "parsed",
        "ts": 1.0,
        "call_id": None,
        "data": {},
    }
    event.update(fields)
    return json.dumps(event)


def _cli(*args: str) -> Any:
    return CliRunner().invoke(trace_app, list(args), env={"COLUMNS": "200"})


def _exported(store: TraceStore) -> str:
    out = io.StringIO()
    export_jsonl(store, out)
    return out.getvalue()


@pytest.fixture
def pg_store(pg_url: str) -> Iterator[TraceStore]:
    from actionspace.trace.postgres import PostgresTraceStore

    schema = fresh_schema(pg_url)
    store = PostgresTraceStore(next(schema))
    yield store
    store.close()
    for _ in schema:
        pass


DEEP = '{"run_id":"r","seq":1,"kind":"parsed","ts":1.0,"data":{"a":' + "[" * 100_000 + "]" * 100_000 + "}}"


@pytest.mark.parametrize(
    ("bad", "why"),
    [
        (DEEP, "nested"),
        (_line(seq=2**63), "seq"),
        (_line(seq=2**64 + 5), "seq"),
    ],
    ids=["nesting", "seq-past-int64", "seq-past-uint64"],
)
def test_a_line_no_store_can_take_is_one_error_line_and_writes_nothing(
    tmp_path: Path, bad: str, why: str
) -> None:
    path = tmp_path / "in.jsonl"
    path.write_text(_line(seq=0) + "\n" + bad + "\n")
    result = _cli("import", str(path), "--store", f"sqlite:///{tmp_path / 't.db'}")
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    lines = [x for x in result.stderr.splitlines() if x.startswith("error:")]
    assert len(lines) == 1 and "line 2" in lines[0] and why in lines[0], result.stderr
    with SqliteTraceStore(tmp_path / "t.db") as store:
        assert store.events("r") == []


def test_a_line_longer_than_the_bound_is_refused_before_it_is_read_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(export, "MAX_LINE_CHARS", 1000)
    source = io.StringIO(_line(seq=0) + "\n" + _line(seq=1, data={"x": "y" * 50_000}) + "\n")
    store = MemoryTraceStore()
    with pytest.raises(ValueError, match=r"^line 2: longer than 1000 characters"):
        import_jsonl(store, source)
    assert source.tell() < 10_000  # the rest of the long line was never read
    assert store.events("r") == []


def test_a_run_id_postgres_cannot_hold_refuses_the_file_before_any_batch_is_written(
    pg_store: TraceStore,
) -> None:
    lines = [_line(seq=0), _line(seq=1), _line(run_id="r\x00", seq=0)]
    with pytest.raises(ValueError, match=r"^line 3: .*U\+0000"):
        import_jsonl(pg_store, iter(lines), batch_size=1)
    assert pg_store.events("r") == []


def _foreign_run() -> list[TraceEvent]:
    """Another run that happens to have the id ``run-a`` (another host, another day)."""
    return [
        TraceEvent(run_id="run-a", seq=seq, kind=kind, ts=5_000.0 + seq, data={"host": "b"})
        for seq, kind in enumerate(["run_started", "parsed", "run_finished"])
    ]


@pytest.mark.parametrize("kind", ["memory", "sqlite", "postgres"])
def test_a_run_id_held_by_another_run_is_skipped_and_counted_never_merged(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    store: TraceStore
    if kind == "memory":
        store = MemoryTraceStore()
    elif kind == "sqlite":
        store = SqliteTraceStore(tmp_path / "t.db")
    else:
        store = request.getfixturevalue("pg_store")
    live = _foreign_run()
    store.append_many(live)
    text = "".join(dumps_event(e) + "\n" for e in [*calendar_run("run-a"), *calendar_run("run-b")])
    result = import_jsonl(store, io.StringIO(text), batch_size=5)
    assert (result.skipped_runs, result.skipped) == (1, len(calendar_run("run-a")))
    assert result.written == len(calendar_run("run-b"))
    assert store.events("run-a") == live
    assert store.events("run-b") == calendar_run("run-b")
    if kind == "sqlite":
        store.close()


def test_a_run_id_held_by_a_run_the_file_does_not_overlap_is_skipped_too() -> None:
    store = MemoryTraceStore()
    store.append_many(_foreign_run())
    far = [TraceEvent(run_id="run-a", seq=10 + n, kind="parsed", ts=1.0) for n in range(3)]
    result = import_jsonl(store, io.StringIO("".join(dumps_event(e) + "\n" for e in far)))
    assert (result.written, result.skipped, result.skipped_runs) == (0, 3, 1)
    assert store.events("run-a") == _foreign_run()


def test_an_import_cut_short_completes_when_the_file_is_imported_again(tmp_path: Path) -> None:
    events = calendar_run("run-a")
    text = "".join(dumps_event(e) + "\n" for e in events)
    with SqliteTraceStore(tmp_path / "t.db") as store:
        store.append_many(events[:7])  # what a first import wrote before it was stopped
        result = import_jsonl(store, io.StringIO(text))
        assert (result.written, result.skipped) == (len(events) - 7, 0)
        assert store.events("run-a") == events


def test_the_cli_says_how_many_events_of_how_many_runs_it_skipped(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 't.db'}"
    with SqliteTraceStore(tmp_path / "t.db") as store:
        store.append_many(_foreign_run())
    path = tmp_path / "in.jsonl"
    path.write_text("".join(dumps_event(e) + "\n" for e in calendar_run("run-a")))
    result = _cli("import", str(path), "--store", url)
    assert result.exit_code == 0, result.output
    assert "22 skipped" in result.stderr and "1 run" in result.stderr, result.stderr


TEXT = st.text(st.characters(blacklist_categories=["Cs"]), max_size=12)
VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=10,
)
EVENTS = st.lists(
    st.builds(
        lambda run, seq, kind, ts, call, data: TraceEvent(
            run_id=run, seq=seq, kind=kind, ts=ts, call_id=call, data=data
        ),
        st.sampled_from(["a", "b", "r\u00e9", "x y"]),
        st.integers(0, 2**63 - 1),
        TEXT,
        st.floats(-1e12, 1e12, allow_nan=False),
        st.none() | TEXT,
        st.dictionaries(TEXT, VALUES, max_size=4),
    ),
    max_size=12,
    unique_by=lambda e: (e.run_id, e.seq),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(events=EVENTS)
def test_export_import_export_is_lossless_and_a_second_import_changes_nothing(
    tmp_path_factory: pytest.TempPathFactory, events: list[TraceEvent]
) -> None:
    folder = tmp_path_factory.mktemp("rt")
    for source, target in (
        (MemoryTraceStore(), MemoryTraceStore()),
        (SqliteTraceStore(folder / "s.db"), SqliteTraceStore(folder / "t.db")),
    ):
        source.append_many(events)
        first = _exported(source)
        source.close()
        result = import_jsonl(target, io.StringIO(first), batch_size=3)
        assert (result.read, result.written, result.skipped) == (len(events), len(events), 0)
        assert _exported(target) == first
        again = import_jsonl(target, io.StringIO(first), batch_size=3)
        assert (again.written, again.skipped) == (0, 0)
        assert _exported(target) == first
        target.close()


def test_a_big_file_imports_with_bounded_memory(tmp_path: Path) -> None:
    import tracemalloc

    path = tmp_path / "big.jsonl"
    events = 100_000
    with path.open("w") as out:
        for n in range(events):
            out.write(_line(run_id=f"r{n // 1000}", seq=n % 1000, ts=float(n), data={"n": n}) + "\n")
    with SqliteTraceStore(tmp_path / "t.db") as store, path.open() as source:
        tracemalloc.start()
        try:
            result = import_jsonl(store, source)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert (result.read, result.written) == (events, events)
        assert peak < 40 * 1024 * 1024, peak
        assert store.next_seq("r99") == 1000
