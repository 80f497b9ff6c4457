"""An approval lets its call run once: a repeat of the same node runs again only as a ledger replay."""

from __future__ import annotations

from typing import Any

from actionspace import Plan, Runtime
from actionspace.policy.flow import ALLOW, Ask, Decision, FlowPolicy, FlowRequest


class AskBeforeReadingRecords(FlowPolicy):
    """Every read of a record needs a person (a custom rule, besides the tool's own approval)."""

    def check(self, request: FlowRequest) -> Decision:
        if request.spec.name == "read_record":
            return Ask("reading a record is audited")
        return ALLOW


def _runtime(**options: Any) -> tuple[Runtime, list[str], list[str]]:
    rt = Runtime("memory://", **options)
    reads: list[str] = []
    paid: list[str] = []

    @rt.tool(effect="read", requires_approval=True)
    def read_record(patient: str) -> str:
        """A patient's medical record."""
        reads.append(patient)
        return f"record of {patient}"

    @rt.tool(effect="external", idempotency="native", requires_approval=True)
    def pay(to: str, cents: int, idempotency_key: str) -> str:
        """Pay someone (the bank dedupes by key)."""
        paid.append(to)
        return "paid"

    return rt, reads, paid


def _approve(rt: Runtime, obs: Any) -> None:
    assert obs.error is not None and obs.error.category == "needs_approval", obs
    rt.approvals.approve(obs.error.details["request_id"], by="alice")


def test_a_read_approved_once_under_a_node_id_runs_once() -> None:
    rt, reads, _paid = _runtime()
    call = {"name": "read_record", "arguments": {"patient": "ann"}}
    _approve(rt, rt.call(call, run_id="r1", node_id="look"))
    assert rt.call(call, run_id="r1", node_id="look").ok
    again = rt.call(call, run_id="r1", node_id="look")
    assert again.error is not None and again.error.category == "needs_approval", again
    assert reads == ["ann"]


def test_a_plan_repeating_an_approved_read_node_asks_again() -> None:
    rt, reads, _paid = _runtime()
    plan = Plan.from_dict({"nodes": [{"id": "r", "tool": "read_record", "arguments": {"patient": "ann"}}]})
    _approve(rt, rt.run_plan(plan, run_id="r1").nodes["r"])
    assert rt.run_plan(plan, run_id="r1").nodes["r"].ok
    later = rt.run_plan(plan, run_id="r1").nodes["r"]  # the model proposes the same plan again
    assert later.error is not None and later.error.category == "needs_approval", later
    assert reads == ["ann"]


def test_a_read_held_by_its_tool_and_by_a_flow_rule_runs_once_each_decision_used_once() -> None:
    rt, reads, _paid = _runtime(flow_policy=AskBeforeReadingRecords())
    call = {"name": "read_record", "arguments": {"patient": "ann"}}
    tool_asks = rt.call(call, run_id="r1", node_id="look")
    _approve(rt, tool_asks)
    flow_asks = rt.call(call, run_id="r1", node_id="look")  # the tool's approval is spent; the rule asks
    assert flow_asks.error is not None and flow_asks.error.details.get("approval_rule") == "flow", flow_asks
    _approve(rt, flow_asks)
    # the flow rule's decision does not stand in for the tool's, which was spent on the held attempt
    tool_again = rt.call(call, run_id="r1", node_id="look")
    assert tool_again.error is not None and "approval_rule" not in tool_again.error.details, tool_again
    assert reads == []
    _approve(rt, tool_again)
    done = rt.call(call, run_id="r1", node_id="look")
    assert done.ok, done.error
    assert reads == ["ann"]
    assert {r.status for r in rt.approvals.list(status=None)} == {"consumed"}
    after = rt.call(call, run_id="r1", node_id="look")
    assert after.error is not None and after.error.category == "needs_approval", after
    assert reads == ["ann"]


def test_a_repeated_approved_write_is_replayed_by_the_ledger_not_sent_again() -> None:
    rt, _reads, paid = _runtime()
    call = {"name": "pay", "arguments": {"to": "bob", "cents": 500}}
    _approve(rt, rt.call(call, run_id="r1", node_id="pay-bob"))
    done = rt.call(call, run_id="r1", node_id="pay-bob")
    again = rt.call(call, run_id="r1", node_id="pay-bob")
    assert done.ok and again.ok and again.diagnostics["replayed"], again
    assert paid == ["bob"]
