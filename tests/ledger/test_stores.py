"""Behaviour every ledger and approval store shares (run once per kind, see conftest)."""

from __future__ import annotations

from actionspace.approval.requests import ApprovalStore
from actionspace.ledger.entries import STATES, LedgerEntry, LedgerStore
from tests.ledger.factories import NOW, entry, request

# -- ledger: begin ------------------------------------------------------------------------------


def test_begin_creates_an_entry_once(ledger_store: LedgerStore) -> None:
    first = ledger_store.begin(entry())
    again = ledger_store.begin(entry())
    assert first.created and first.entry == entry()
    assert not again.created and again.entry == entry()
    assert ledger_store.get(entry().key) == entry()


def test_begin_of_a_known_node_with_other_arguments_returns_the_first_entry(
    ledger_store: LedgerStore,
) -> None:
    ledger_store.begin(entry(amount=10))
    other = ledger_store.begin(entry(amount=99))
    assert not other.created
    assert other.entry == entry(amount=10)
    assert other.entry.args_digest != entry(amount=99).args_digest
    assert ledger_store.get(entry(amount=99).key) is None


def test_begin_returns_the_stored_state_not_the_offered_one(ledger_store: LedgerStore) -> None:
    ledger_store.begin(entry())
    ledger_store.transition(entry().key, ["accepted"], entry(state="dispatched", attempts=1))
    again = ledger_store.begin(entry())
    assert not again.created
    assert again.entry.state == "dispatched" and again.entry.attempts == 1


def test_entries_of_other_nodes_and_runs_are_separate(ledger_store: LedgerStore) -> None:
    assert ledger_store.begin(entry("n1")).created
    assert ledger_store.begin(entry("n2")).created
    assert ledger_store.begin(entry("n1", run_id="r2")).created
    assert ledger_store.get_node("r2", "n1") == entry("n1", run_id="r2")
    assert ledger_store.get_node("r1", "n3") is None
    assert ledger_store.get("as1_missing") is None


# -- ledger: compare-and-set -----------------------------------------------------------------------


def test_a_transition_from_an_expected_state_is_stored(ledger_store: LedgerStore) -> None:
    ledger_store.begin(entry())
    dispatched = entry(state="dispatched", attempts=1, updated_at=NOW + 1)
    assert ledger_store.transition(entry().key, ["accepted"], dispatched) == dispatched
    assert ledger_store.get(entry().key) == dispatched
    assert ledger_store.get_node("r1", "n1") == dispatched


def test_a_transition_from_another_state_is_refused_and_changes_nothing(ledger_store: LedgerStore) -> None:
    ledger_store.begin(entry())
    refused = ledger_store.transition(entry().key, ["dispatched", "unknown"], entry(state="committed"))
    assert refused is None
    assert ledger_store.get(entry().key) == entry()


def test_the_second_of_two_identical_transitions_loses(ledger_store: LedgerStore) -> None:
    ledger_store.begin(entry())
    won = ledger_store.transition(entry().key, ["accepted"], entry(state="dispatched", attempts=1))
    lost = ledger_store.transition(entry().key, ["accepted"], entry(state="dispatched", attempts=2))
    assert won is not None and lost is None
    stored = ledger_store.get(entry().key)
    assert stored is not None and stored.attempts == 1


def test_a_transition_of_an_unknown_key_returns_none(ledger_store: LedgerStore) -> None:
    assert ledger_store.transition(entry().key, STATES, entry(state="dispatched")) is None
    assert ledger_store.get(entry().key) is None


def test_every_field_round_trips(ledger_store: LedgerStore) -> None:
    ledger_store.begin(entry())
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
    ledger_store.transition(entry().key, ["accepted"], committed)
    stored = ledger_store.get(entry().key)
    assert stored == committed
    assert stored is not None and stored.to_dict() == committed.to_dict()


def test_empty_optional_fields_come_back_as_none(ledger_store: LedgerStore) -> None:
    ledger_store.begin(entry(arguments={}))
    stored = ledger_store.get(entry().key)
    assert stored is not None
    assert stored.arguments == {}
    assert (stored.remote_id, stored.observation, stored.error, stored.resolution) == (None, None, None, None)


# -- ledger: list and purge ----------------------------------------------------------------------


def _one_entry_per_state(ledger_store: LedgerStore, *, at: float) -> dict[str, LedgerEntry]:
    stored: dict[str, LedgerEntry] = {}
    for i, state in enumerate(STATES):
        node = f"n_{state}"
        ledger_store.begin(entry(node, at=at))
        moved = entry(node, at=at, state=state, updated_at=at + i)
        assert ledger_store.transition(moved.key, ["accepted"], moved) == moved
        stored[state] = moved
    return stored


def test_list_filters_by_state_most_recently_updated_first(ledger_store: LedgerStore) -> None:
    for i in range(4):
        ledger_store.begin(entry(f"n{i}", at=NOW + i))
    ledger_store.transition(entry("n0").key, ["accepted"], entry("n0", state="dispatched", at=NOW + 10))
    assert [e.node_id for e in ledger_store.list(state="accepted")] == ["n3", "n2", "n1"]
    assert [e.node_id for e in ledger_store.list(state="dispatched")] == ["n0"]
    assert [e.node_id for e in ledger_store.list()] == ["n0", "n3", "n2", "n1"]
    assert [e.node_id for e in ledger_store.list(limit=2)] == ["n0", "n3"]
    assert ledger_store.list(state="committed") == []


def test_purge_removes_only_old_committed_and_failed_entries(ledger_store: LedgerStore) -> None:
    stored = _one_entry_per_state(ledger_store, at=NOW)
    assert ledger_store.purge(older_than=NOW + 100) == 2
    for state, kept in stored.items():
        expected = None if state in ("committed", "failed") else kept
        assert ledger_store.get(kept.key) == expected
    assert ledger_store.begin(entry("n_committed")).created


def test_purge_keeps_terminal_entries_updated_since(ledger_store: LedgerStore) -> None:
    stored = _one_entry_per_state(ledger_store, at=NOW)
    # committed was last updated at NOW + 2, failed at NOW + 3
    assert ledger_store.purge(older_than=NOW + 2) == 0
    assert ledger_store.purge(older_than=NOW + 2.5) == 1
    assert ledger_store.get(stored["committed"].key) is None
    assert ledger_store.get(stored["failed"].key) == stored["failed"]


# -- approvals -----------------------------------------------------------------------------------


def test_create_stores_a_pending_request_with_every_field(approval_store: ApprovalStore) -> None:
    made = request(expires_at=NOW + 600)
    assert approval_store.create(made) == made
    stored = approval_store.get("apr_1")
    assert stored == made
    assert stored is not None and stored.to_dict() == made.to_dict()
    assert approval_store.get("apr_missing") is None


def test_create_returns_the_pending_request_with_the_same_binding(approval_store: ApprovalStore) -> None:
    first = approval_store.create(request(request_id="apr_1"))
    second = approval_store.create(request(request_id="apr_2", at=NOW + 1))
    assert second == first
    assert approval_store.get("apr_2") is None
    assert approval_store.find("r1", "pay@1", first.args_digest) == [first]


def test_other_arguments_or_runs_get_their_own_request(approval_store: ApprovalStore) -> None:
    approval_store.create(request(request_id="apr_1"))
    other_args = approval_store.create(request(request_id="apr_2", amount=11))
    other_run = approval_store.create(request(request_id="apr_3", run_id="r2"))
    assert (other_args.id, other_run.id) == ("apr_2", "apr_3")
    assert len(approval_store.list(status="pending")) == 3


def test_a_decision_is_compare_and_set_on_status(approval_store: ApprovalStore) -> None:
    pending = approval_store.create(request())
    approved = pending.evolve(status="approved", decided_at=NOW + 5, decided_by="ana", decision_reason="ok")
    denied = pending.evolve(status="denied", decided_at=NOW + 6, decided_by="bo")
    assert approval_store.update("apr_1", ["pending"], approved) == approved
    assert approval_store.update("apr_1", ["pending"], denied) is None
    assert approval_store.get("apr_1") == approved
    consumed = approved.evolve(status="consumed")
    assert approval_store.update("apr_1", ["approved"], consumed) == consumed
    assert approval_store.update("apr_1", ["approved"], consumed) is None
    assert approval_store.update("apr_missing", ["pending"], request(request_id="apr_missing")) is None


def test_after_a_decision_the_binding_gets_a_new_request(approval_store: ApprovalStore) -> None:
    first = approval_store.create(request(request_id="apr_1"))
    approval_store.update("apr_1", ["pending"], first.evolve(status="denied", decided_at=NOW + 1))
    second = approval_store.create(request(request_id="apr_2", at=NOW + 2))
    assert second.id == "apr_2" and second.status == "pending"
    found = approval_store.find("r1", "pay@1", first.args_digest)
    assert [(r.id, r.status) for r in found] == [("apr_2", "pending"), ("apr_1", "denied")]
    assert approval_store.find("r1", "pay@1", "other digest") == []


def test_list_filters_by_status_newest_first(approval_store: ApprovalStore) -> None:
    for i in range(3):
        approval_store.create(request(request_id=f"apr_{i}", amount=i, at=NOW + i))
    approval_store.update("apr_0", ["pending"], request(request_id="apr_0", amount=0, status="expired"))
    assert [r.id for r in approval_store.list()] == ["apr_2", "apr_1", "apr_0"]
    assert [r.id for r in approval_store.list(status="pending")] == ["apr_2", "apr_1"]
    assert [r.id for r in approval_store.list(status="expired")] == ["apr_0"]
    assert [r.id for r in approval_store.list(limit=1)] == ["apr_2"]
