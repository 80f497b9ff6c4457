"""A new run id is claimed once: of two starters at one moment (threads with stores of their own,
processes on one SQLite file, hosts on one PostgreSQL database) exactly one wins."""

from __future__ import annotations

import multiprocessing
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from actionspace.trace.events import TraceEvent, TraceStore
from actionspace.trace.memory import MemoryTraceStore
from actionspace.trace.sqlite import SqliteTraceStore
from actionspace.trace.store import open_trace_store
from tests.pg import STORES, store_url
from tests.trace import claim_workers

CLAIMANTS = 6


@pytest.fixture(params=STORES)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    yield from store_url(request, tmp_path)


def _claim(store: TraceStore, run_id: str) -> bool:
    return bool(store.claim_run(run_id))  # type: ignore[attr-defined]


def _race(opener: Callable[[], TraceStore], run_id: str) -> list[bool]:
    """``CLAIMANTS`` threads, each with a store of its own, claim ``run_id`` at once."""
    stores = [opener() for _ in range(CLAIMANTS)]
    start = threading.Barrier(CLAIMANTS, timeout=30)
    answers: list[bool] = []
    lock = threading.Lock()

    def claim(store: TraceStore) -> None:
        start.wait()
        won = _claim(store, run_id)
        with lock:
            answers.append(won)

    threads = [threading.Thread(target=claim, args=(s,)) for s in stores]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
    finally:
        for store in stores:
            store.close()
    return answers


def test_a_new_run_id_is_claimed_once_and_a_recorded_run_is_never_claimed(url: str) -> None:
    store = open_trace_store(url)
    try:
        assert _claim(store, "fresh") is True
        assert _claim(store, "fresh") is False
        store.append_many([TraceEvent(run_id="old", seq=0, kind="run_started", ts=1.0, data={})])
        assert _claim(store, "old") is False
        assert store.next_seq("fresh") == 0  # the claim records no event: the run starts at 0
        assert [s.run_id for s in store.runs()] == ["old"]  # nor is a claimed run listed before it starts
    finally:
        store.close()


def test_a_claimed_run_records_and_lists_like_any_other(url: str) -> None:
    store = open_trace_store(url)
    try:
        assert _claim(store, "claimed")
        store.append_many([TraceEvent(run_id="claimed", seq=0, kind="run_started", ts=5.0, data={})])
        store.append_many([TraceEvent(run_id="claimed", seq=1, kind="run_finished", ts=7.0, data={})])
        (summary,) = store.runs()
        assert (summary.run_id, summary.started_at, summary.last_at, summary.events) == (
            "claimed",
            5.0,
            7.0,
            2,
        )
    finally:
        store.close()


def test_a_claimed_run_does_not_push_recorded_runs_out_of_a_listing(url: str) -> None:
    store = open_trace_store(url)
    try:
        store.append_many([TraceEvent(run_id="old", seq=0, kind="run_started", ts=1.0, data={})])
        assert _claim(store, "claimed-later")
        assert [s.run_id for s in store.runs(limit=1)] == ["old"]
    finally:
        store.close()


def test_threads_with_stores_of_their_own_on_one_store_claim_a_run_id_once(url: str) -> None:
    if url == "memory://":
        shared = MemoryTraceStore()  # memory is one process's: its threads share the store
        answers = _race(lambda: shared, "raced")
    else:
        answers = _race(lambda: open_trace_store(url), "raced")
    assert sorted(answers) == [False] * (CLAIMANTS - 1) + [True]


def test_a_run_appended_by_this_process_but_not_yet_written_cannot_be_claimed(tmp_path: Path) -> None:
    store = SqliteTraceStore(tmp_path / "t.db")
    other = SqliteTraceStore(tmp_path / "t.db")
    try:
        store.append_records("held", [(0, "run_started", 1.0, None, {})])  # deferred, not written yet
        assert _claim(other, "held") is False
    finally:
        store.close()
        other.close()


def test_processes_on_one_sqlite_file_claim_a_run_id_once(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    open_trace_store(url).close()  # the tables exist before the race
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Barrier(3)
    results = ctx.Queue()
    procs = [
        ctx.Process(target=claim_workers.claim_once, args=(url, "raced", start, results, i)) for i in range(3)
    ]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(timeout=120)
        assert proc.exitcode == 0
    answers = sorted(results.get(timeout=10)[1] for _ in procs)
    assert answers == [False, False, True]
