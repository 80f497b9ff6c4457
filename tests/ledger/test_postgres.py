"""PostgreSQL-only behaviours of the ledger and approval stores.

The shared behaviour suite (test_stores.py) runs on PostgreSQL too, through ``STORE_KINDS``.
"""

from __future__ import annotations

import multiprocessing
import queue
from collections import Counter
from collections.abc import Iterator
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Event

import psycopg
import pytest

from actionspace.approval.requests import ApprovalStore
from actionspace.errors import ConfigurationError
from actionspace.ledger.entries import LedgerStore
from actionspace.ledger.open import open_approvals, open_ledger
from actionspace.ledger.postgres import PostgresApprovalStore, PostgresLedgerStore
from tests.ledger.factories import entry, request
from tests.pg import fresh_schema

PROCESSES = 4
NODES = 16
DEADLINE_S = 60.0


@pytest.fixture
def url(pg_url: str) -> Iterator[str]:
    yield from fresh_schema(pg_url)


@pytest.fixture
def ledger(url: str) -> Iterator[LedgerStore]:
    store = PostgresLedgerStore(url)
    yield store
    store.close()


@pytest.fixture
def approvals(url: str) -> Iterator[ApprovalStore]:
    store = PostgresApprovalStore(url)
    yield store
    store.close()


# -- ledger: begin ------------------------------------------------------------------------------


def test_the_database_refuses_a_second_pending_request_for_a_binding(
    approvals: ApprovalStore, url: str
) -> None:
    approvals.create(request(request_id="apr_1"))
    with psycopg.connect(url) as conn, pytest.raises(psycopg.errors.UniqueViolation):
        conn.execute(
            "INSERT INTO approval_requests SELECT 'apr_2', run_id, node_id, tool, args_digest, arguments,"
            " provenance, effects, reason, details, status, created_at, NULL, NULL, NULL, NULL, holder"
            " FROM approval_requests"
        )


# -- PostgreSQL specifics ------------------------------------------------------------------------


def test_two_stores_on_one_database_see_each_others_writes(url: str) -> None:
    with PostgresLedgerStore(url) as one, PostgresLedgerStore(url) as two:
        assert one.begin(entry()).created
        assert not two.begin(entry()).created
        assert two.transition(entry().key, ["accepted"], entry(state="dispatched")) is not None
        assert one.transition(entry().key, ["accepted"], entry(state="dispatched")) is None


def test_the_store_urls_open_the_postgres_stores(url: str) -> None:
    ledger, approvals = open_ledger(url), open_approvals(url)
    try:
        assert isinstance(ledger, PostgresLedgerStore)
        assert isinstance(approvals, PostgresApprovalStore)
    finally:
        ledger.close()
        approvals.close()


def test_a_newer_schema_version_is_refused(url: str) -> None:
    PostgresLedgerStore(url).close()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("UPDATE ledger_meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(ConfigurationError, match="schema version 99"):
        PostgresLedgerStore(url)


def test_a_closed_store_refuses_calls(url: str) -> None:
    store = PostgresLedgerStore(url)
    store.close()
    with pytest.raises(ValueError, match="closed"):
        store.get(entry().key)


def race_worker(
    url: str, index: int, ready: Queue[int], go: Event, results: Queue[tuple[int, str, bool, bool]]
) -> None:
    """Open a store, report ready, wait for ``go``, then begin and dispatch every node once."""
    store = PostgresLedgerStore(url)
    try:
        ready.put(index)
        if not go.wait(DEADLINE_S):
            return
        for n in range(NODES):
            begun = store.begin(entry(f"n{n}"))
            sent = begun.entry.evolve(state="dispatched", attempts=1, remote_id=f"p{index}")
            won = store.transition(begun.entry.key, ["accepted"], sent) is not None
            results.put((index, f"n{n}", begun.created, won))
    finally:
        store.close()


def test_processes_racing_on_the_same_nodes_dispatch_each_exactly_once(url: str) -> None:
    ctx = multiprocessing.get_context("spawn")
    ready: Queue[int] = ctx.Queue()
    results: Queue[tuple[int, str, bool, bool]] = ctx.Queue()
    go = ctx.Event()
    procs = [ctx.Process(target=race_worker, args=(url, i, ready, go, results)) for i in range(PROCESSES)]
    for p in procs:
        p.start()
    try:
        for _ in procs:
            ready.get(timeout=DEADLINE_S)
        go.set()
        outcomes = [results.get(timeout=DEADLINE_S) for _ in range(PROCESSES * NODES)]
        for p in procs:
            p.join(DEADLINE_S)
            assert p.exitcode == 0
    except queue.Empty:
        pytest.fail("a racing process did not report in time")
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join()
    created = Counter(node for _, node, was_created, _ in outcomes if was_created)
    winners = {node: [i for i, n, _, won in outcomes if n == node and won] for node in created}
    assert created == {f"n{n}": 1 for n in range(NODES)}
    assert all(len(w) == 1 for w in winners.values()), winners
    with PostgresLedgerStore(url) as store:
        for node, [winner] in winners.items():
            stored = store.get_node("r1", node)
            assert stored is not None and stored.state == "dispatched"
            assert stored.remote_id == f"p{winner}"
