"""The commit protocol's ``admit_send``: a call let through uncharged as a replay is admitted,
once, before the first write that would make it send; refused, it ends with nothing written or
sent. A settled entry is replayed without asking it."""

from __future__ import annotations

from typing import Any

import pytest

from actionspace.catalog.spec import ToolSpec
from actionspace.errors import ActionError
from actionspace.ledger import commit
from actionspace.ledger.commit import Dispatch, protocol
from actionspace.ledger.entries import LedgerEntry
from actionspace.ledger.memory import MemoryLedgerStore
from actionspace.outcomes import Outcome, Succeeded
from actionspace.types import Observation
from tests.ledger.factories import entry as make_entry

SCHEMA: dict[str, Any] = {"type": "object", "properties": {"amount": {"type": "integer"}}}
REFUSED = ActionError.of("budget_exceeded", "no calls left", details={"unit": "calls", "remaining": {}})
SENDABLE: dict[str, dict[str, Any] | None] = {
    "failed_retryable": {"state": "failed", "error": ActionError.of("transient", "reset").to_dict()},
    "accepted": {"state": "accepted"},
    "abandoned_unknown": {"state": "unknown", "error": ActionError.of("unknown_commit", "cut").to_dict()},
    "purged": None,
}
SETTLED: dict[str, dict[str, Any]] = {
    "committed": {"state": "committed", "observation": Observation(call_id="c", tool="pay").to_dict()},
    "failed_for_good": {"state": "failed", "error": ActionError.of("unclassified", "no").to_dict()},
    "unknown_commit": {"state": "unknown_commit", "error": ActionError.of("unknown_commit", "?").to_dict()},
}


def _pay(amount: int, idempotency_key: str) -> None:
    raise AssertionError("the protocol only tells its caller to send")


def _spec() -> ToolSpec:
    return ToolSpec(name="pay", input_schema=SCHEMA, fn=_pay, effect="write", idempotency="native")


def _store(name: str, fields: dict[str, Any] | None) -> tuple[MemoryLedgerStore, LedgerEntry]:
    store = MemoryLedgerStore()
    fresh = make_entry()
    if fields is not None:
        store.begin(fresh.evolve(state="dispatched", attempts=1))
        current = store.get(fresh.key)
        assert current is not None
        assert store.transition(fresh.key, ("dispatched",), current.evolve(**fields)) is not None
        if name == "abandoned_unknown":
            commit._note_abandoned(store, fresh.key)
    return store, fresh


def _run(
    store: MemoryLedgerStore, fresh: LedgerEntry, answer: ActionError | None
) -> tuple[Observation, int, list[int]]:
    """(the observation, sends, how many times admit_send was asked)."""
    asked: list[int] = []

    def admit_send() -> ActionError | None:
        asked.append(1)
        return answer

    def fail(error: ActionError) -> Observation:
        return Observation.failure(error, call_id="c", tool="pay")

    steps = protocol(
        spec=_spec(),
        entry=fresh,
        store=store,
        observe=lambda out: Observation(call_id="c", tool="pay", data="paid"),
        fail=fail,
        record=lambda kind, data: None,
        admit_send=admit_send,
    )
    sends = 0
    reply: Outcome | None = None
    try:
        while True:
            command = steps.send(reply)
            assert isinstance(command, Dispatch), command
            sends += 1
            reply = Succeeded("paid", 1)
    except StopIteration as stop:
        return stop.value, sends, asked


@pytest.mark.parametrize("name", list(SENDABLE))
def test_a_refused_send_of_a_sendable_entry_writes_and_sends_nothing(name: str) -> None:
    store, fresh = _store(name, SENDABLE[name])
    before = store.get(fresh.key)

    obs, sends, asked = _run(store, fresh, REFUSED)

    assert obs.error is not None and obs.error.category == "budget_exceeded"
    assert (sends, asked) == (0, [1])
    assert store.get(fresh.key) == before  # nothing written (a purged entry stays absent)
    if name == "abandoned_unknown":  # still for the next proposal to settle at once
        assert commit._was_abandoned(store, fresh.key)


@pytest.mark.parametrize("name", list(SENDABLE))
def test_an_admitted_send_of_a_sendable_entry_is_sent_once_and_asked_once(name: str) -> None:
    store, fresh = _store(name, SENDABLE[name])

    obs, sends, asked = _run(store, fresh, None)

    assert obs.ok and obs.data == "paid", obs.error
    assert (sends, asked) == (1, [1])
    settled = store.get(fresh.key)
    assert settled is not None and settled.state == "committed"


@pytest.mark.parametrize("name", list(SETTLED))
def test_a_settled_entry_is_replayed_without_asking_to_admit_it(name: str) -> None:
    store, fresh = _store(name, SETTLED[name])
    before = store.get(fresh.key)

    obs, sends, asked = _run(store, fresh, REFUSED)

    assert (sends, asked) == (0, [])
    assert obs.error is None or obs.error.category != "budget_exceeded"
    assert store.get(fresh.key) == before


def test_an_entry_purged_between_the_read_and_the_insert_is_left_accepted_when_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store, fresh = _store("committed", SETTLED["committed"])
    read = store.get

    def read_then_purge(key: str) -> LedgerEntry | None:
        found = read(key)
        store.purge(older_than=float("inf"))
        monkeypatch.setattr(store, "get", read)
        return found

    monkeypatch.setattr(store, "get", read_then_purge)

    obs, sends, asked = _run(store, fresh, REFUSED)

    assert obs.error is not None and obs.error.category == "budget_exceeded"
    assert (sends, asked) == (0, [1])
    left = store.get(fresh.key)
    assert left is not None and left.state == "accepted"  # never sent: a later proposal sends it
