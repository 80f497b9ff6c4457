"""What the SQLite ledger and approval stores add: durability, schema, concurrency across processes."""

from __future__ import annotations

import multiprocessing
import os
import signal
import sqlite3
import threading
from pathlib import Path

import pytest

from actionspace.errors import ConfigurationError
from actionspace.ledger import sqlite as ledger_sqlite
from actionspace.ledger import sqlite_approvals as approval_sqlite
from actionspace.ledger.entries import Begun, LedgerEntry
from actionspace.ledger.sqlite import SqliteLedgerStore
from actionspace.ledger.sqlite_approvals import SqliteApprovalStore
from actionspace.trace.sqlite import SqliteTraceStore
from tests.ledger import workers
from tests.ledger.factories import entry, request
from tests.trace.factories import calendar_run

DEADLINE_S = 60.0
THREADS = 8
PROCESSES = 4


def test_the_ledger_runs_in_wal_mode_with_full_sync(tmp_path: Path) -> None:
    with SqliteLedgerStore(tmp_path / "a.db") as store:
        conn = store._conn()
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2
        assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == 10_000


def test_entries_survive_closing_and_reopening_the_file(tmp_path: Path) -> None:
    with SqliteLedgerStore(tmp_path / "a.db") as store:
        store.begin(entry())
    with SqliteLedgerStore(tmp_path / "a.db") as reopened:
        assert reopened.get(entry().key) == entry()


def test_a_new_file_records_the_schema_versions(tmp_path: Path) -> None:
    with SqliteLedgerStore(tmp_path / "a.db") as store:
        assert store.schema_version() == ledger_sqlite.SCHEMA_VERSION
    SqliteApprovalStore(tmp_path / "a.db").close()
    with sqlite3.connect(tmp_path / "a.db") as conn:
        rows = dict(conn.execute("SELECT key, value FROM ledger_meta").fetchall())
    conn.close()
    assert rows == {
        "schema_version": str(ledger_sqlite.SCHEMA_VERSION),
        "approval_schema_version": str(approval_sqlite.SCHEMA_VERSION),
    }


@pytest.mark.parametrize(
    ("meta_key", "opener"),
    [("schema_version", SqliteLedgerStore), ("approval_schema_version", SqliteApprovalStore)],
)
def test_a_file_from_a_newer_schema_is_refused(tmp_path: Path, meta_key: str, opener: type) -> None:
    path = tmp_path / "a.db"
    opener(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE ledger_meta SET value = '99' WHERE key = ?", (meta_key,))
    conn.close()
    with pytest.raises(ConfigurationError, match=meta_key):
        opener(path)


@pytest.mark.parametrize("opener", [SqliteLedgerStore, SqliteApprovalStore])
def test_an_in_memory_database_is_refused(opener: type) -> None:
    with pytest.raises(ConfigurationError, match="memory://"):
        opener(":memory:")


def test_a_closed_store_refuses_further_calls(tmp_path: Path) -> None:
    store = SqliteLedgerStore(tmp_path / "a.db")
    store.close()
    with pytest.raises(ValueError, match="closed"):
        store.get(entry().key)


def test_a_transition_must_carry_the_entry_of_its_key(tmp_path: Path) -> None:
    with SqliteLedgerStore(tmp_path / "a.db") as store:
        store.begin(entry())
        with pytest.raises(ValueError, match="was given the entry"):
            store.transition(entry().key, ["accepted"], entry("n2"))


def test_ledger_approvals_and_trace_share_one_file(tmp_path: Path) -> None:
    path = tmp_path / "actionspace.db"
    with (
        SqliteTraceStore(path) as trace,
        SqliteLedgerStore(path) as ledger,
        SqliteApprovalStore(path) as approvals,
    ):
        trace.append_many(calendar_run("r1"))
        ledger.begin(entry())
        approvals.create(request())
        assert ledger.get(entry().key) == entry()
        assert approvals.get("apr_1") == request()
        assert trace.events("r1") == calendar_run("r1")


def test_threads_racing_to_begin_one_node_create_it_once(tmp_path: Path) -> None:
    store = SqliteLedgerStore(tmp_path / "a.db")
    start = threading.Barrier(THREADS)
    results: list[Begun] = []

    def racer(amount: int) -> None:
        start.wait(DEADLINE_S)
        results.append(store.begin(entry(amount=amount)))

    threads = [threading.Thread(target=racer, args=(i,)) for i in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(DEADLINE_S)
    stored = store.get_node("r1", "n1")
    store.close()
    assert len(results) == THREADS
    assert sum(b.created for b in results) == 1
    assert stored is not None and all(b.entry == stored for b in results)


def test_threads_racing_one_transition_let_exactly_one_win(tmp_path: Path) -> None:
    store = SqliteLedgerStore(tmp_path / "a.db")
    store.begin(entry())
    start = threading.Barrier(THREADS)
    won: list[LedgerEntry | None] = []

    def racer(attempt: int) -> None:
        start.wait(DEADLINE_S)
        won.append(store.transition(entry().key, ["accepted"], entry(state="dispatched", attempts=attempt)))

    threads = [threading.Thread(target=racer, args=(i,)) for i in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(DEADLINE_S)
    winners = [w for w in won if w is not None]
    assert len(won) == THREADS and len(winners) == 1
    assert store.get(entry().key) == winners[0]
    store.close()


def test_processes_racing_to_dispatch_one_key_let_exactly_one_send_it(tmp_path: Path) -> None:
    path = str(tmp_path / "a.db")
    SqliteLedgerStore(path).close()
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Barrier(PROCESSES)
    results: multiprocessing.queues.Queue[tuple[int, bool, bool]] = ctx.Queue()
    procs = [
        ctx.Process(target=workers.begin_and_dispatch, args=(path, i, start, results))
        for i in range(PROCESSES)
    ]
    for proc in procs:
        proc.start()
    outcomes = [results.get(timeout=DEADLINE_S) for _ in procs]
    for proc in procs:
        proc.join(DEADLINE_S)
        assert proc.exitcode == 0
    assert sum(created for _, created, _ in outcomes) == 1
    winners = [index for index, _, won in outcomes if won]
    assert len(winners) == 1
    with SqliteLedgerStore(path) as store:
        stored = store.get(entry().key)
    assert stored is not None
    assert (stored.state, stored.attempts, stored.remote_id) == ("dispatched", 1, f"p{winners[0]}")


def test_a_recorded_dispatch_survives_the_process_being_killed(tmp_path: Path) -> None:
    path = str(tmp_path / "a.db")
    ctx = multiprocessing.get_context("spawn")
    recorded = ctx.Event()
    child = ctx.Process(target=workers.dispatch_then_hang, args=(path, recorded))
    child.start()
    try:
        assert recorded.wait(DEADLINE_S), "the child never recorded its dispatch"
    finally:
        assert child.pid is not None
        os.kill(child.pid, signal.SIGKILL)
        child.join(DEADLINE_S)
    assert child.exitcode == -signal.SIGKILL
    with SqliteLedgerStore(path) as store:
        assert store._conn().execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        stored = store.get(entry().key)
    assert stored is not None and stored.state == "dispatched"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_opens_its_own_connection(tmp_path: Path) -> None:
    store = SqliteLedgerStore(tmp_path / "a.db")
    store.begin(entry("n_parent"))
    child = multiprocessing.get_context("fork").Process(
        target=workers.begin_in_child, args=(store, "n_child")
    )
    child.start()
    child.join(DEADLINE_S)
    assert child.exitcode == 0
    assert store.get_node("r1", "n_child") is not None
    assert store.begin(entry("n_parent_again")).created
    store.close()


def test_processes_share_one_pending_approval(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    with SqliteApprovalStore(path) as first, SqliteApprovalStore(path) as second:
        a = first.create(request(request_id="apr_a"))
        b = second.create(request(request_id="apr_b"))
        assert a == b and a.id == "apr_a"
        assert second.update("apr_a", ["pending"], a.evolve(status="approved")) is not None
        assert first.update("apr_a", ["pending"], a.evolve(status="denied")) is None
