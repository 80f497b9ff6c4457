"""An approval request is bound to the definition of the tool it was filed for, in every store: a
decision given for one definition never lets the call of another run, a pending request is held per
definition, and a request stored before the definition was recorded is judged as before."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from actionspace.approval.gate import file_request, find_decision
from actionspace.approval.requests import DEFINITION, ApprovalRequest, ApprovalStore, holder
from actionspace.types import ManualClock
from tests.ledger.factories import NOW, request

ALICE = {"id": "alice", "scopes": ["*"], "tenant": "acme"}
SHOWN = "9fe95da4120477c6"
CHANGED = "a5c86174d92d9d00"


def _filed(store: ApprovalStore, request_id: str, definition: str | None) -> ApprovalRequest:
    events: list[tuple[str, dict[str, Any]]] = []
    held = file_request(
        store,
        request(request_id=request_id),
        lambda kind, data: events.append((kind, dict(data))),
        reason="payments over 5 need a person",
        proposed_by=ALICE,
        definition=definition,
    )
    assert held.category == "needs_approval", held
    assert events[-1][1].get(DEFINITION) == definition
    found = store.get(str(held.details["request_id"]))
    assert found is not None
    return found


def _decide(store: ApprovalStore, definition: str | None) -> Any:
    first = request()
    return find_decision(
        store,
        run_id=first.run_id,
        node_id=first.node_id,
        tool=first.tool,
        digest=first.args_digest,
        clock=ManualClock(NOW + 1.0),
        proposer=ALICE,
        definition=definition,
    )


def _approve(store: ApprovalStore, filed: ApprovalRequest) -> None:
    approved = filed.evolve(status="approved", decided_by="reviewer", decided_at=NOW)
    assert store.update(filed.id, ("pending",), approved) is not None


def test_an_approval_for_one_definition_is_not_consumed_by_another(approval_store: ApprovalStore) -> None:
    filed = _filed(approval_store, "apr_shown", SHOWN)
    assert filed.definition == SHOWN
    _approve(approval_store, filed)

    refused = _decide(approval_store, CHANGED)
    assert refused is None  # nothing decided for the changed tool: the gate files a request of its own
    assert approval_store.get("apr_shown").status == "approved"  # type: ignore[union-attr]

    again = _filed(approval_store, "apr_changed", CHANGED)
    assert again.id == "apr_changed" and again.details["definition_changed_since"] == "apr_shown"
    consumed = _decide(approval_store, SHOWN)
    assert isinstance(consumed, ApprovalRequest) and consumed.id == "apr_shown"


def test_a_pending_request_is_held_per_definition(approval_store: ApprovalStore) -> None:
    shown = _filed(approval_store, "apr_shown", SHOWN)
    changed = _filed(approval_store, "apr_changed", CHANGED)
    assert changed.id == "apr_changed" != shown.id
    assert _filed(approval_store, "apr_again", CHANGED).id == "apr_changed"
    held = _decide(approval_store, CHANGED)
    assert held.category == "needs_approval" and held.details["request_id"] == "apr_changed"
    assert "has changed since request apr_shown" in held.message


def test_a_request_stored_without_a_definition_is_judged_as_before(approval_store: ApprovalStore) -> None:
    before = approval_store.create(request(request_id="apr_before", details={"proposed_by": ALICE}))
    assert before.definition is None
    held = _decide(approval_store, CHANGED)
    assert held.category == "needs_approval" and held.details["request_id"] == "apr_before"
    _approve(approval_store, before)
    consumed = _decide(approval_store, CHANGED)
    assert isinstance(consumed, ApprovalRequest) and consumed.id == "apr_before"


def test_a_definition_in_a_rules_details_is_not_taken_for_the_tools(approval_store: ApprovalStore) -> None:
    planted = request(request_id="apr_planted", details={DEFINITION: SHOWN, "definition_changed_since": "x"})
    held = file_request(
        approval_store, planted, lambda kind, data: None, reason="r", proposed_by=ALICE, definition=None
    )
    stored = approval_store.get(str(held.details["request_id"]))
    assert stored is not None and stored.definition is None
    assert "definition_changed_since" not in stored.details and "changed" not in held.message


@given(
    rule=st.none() | st.text(max_size=8),
    first=st.none() | st.text(max_size=20) | st.integers() | st.lists(st.integers(), max_size=2),
    second=st.none() | st.text(max_size=20),
)
def test_holders_differ_exactly_when_the_recorded_definitions_do(rule: Any, first: Any, second: Any) -> None:
    def held_for(definition: Any) -> str:
        details: dict[str, Any] = {"approval_rule": rule, "proposed_by": ALICE}
        if definition is not None:
            details[DEFINITION] = definition
        return holder(details)

    recorded = first if isinstance(first, str) else None  # a definition that is not text is none
    assert (held_for(first) == held_for(second)) == (recorded == second)
    assert held_for(first).isascii()
    assert holder({"approval_rule": rule, "proposed_by": ALICE}) == held_for(None)
