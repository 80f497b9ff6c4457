"""The PostgreSQL ledger and approval stores against a real cluster (see tests/pg.py)."""

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
from actionspace.ledger.entries import STATES, LedgerEntry, LedgerStore
from actionspace.ledger.open import open_approvals, open_ledger
from actionspace.ledger.postgres import PostgresApprovalStore, PostgresLedgerStore
from tests.ledger.factories import NOW, entry, request
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


def test_begin_creates_an_entry_once(ledger: LedgerStore) -> None:
    first = ledger.begin(entry())
    again = ledger.begin(entry())
    assert first.created and first.entry == entry()
    assert not again.created and again.entry == entry()
    assert ledger.get(entry().key) == entry()


def test_begin_of_a_known_node_with_other_arguments_returns_the_first_entry(ledger: LedgerStore) -> None:
    ledger.begin(entry(amount=10))
    other = ledger.begin(entry(amount=99))
    assert not other.created and other.entry == entry(amount=10)
    assert ledger.get(entry(amount=99).key) is None


def test_begin_returns_the_stored_state_not_the_offered_one(ledger: LedgerStore) -> None:
    ledger.begin(entry())
    ledger.transition(entry().key, ["accepted"], entry(state="dispatched", attempts=1))
    again = ledger.begin(entry())
    assert not again.created
    assert again.entry.state == "dispatched" and again.entry.attempts == 1


def test_entries_of_other_nodes_and_runs_are_separate(ledger: LedgerStore) -> None:
    assert ledger.begin(entry("n1")).created
    assert ledger.begin(entry("n2")).created
    assert ledger.begin(entry("n1", run_id="r2")).created
    assert ledger.get_node("r2", "n1") == entry("n1", run_id="r2")
    assert ledger.get_node("r1", "n3") is None
    assert ledger.get("as1_missing") is None


def test_every_field_round_trips(ledger: LedgerStore) -> None:
    ledger.begin(entry())
    committed = entry(
        state="committed",
        attempts=3,
        created_at=NOW + 0.125,
        updated_at=NOW + 7.000001,
        remote_id="ch_3Nx",
        observation={"status": "ok", "result": {"id": "ch_3Nx", "amounts": [1, 2.5, None]}, "ü": "ß"},
        error={"category": "timeout", "retryable": True, "retry_after": 1.5},
        resolution={"by": "ana", "reason": "seen in the bank", "at": NOW + 9, "outcome": "committed"},
    )
    ledger.transition(entry().key, ["accepted"], committed)
    stored = ledger.get(entry().key)
    assert stored == committed
    assert stored is not None and stored.to_dict() == committed.to_dict()


# -- ledger: compare-and-set -----------------------------------------------------------------------


def test_a_transition_from_an_expected_state_is_stored(ledger: LedgerStore) -> None:
    ledger.begin(entry())
    dispatched = entry(state="dispatched", attempts=1, updated_at=NOW + 1)
    assert ledger.transition(entry().key, ["accepted"], dispatched) == dispatched
    assert ledger.get_node("r1", "n1") == dispatched


def test_a_transition_from_another_state_is_refused_and_changes_nothing(ledger: LedgerStore) -> None:
    ledger.begin(entry())
    assert ledger.transition(entry().key, ["dispatched", "unknown"], entry(state="committed")) is None
    assert ledger.transition(entry().key, [], entry(state="committed")) is None
    assert ledger.get(entry().key) == entry()


def test_the_second_of_two_identical_transitions_loses(ledger: LedgerStore) -> None:
    ledger.begin(entry())
    won = ledger.transition(entry().key, ["accepted"], entry(state="dispatched", attempts=1))
    lost = ledger.transition(entry().key, ["accepted"], entry(state="dispatched", attempts=2))
    assert won is not None and lost is None
    stored = ledger.get(entry().key)
    assert stored is not None and stored.attempts == 1


def test_a_transition_of_an_unknown_key_returns_none(ledger: LedgerStore) -> None:
    assert ledger.transition(entry().key, STATES, entry(state="dispatched")) is None
    assert ledger.get(entry().key) is None


# -- ledger: list and purge ----------------------------------------------------------------------


def _one_entry_per_state(ledger: LedgerStore) -> dict[str, LedgerEntry]:
    stored: dict[str, LedgerEntry] = {}
    for i, state in enumerate(STATES):
        ledger.begin(entry(f"n_{state}"))
        moved = entry(f"n_{state}", state=state, updated_at=NOW + i)
        assert ledger.transition(moved.key, ["accepted"], moved) == moved
        stored[state] = moved
    return stored


def test_list_filters_by_state_most_recently_updated_first(ledger: LedgerStore) -> None:
    for i in range(4):
        ledger.begin(entry(f"n{i}", at=NOW + i))
    ledger.transition(entry("n0").key, ["accepted"], entry("n0", state="dispatched", at=NOW + 10))
    assert [e.node_id for e in ledger.list(state="accepted")] == ["n3", "n2", "n1"]
    assert [e.node_id for e in ledger.list(state="dispatched")] == ["n0"]
    assert [e.node_id for e in ledger.list()] == ["n0", "n3", "n2", "n1"]
    assert [e.node_id for e in ledger.list(limit=2)] == ["n0", "n3"]
    assert ledger.list(state="committed") == []


def test_purge_removes_only_old_committed_and_failed_entries(ledger: LedgerStore) -> None:
    stored = _one_entry_per_state(ledger)
    assert ledger.purge(older_than=NOW + 100) == 2
    for state, kept in stored.items():
        assert ledger.get(kept.key) == (None if state in ("committed", "failed") else kept)
    assert ledger.begin(entry("n_committed")).created


def test_purge_keeps_terminal_entries_updated_since(ledger: LedgerStore) -> None:
    stored = _one_entry_per_state(ledger)
    # committed was last updated at NOW + 2, failed at NOW + 3
    assert ledger.purge(older_than=NOW + 2) == 0
    assert ledger.purge(older_than=NOW + 2.5) == 1
    assert ledger.get(stored["committed"].key) is None
    assert ledger.get(stored["failed"].key) == stored["failed"]


# -- approvals -----------------------------------------------------------------------------------


def test_create_stores_a_pending_request_with_every_field(approvals: ApprovalStore) -> None:
    made = request(expires_at=NOW + 600)
    assert approvals.create(made) == made
    stored = approvals.get("apr_1")
    assert stored == made
    assert stored is not None and stored.to_dict() == made.to_dict()
    assert approvals.get("apr_missing") is None


def test_create_returns_the_pending_request_with_the_same_binding(approvals: ApprovalStore) -> None:
    first = approvals.create(request(request_id="apr_1"))
    second = approvals.create(request(request_id="apr_2", at=NOW + 1))
    assert second == first
    assert approvals.get("apr_2") is None
    assert approvals.find("r1", "pay@1", first.args_digest) == [first]


def test_other_arguments_or_runs_get_their_own_request(approvals: ApprovalStore) -> None:
    approvals.create(request(request_id="apr_1"))
    other_args = approvals.create(request(request_id="apr_2", amount=11))
    other_run = approvals.create(request(request_id="apr_3", run_id="r2"))
    assert (other_args.id, other_run.id) == ("apr_2", "apr_3")
    assert len(approvals.list(status="pending")) == 3


def test_a_decision_is_compare_and_set_on_status(approvals: ApprovalStore) -> None:
    pending = approvals.create(request())
    approved = pending.evolve(status="approved", decided_at=NOW + 5, decided_by="ana", decision_reason="ok")
    denied = pending.evolve(status="denied", decided_at=NOW + 6, decided_by="bo")
    assert approvals.update("apr_1", ["pending"], approved) == approved
    assert approvals.update("apr_1", ["pending"], denied) is None
    assert approvals.get("apr_1") == approved
    consumed = approved.evolve(status="consumed")
    assert approvals.update("apr_1", ["approved"], consumed) == consumed
    assert approvals.update("apr_1", ["approved"], consumed) is None
    assert approvals.update("apr_missing", ["pending"], request(request_id="apr_missing")) is None


def test_after_a_decision_the_binding_gets_a_new_request(approvals: ApprovalStore) -> None:
    first = approvals.create(request(request_id="apr_1"))
    approvals.update("apr_1", ["pending"], first.evolve(status="denied", decided_at=NOW + 1))
    second = approvals.create(request(request_id="apr_2", at=NOW + 2))
    assert second.id == "apr_2" and second.status == "pending"
    found = approvals.find("r1", "pay@1", first.args_digest)
    assert [(r.id, r.status) for r in found] == [("apr_2", "pending"), ("apr_1", "denied")]


def test_the_database_refuses_a_second_pending_request_for_a_binding(
    approvals: ApprovalStore, url: str
) -> None:
    approvals.create(request(request_id="apr_1"))
    with psycopg.connect(url) as conn, pytest.raises(psycopg.errors.UniqueViolation):
        conn.execute(
            "INSERT INTO approval_requests SELECT 'apr_2', run_id, node_id, tool, args_digest, arguments,"
            " provenance, effects, reason, details, status, created_at FROM approval_requests"
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
