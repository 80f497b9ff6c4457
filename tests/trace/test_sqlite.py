"""What the SQLite store adds: durability, atomic batches, schema versioning, concurrency."""

from __future__ import annotations

import multiprocessing
import os
import random
import signal
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest

from actionspace.errors import ConfigurationError
from actionspace.trace.sqlite import SCHEMA_VERSION, SqliteTraceStore
from tests.trace import workers
from tests.trace.factories import batch, calendar_run

DEADLINE_S = 60.0


def test_events_survive_closing_and_reopening_the_file(tmp_path: Path) -> None:
    path = tmp_path / "trace.db"
    with SqliteTraceStore(path) as store:
        store.append_many(calendar_run("r1"))
    with SqliteTraceStore(path) as reopened:
        assert reopened.events("r1") == calendar_run("r1")
        assert reopened.next_seq("r1") == 22


def test_the_database_runs_in_wal_mode_with_normal_sync(tmp_path: Path) -> None:
    with SqliteTraceStore(tmp_path / "trace.db") as store:
        conn = store._db.conn()
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == 1
        assert conn.execute("PRAGMA busy_timeout").fetchone()[0] > 0


def test_a_new_file_records_the_schema_version(tmp_path: Path) -> None:
    with SqliteTraceStore(tmp_path / "trace.db") as store:
        assert store.schema_version() == SCHEMA_VERSION


def test_a_file_from_a_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "trace.db"
    SqliteTraceStore(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute(
            "UPDATE trace_meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION + 1),)
        )
    conn.close()
    with pytest.raises(ConfigurationError, match="schema version"):
        SqliteTraceStore(path)


def test_the_store_can_share_a_file_with_other_tables(tmp_path: Path) -> None:
    path = tmp_path / "actionspace.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE meta (k TEXT)")
        conn.execute("CREATE TABLE ledger (key TEXT PRIMARY KEY)")
    conn.close()
    with SqliteTraceStore(path) as store:
        store.append_many(batch("r", 0, 3))
        assert len(store.events("r")) == 3


def test_memory_paths_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="memory://"):
        SqliteTraceStore(":memory:")


def test_a_batch_repeating_a_stored_seq_is_rejected_whole(tmp_path: Path) -> None:
    with SqliteTraceStore(tmp_path / "trace.db") as store:
        store.append_many(batch("r", 0, 3))
        with pytest.raises(ValueError, match="nothing of the batch was written"):
            store.append_many(batch("r", 3, 3) + batch("r", 2, 1))
        assert [e.seq for e in store.events("r")] == [0, 1, 2]
        assert store.runs()[0].events == 3


def test_append_new_skips_stored_events_and_counts_the_rest(tmp_path: Path) -> None:
    with SqliteTraceStore(tmp_path / "trace.db") as store:
        store.append_many(batch("r", 0, 3))
        assert store.append_new(batch("r", 0, 6)) == 3
        assert store.append_new(batch("r", 0, 6)) == 0
        assert [e.seq for e in store.events("r")] == list(range(6))


def test_a_closed_store_refuses_further_use(tmp_path: Path) -> None:
    store = SqliteTraceStore(tmp_path / "trace.db")
    store.close()
    with pytest.raises(ValueError, match="closed"):
        store.events("r")


def test_runs_can_list_a_run_whose_timestamps_arrive_out_of_order(tmp_path: Path) -> None:
    with SqliteTraceStore(tmp_path / "trace.db") as store:
        events = batch("r", 0, 4)
        store.append_many(events[2:])
        store.append_many(events[:2])
        [summary] = store.runs()
        assert (summary.started_at, summary.last_at, summary.events) == (events[0].ts, events[-1].ts, 4)


def test_eight_threads_appending_at_once_lose_nothing(tmp_path: Path) -> None:
    threads, batches, size = 8, 200, 3
    store = SqliteTraceStore(tmp_path / "trace.db")
    start = threading.Barrier(threads)
    failures: list[BaseException] = []

    def writer(n: int) -> None:
        try:
            start.wait(DEADLINE_S)
            for i in range(batches):
                store.append_many(batch(f"thread-{n}", i * size, size))
                if i % 50 == 0:
                    store.runs(limit=5)
        except BaseException as exc:
            failures.append(exc)

    pool = [threading.Thread(target=writer, args=(n,)) for n in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join(DEADLINE_S)
    assert not failures
    assert not any(t.is_alive() for t in pool)
    for n in range(threads):
        assert [e.seq for e in store.events(f"thread-{n}")] == list(range(batches * size))
    assert sorted(s.events for s in store.runs()) == [batches * size] * threads
    store.close()


def test_four_processes_appending_to_one_file_lose_nothing(tmp_path: Path) -> None:
    path, procs, batches, size = str(tmp_path / "trace.db"), 4, 100, 6
    SqliteTraceStore(path).close()
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Barrier(procs)
    children = [
        ctx.Process(target=workers.append_batches, args=(path, f"proc-{n}", batches, size, start))
        for n in range(procs)
    ]
    for child in children:
        child.start()
    for child in children:
        child.join(DEADLINE_S)
    assert [child.exitcode for child in children] == [0] * procs
    with SqliteTraceStore(path) as store:
        for n in range(procs):
            assert [e.seq for e in store.events(f"proc-{n}")] == list(range(batches * size))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_process_killed_mid_append_leaves_only_whole_batches(tmp_path: Path, seed: int) -> None:
    path, size = str(tmp_path / "trace.db"), 10
    run_ids = ["crash-a", "crash-b", "crash-c"]
    signal_after = random.Random(seed).randint(5, 60)
    ctx = multiprocessing.get_context("spawn")
    written = ctx.Event()
    child = ctx.Process(target=workers.append_until_killed, args=(path, run_ids, size, signal_after, written))
    child.start()
    try:
        assert written.wait(DEADLINE_S), "the writer never reported its batches"
    finally:
        assert child.pid is not None
        os.kill(child.pid, signal.SIGKILL)
        child.join(DEADLINE_S)
    assert child.exitcode == -signal.SIGKILL

    with SqliteTraceStore(path) as store:
        assert store._db.conn().execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        total = 0
        for rid in run_ids:
            seqs = [e.seq for e in store.events(rid)]
            assert len(seqs) % size == 0
            assert seqs == list(range(len(seqs)))
            total += len(seqs)
        assert total >= signal_after * size
        assert sum(s.events for s in store.runs()) == total


def test_skipped_duplicates_do_not_move_a_run_in_the_listing(tmp_path: Path) -> None:
    with SqliteTraceStore(tmp_path / "trace.db") as store:
        store.append_many(batch("r", 0, 3, ts=100.0))
        store.append_new(batch("r", 0, 3, ts=900.0))
        [summary] = store.runs()
        assert summary.last_at == pytest.approx(100.002)


def test_calls_appended_before_one_commit_are_numbered_with_one_read_per_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    statements: list[str] = []
    connect = sqlite3.connect

    def watching(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn: sqlite3.Connection = connect(*args, **kwargs)
        conn.set_trace_callback(statements.append)
        return conn

    monkeypatch.setattr(sqlite3, "connect", watching)
    store = SqliteTraceStore(tmp_path / "t.db")
    statements.clear()
    for call in range(12):  # calls of two runs, each call three records
        run = "ra" if call % 3 else "rb"
        store.append_records(
            run, [(3 * call + i, "ev", 1.0 + call, f"{run}-c{call}", {"i": i}) for i in range(3)]
        )
    events = {run: store.events(run) for run in ("ra", "rb")}  # a read commits what is held first
    transactions = statements.count("BEGIN IMMEDIATE")  # one, unless the flusher's linger ran out
    reads = [s for s in statements if s.startswith("SELECT coalesce(max(seq)")]
    assert 1 <= transactions <= 3
    assert len(reads) <= 2 * transactions  # once per run a transaction writes, not once per call
    assert [e.seq for e in events["ra"]] == list(range(24))
    assert [e.seq for e in events["rb"]] == list(range(12))
    assert [(e.call_id, e.data["i"]) for e in events["rb"][:6]] == [
        ("rb-c0", 0),
        ("rb-c0", 1),
        ("rb-c0", 2),
        ("rb-c3", 0),
        ("rb-c3", 1),
        ("rb-c3", 2),
    ]
    store.close()
