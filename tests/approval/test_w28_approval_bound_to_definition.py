"""An approval is given for a tool as the approver was shown it: when the tool's definition changes
under the same version label (another process registers it with another description, or an MCP
server's tool changed while the gateway was down), the approval of a request filed for the old
definition never lets the call run under the new one; the call is held again, on a request of its
own bound to the new definition."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from actionspace import Observation, Principal, Runtime
from actionspace.policy.flow import Ask, Decision, FlowPolicy, FlowRequest

ALICE = Principal(id="alice", scopes=("*",), tenant="acme")
CALL = {"name": "transfer", "arguments": {"to": "bob", "cents": 500}}
OLD = "Transfer money to an account."
NEW = "Transfer money to an account. B: now also emails the CFO."


class AskForTransfers(FlowPolicy):
    def check(self, request: FlowRequest) -> Decision:
        return Ask("transfers are audited")


def _runtime(url: str, description: str, *, flow: bool = False) -> tuple[Runtime, list[str]]:
    options: dict[str, Any] = {"flow_policy": AskForTransfers()} if flow else {}
    rt = Runtime(url, **options)
    sent: list[str] = []

    def transfer(to: str, cents: int, idempotency_key: str) -> str:
        sent.append(to)
        return "sent"

    transfer.__doc__ = description
    rt.tool(effect="external", idempotency="native", requires_approval=not flow)(transfer)
    return rt, sent


def _held(obs: Observation) -> dict[str, Any]:
    assert obs.error is not None and obs.error.category == "needs_approval", obs
    return dict(obs.error.details)


def _until_held(propose: Callable[[], Observation]) -> Observation:
    """Propose again while the run answers ``version_mismatch`` (the model re-reads the definition
    and proposes the same call); the first other answer."""
    for _ in range(3):
        obs = propose()
        if obs.error is None or obs.error.category != "version_mismatch":
            return obs
    raise AssertionError("the call is never judged")


@pytest.mark.parametrize("flow", [False, True], ids=["gate", "flow_rule"])
@pytest.mark.parametrize("node_id", [None, "n"], ids=["identity_node", "given_node"])
def test_an_approval_given_for_the_old_definition_does_not_run_the_new_one(
    tmp_path: Path, flow: bool, node_id: str | None
) -> None:
    url = f"sqlite:///{tmp_path / 'a.db'}"
    first, sent_first = _runtime(url, OLD, flow=flow)
    try:
        old_request = str(
            _held(first.call(CALL, run_id="r1", node_id=node_id, principal=ALICE))["request_id"]
        )
    finally:
        first.close()

    second, sent = _runtime(url, NEW, flow=flow)
    try:
        second.approvals.approve(old_request, by="reviewer")
        obs = _until_held(lambda: second.call(CALL, run_id="r1", node_id=node_id, principal=ALICE))
        assert sent == [] and sent_first == [], "sent under an approval given for another definition"
        held = _held(obs)
        assert held["request_id"] != old_request and held["definition_changed_since"] == old_request
        assert obs.error is not None and f"has changed since request {old_request}" in obs.error.message
        old = second.approvals.get(old_request)
        assert old is not None and old.status == "approved"  # never consumed by the changed tool
        assert held["definition_hash"] != old.details["definition_hash"]

        second.approvals.approve(str(held["request_id"]), by="reviewer")
        assert second.call(CALL, run_id="r1", node_id=node_id, principal=ALICE).ok
        assert sent == ["bob"]
    finally:
        second.close()


def test_the_old_definitions_pending_request_is_not_the_new_ones(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'a.db'}"
    first, _ = _runtime(url, OLD)
    try:
        old_request = str(_held(first.call(CALL, run_id="r1", node_id="n", principal=ALICE))["request_id"])
    finally:
        first.close()
    second, sent = _runtime(url, NEW)
    try:
        obs = _until_held(lambda: second.call(CALL, run_id="r1", node_id="n", principal=ALICE))
        new_request = str(_held(obs)["request_id"])
        assert new_request != old_request
        second.approvals.approve(old_request, by="reviewer")
        held = _held(second.call(CALL, run_id="r1", node_id="n", principal=ALICE))
        assert held["request_id"] == new_request and sent == []
    finally:
        second.close()


def test_an_approval_given_for_the_same_definition_in_another_process_runs_the_call(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'a.db'}"
    first, _ = _runtime(url, OLD)
    try:
        request_id = str(_held(first.call(CALL, run_id="r1", node_id="n", principal=ALICE))["request_id"])
    finally:
        first.close()
    second, sent = _runtime(url, OLD)
    try:
        second.approvals.approve(request_id, by="reviewer")
        assert second.call(CALL, run_id="r1", node_id="n", principal=ALICE).ok
        assert sent == ["bob"]
    finally:
        second.close()
