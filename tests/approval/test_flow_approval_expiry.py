"""A flow decision (declassify, or a flow rule's question) expires by the clock the approvals use."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from actionspace.approval.gate import Approvals
from actionspace.catalog.spec import ToolSpec
from actionspace.errors import ActionError
from actionspace.ledger.memory import MemoryApprovalStore
from actionspace.policy.flow import DEFAULT_FLOW_POLICY, FlowState
from actionspace.policy.flow_stage import flow_stage
from actionspace.policy.labels import Label
from actionspace.policy.principal import Principal
from actionspace.types import ManualClock, Observation, Provenance

SEND = ToolSpec(
    name="send_email",
    effect="external",
    input_schema={"type": "object", "properties": {"recipient": {}, "body": {}}},
)
ARGUMENTS = {"recipient": "bob@example.com", "body": "hunter2"}


def _secret_state() -> FlowState:
    state = FlowState()
    secret = Provenance(labels=Label(confidentiality="secret").tags())
    state.observed(Observation(call_id="c1", tool="read_password", data="hunter2", provenance=secret))
    return state


def _send(state: FlowState, store: MemoryApprovalStore, clock: ManualClock) -> Label | ActionError:
    events: list[tuple[str, Mapping[str, Any]]] = []
    return flow_stage(
        policy=DEFAULT_FLOW_POLICY,
        state=state,
        spec=SEND,
        arguments=ARGUMENTS,
        provenance={},
        principal=Principal(id="alice"),
        run_id="r1",
        node_id="n2",
        call_id="r1:n2",
        approvals=store,
        record=lambda kind, data: events.append((kind, data)),
        clock=clock,
    )


def _declassified(ttl_s: float, waited_s: float) -> Label | ActionError:
    clock = ManualClock(start=1_000_000.0)
    store = MemoryApprovalStore()
    approvals = Approvals(store, lambda *_: None, clock=clock)
    state = _secret_state()
    blocked = _send(state, store, clock)
    assert isinstance(blocked, ActionError) and blocked.category == "policy_violation"
    approvals.approve(blocked.details["declassify_request"], by="alice", ttl_s=ttl_s)
    clock.advance(waited_s)
    return _send(state, store, clock)


def test_a_declassification_is_honoured_before_it_expires_by_the_runtimes_clock() -> None:
    assert _declassified(ttl_s=60, waited_s=59) == Label(confidentiality="secret")


def test_a_declassification_past_its_expiry_by_the_runtimes_clock_is_not_honoured() -> None:
    late = _declassified(ttl_s=60, waited_s=3600)
    assert isinstance(late, ActionError) and late.category == "policy_violation", late


def test_a_runtime_on_its_own_clock_lets_an_expired_declassification_send_nothing() -> None:
    from actionspace import Labels, Runtime, ToolCall

    clock = ManualClock(start=time.time())  # beside the system clock: only the runtime's says "expired"
    rt = Runtime("memory://", clock=clock)
    sent: list[str] = []

    @rt.tool(effect="read", labels=Labels(confidentiality="secret"))
    def read_password() -> str:
        """The stored password."""
        return "hunter2"

    @rt.tool(effect="external")
    def send_email(recipient: str, body: str) -> str:
        """Send an email."""
        sent.append(body)
        return "sent"

    run = rt.new_run()
    assert rt.call(ToolCall(name="read_password", arguments={}), run_id=run).ok
    send = ToolCall(name="send_email", arguments=ARGUMENTS)
    blocked = rt.call(send, run_id=run)
    assert blocked.error is not None and blocked.error.category == "policy_violation"
    rt.approvals.approve(blocked.error.details["declassify_request"], by="alice", ttl_s=60)
    clock.advance(3600)
    late = rt.call(send, run_id=run)
    assert late.error is not None and sent == []
