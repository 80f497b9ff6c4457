"""An approval is given to one principal's call: another principal proposing the same call in the
same run does not run under it (nor is handed the result of the action it let through)."""

from __future__ import annotations

from typing import Any

from actionspace import Principal, Runtime
from actionspace.policy.flow import Ask, Decision, FlowPolicy, FlowRequest

ALICE = Principal(id="alice", scopes=("*",), tenant="acme")
MALLORY = Principal(id="mallory", scopes=("*",), tenant="acme")
ALICE_ELSEWHERE = Principal(id="alice", scopes=("*",), tenant="globex")


def _runtime(**options: Any) -> tuple[Runtime, list[str]]:
    rt = Runtime("memory://", **options)
    paid: list[str] = []

    @rt.tool(effect="external", idempotency="native", requires_approval=True)
    def pay(to: str, cents: int, idempotency_key: str) -> str:
        """Pay someone (the bank dedupes by key)."""
        paid.append(to)
        return "paid"

    return rt, paid


CALL = {"name": "pay", "arguments": {"to": "bob", "cents": 500}}


def _approve(rt: Runtime, obs: Any) -> str:
    assert obs.error is not None and obs.error.category == "needs_approval", obs
    request_id = str(obs.error.details["request_id"])
    rt.approvals.approve(request_id, by="reviewer")
    return request_id


def test_an_approval_for_one_principal_does_not_let_another_run_the_call() -> None:
    rt, paid = _runtime()
    _approve(rt, rt.call(CALL, run_id="r1", node_id="n", principal=ALICE))
    other = rt.call(CALL, run_id="r1", node_id="n", principal=MALLORY)
    assert other.error is not None and other.error.category == "needs_approval", other
    assert paid == []
    assert rt.call(CALL, run_id="r1", node_id="n", principal=ALICE).ok
    assert paid == ["bob"]


def test_a_consumed_approval_is_not_replayed_to_another_principal() -> None:
    rt, paid = _runtime()
    _approve(rt, rt.call(CALL, run_id="r1", node_id="n", principal=ALICE))
    assert rt.call(CALL, run_id="r1", node_id="n", principal=ALICE).ok
    other = rt.call(CALL, run_id="r1", node_id="n", principal=MALLORY)
    assert other.error is not None and other.error.category == "needs_approval", other
    assert other.data is None
    assert paid == ["bob"]


def test_an_approval_does_not_cross_tenants_for_the_same_principal_id() -> None:
    rt, paid = _runtime()
    _approve(rt, rt.call(CALL, run_id="r1", node_id="n", principal=ALICE))
    other = rt.call(CALL, run_id="r1", node_id="n", principal=ALICE_ELSEWHERE)
    assert other.error is not None and other.error.category == "needs_approval", other
    assert paid == []


class AskForPayments(FlowPolicy):
    def check(self, request: FlowRequest) -> Decision:
        return Ask("payments are audited")


def test_a_flow_approval_for_one_principal_does_not_let_another_run_the_call() -> None:
    rt = Runtime("memory://", flow_policy=AskForPayments())
    paid: list[str] = []

    @rt.tool(effect="external", idempotency="native")
    def pay(to: str, cents: int, idempotency_key: str) -> str:
        """Pay someone (the bank dedupes by key)."""
        paid.append(to)
        return "paid"

    _approve(rt, rt.call(CALL, run_id="r1", node_id="n", principal=ALICE))
    other = rt.call(CALL, run_id="r1", node_id="n", principal=MALLORY)
    assert other.error is not None and other.error.category == "needs_approval", other
    assert paid == []
    assert rt.call(CALL, run_id="r1", node_id="n", principal=ALICE).ok
    assert paid == ["bob"]
