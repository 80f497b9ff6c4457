"""Several processes record into one run of one shared store (SQLite file, PostgreSQL database).

Each process appends through ``append_records``, as the runtime does, and the store numbers the
records: every seq is used once and none is skipped, every process's records keep its own order
and each call's records stay together, nothing is lost, and ``next_seq`` is one past the last
event. Of processes claiming one run id at once exactly one wins. A process killed while it
appends loses only its own records not yet written: the file stays whole and the run numbered
without gaps.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actionspace.trace.events import TraceEvent
from actionspace.trace.store import open_trace_store
from tests.pg import fresh_schema
from tests.trace import test_w31_process_workers as workers

DEADLINE_S = 120.0
PROCS = 4
CALLS = 40
PER_CALL = workers.RECORDS_PER_CALL


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'shared.db'}"
    else:
        yield from fresh_schema(request.getfixturevalue("pg_url"))


def _by_process(events: list[TraceEvent]) -> dict[int, list[tuple[int, int]]]:
    out: dict[int, list[tuple[int, int]]] = {}
    for e in events:
        out.setdefault(int(e.data["proc"]), []).append((int(e.data["n"]), int(e.data["i"])))
    return out


def _assert_whole_calls(events: list[TraceEvent]) -> None:
    """Each call's records are consecutive and in their order."""
    for start in range(0, len(events), PER_CALL):
        call = events[start : start + PER_CALL]
        assert len({e.call_id for e in call}) == 1, [e.call_id for e in call]
        assert [e.data["i"] for e in call] == list(range(PER_CALL))


def test_processes_appending_to_one_run_number_it_without_gaps_and_lose_nothing(url: str) -> None:
    open_trace_store(url).close()  # tables created once, before the race
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Barrier(PROCS)
    won: Any = ctx.Queue()
    children = [
        ctx.Process(target=workers.append_calls, args=(url, "shared", n, CALLS, start, won))
        for n in range(PROCS)
    ]
    for child in children:
        child.start()
    answers = [won.get(timeout=DEADLINE_S) for _ in children]
    for child in children:
        child.join(DEADLINE_S)
    assert [child.exitcode for child in children] == [0] * PROCS
    assert sorted(answers) == [False] * (PROCS - 1) + [True]
    store = open_trace_store(url)
    try:
        events = store.events("shared")
        assert [e.seq for e in events] == list(range(PROCS * CALLS * PER_CALL))
        assert store.next_seq("shared") == PROCS * CALLS * PER_CALL
        expected = [(n, i) for n in range(CALLS) for i in range(PER_CALL)]
        assert _by_process(events) == dict.fromkeys(range(PROCS), expected)
        _assert_whole_calls(events)
        (summary,) = store.runs()
        assert summary.events == PROCS * CALLS * PER_CALL
    finally:
        store.close()


@pytest.mark.parametrize("signal_after", [7, 31])
def test_a_process_killed_while_appending_loses_only_its_own_unwritten_records(
    url: str, signal_after: int
) -> None:
    open_trace_store(url).close()
    ctx = multiprocessing.get_context("spawn")
    appended = ctx.Event()
    doomed = ctx.Process(target=workers.append_until_killed, args=(url, "shared", 0, signal_after, appended))
    doomed.start()
    try:
        assert appended.wait(DEADLINE_S), "the writer never reported its calls"
        survivor = open_trace_store(url)
        try:
            for n in range(CALLS):  # a process beside it, appending while it is killed
                records = [(i, "parsed", 0.0, f"9-{n}", {"proc": 9, "n": n, "i": i}) for i in range(PER_CALL)]
                survivor.append_records("shared", records)  # type: ignore[attr-defined]
                if n == CALLS // 2:
                    assert doomed.pid is not None
                    os.kill(doomed.pid, signal.SIGKILL)
        finally:
            survivor.close()
    finally:
        if doomed.is_alive():
            assert doomed.pid is not None
            os.kill(doomed.pid, signal.SIGKILL)
        doomed.join(DEADLINE_S)
    assert doomed.exitcode == -signal.SIGKILL

    store = open_trace_store(url)
    try:
        if url.startswith("sqlite"):
            check = store._db.conn().execute("PRAGMA integrity_check").fetchone()  # type: ignore[attr-defined]
            assert check[0] == "ok"
        events = store.events("shared")
        assert [e.seq for e in events] == list(range(len(events)))
        assert store.next_seq("shared") == len(events)
        _assert_whole_calls(events)
        found = _by_process(events)
        assert found[9] == [(n, i) for n in range(CALLS) for i in range(PER_CALL)]
        kept = found.get(0, [])  # what the killed process had written: a prefix of what it appended
        assert kept == [(n, i) for n in range(len(kept) // PER_CALL) for i in range(PER_CALL)]
        assert len(kept) >= (signal_after - 1) * PER_CALL or url.startswith("sqlite")
        store.append_records("shared", [(0, "run_finished", 1.0, None, {})])  # type: ignore[attr-defined]
        assert store.events("shared")[-1].seq == len(events)
    finally:
        store.close()
