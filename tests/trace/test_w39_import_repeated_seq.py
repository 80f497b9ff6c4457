"""An imported file that holds one ``(run_id, seq)`` twice with different content is not resolved
first-wins: that run is skipped whole and counted, as a run whose id the store holds for another
run is; the same event written twice is still imported once."""

from __future__ import annotations

import io
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from actionspace.trace.cli import trace_app
from actionspace.trace.events import TraceEvent
from actionspace.trace.export import dumps_event, import_jsonl
from actionspace.trace.memory import MemoryTraceStore
from actionspace.trace.sqlite import SqliteTraceStore


def _event(run: str, seq: int, kind: str = "parsed", ts: float = 1.0, note: str = "a") -> TraceEvent:
    return TraceEvent(run_id=run, seq=seq, kind=kind, ts=ts, data={"note": note})


def _file(events: list[TraceEvent]) -> io.StringIO:
    return io.StringIO("".join(dumps_event(e) + "\n" for e in events))


def test_a_run_repeating_a_seq_with_other_data_is_skipped_whole_and_counted() -> None:
    store = MemoryTraceStore()
    events = [_event("ra", 0), _event("ra", 1, note="first"), _event("ra", 1, note="second"), _event("rb", 0)]
    result = import_jsonl(store, _file(events))
    assert store.events("ra") == []
    assert [e.seq for e in store.events("rb")] == [0]
    assert (result.read, result.written, result.skipped) == (4, 1, 3)
    assert result.repeated_runs == 1 and result.skipped_runs == 0


def test_a_repeated_seq_differing_in_kind_or_time_counts_too_in_every_store(tmp_path: Path) -> None:
    for n, other in enumerate((_event("r", 0, kind="observation"), _event("r", 0, ts=2.0))):
        for store in (MemoryTraceStore(), SqliteTraceStore(tmp_path / f"{n}.db")):
            result = import_jsonl(store, _file([_event("r", 0), other, _event("q", 0)]))
            assert result.repeated_runs == 1 and result.written == 1 and store.events("r") == []
            store.close()


def test_the_same_event_twice_in_one_file_is_imported_once_and_not_counted() -> None:
    store = MemoryTraceStore()
    result = import_jsonl(store, _file([_event("r", 0), _event("r", 1), _event("r", 0)]))
    assert (result.written, result.skipped, result.repeated_runs) == (2, 0, 0)


def test_trace_import_says_how_many_runs_repeat_a_seq(tmp_path: Path) -> None:
    path = tmp_path / "f.jsonl"
    path.write_text(_file([_event("r", 0, note="x"), _event("r", 0, note="y")]).getvalue())
    db = f"sqlite:///{tmp_path / 't.db'}"
    said = CliRunner().invoke(trace_app, ["import", str(path), "--store", db])
    assert said.exit_code == 0, said.output
    assert "Read 2 events, 0 new. 2 skipped: 1 run of the file holds two different events at one seq." in (
        " ".join(said.stderr.split())
    )


@settings(max_examples=60, deadline=None)
@given(
    items=st.lists(
        st.tuples(st.sampled_from(["ra", "rb"]), st.integers(0, 3), st.sampled_from(["a", "b"])), max_size=10
    )
)
def test_no_run_of_a_file_is_stored_with_one_of_two_versions_of_an_event(
    items: list[tuple[str, int, str]],
) -> None:
    store = MemoryTraceStore()
    events = [_event(run, seq, note=note) for run, seq, note in items]
    result = import_jsonl(store, _file(events))
    versions: dict[tuple[str, int], set[str]] = {}
    for run, seq, note in items:
        versions.setdefault((run, seq), set()).add(note)
    repeated = {run for (run, _), notes in versions.items() if len(notes) > 1}
    assert result.repeated_runs == len(repeated)
    for run in ("ra", "rb"):
        stored = {(e.seq, e.data["note"]) for e in store.events(run)}
        wanted = (
            set() if run in repeated else {(s, n) for (r, s), ns in versions.items() if r == run for n in ns}
        )
        assert stored == wanted
    assert result.skipped == sum(1 for run, _, _ in items if run in repeated)
