"""A repeat of an approved node after its approval expired: the ledger answers a committed send,
anything that may still be sent (a failed attempt, a send a later gate stopped) asks again."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace import Runtime
from actionspace.approval.gate import find_decision
from actionspace.approval.requests import ApprovalRequest
from actionspace.ledger.memory import MemoryApprovalStore
from actionspace.policy.flow import ALLOW, Ask, Decision, FlowPolicy, FlowRequest
from actionspace.types import ManualClock, Observation

CALL = {"name": "pay", "arguments": {"to": "bob", "cents": 500}}
TTL_S = 60.0


class Tool:
    """A payment tool whose sends can be made to fail before anything leaves (refused)."""

    def __init__(self) -> None:
        self.attempts: list[str] = []
        self.refusing = False

    def pay(self, to: str, cents: int) -> str:
        self.attempts.append(to)
        if self.refusing:
            raise ConnectionRefusedError("the bank refused the connection")
        return f"paid {cents} to {to}"


class AskBeforePaying(FlowPolicy):
    """A flow rule that holds every payment for a decision of its own (a gate after the tool's)."""

    def check(self, request: FlowRequest) -> Decision:
        return Ask("payments are audited") if request.spec.name == "pay" else ALLOW


@pytest.fixture(params=["memory", "sqlite"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return "memory://" if request.param == "memory" else f"sqlite:///{tmp_path / 'store.db'}"


def _runtime(url: str, **options: Any) -> tuple[Runtime, ManualClock, Tool]:
    clock = ManualClock(start=time.time())  # only the runtime's clock says "expired"
    rt = Runtime(url, clock=clock, **options)
    tool = Tool()

    @rt.tool(effect="external", requires_approval=True)
    def pay(to: str, cents: int) -> str:
        """Pay someone."""
        return tool.pay(to, cents)

    return rt, clock, tool


@pytest.fixture
def opened() -> Iterator[list[Runtime]]:
    runtimes: list[Runtime] = []
    yield runtimes
    for rt in runtimes:
        rt.close()


def _held(obs: Observation, rule: str | None = None) -> str:
    assert obs.error is not None and obs.error.category == "needs_approval", obs
    assert obs.error.details.get("approval_rule") == rule, obs.error.details
    request_id = obs.error.details["request_id"]
    assert isinstance(request_id, str)
    return request_id


def test_a_failed_send_repeated_after_its_approval_expired_asks_again(
    url: str, opened: list[Runtime]
) -> None:
    rt, clock, tool = _runtime(url)
    opened.append(rt)
    first = _held(rt.call(CALL, run_id="r1", node_id="pay-bob"))
    rt.approvals.approve(first, by="alice", ttl_s=TTL_S)
    tool.refusing = True
    failed = rt.call(CALL, run_id="r1", node_id="pay-bob")
    assert failed.error is not None and failed.error.category == "transient", failed
    tried = len(tool.attempts)
    assert tried >= 1
    tool.refusing = False
    clock.advance(TTL_S)  # the approval has expired; the failed send may not go out under it
    late = rt.call(CALL, run_id="r1", node_id="pay-bob")
    second = _held(late)
    assert second != first and len(tool.attempts) == tried
    pending = rt.approvals.get(second)
    assert pending is not None and pending.status == "pending"
    rt.approvals.approve(second, by="alice", ttl_s=TTL_S)
    done = rt.call(CALL, run_id="r1", node_id="pay-bob")
    assert done.ok and not done.diagnostics.get("replayed"), done
    assert len(tool.attempts) == tried + 1


def test_a_failed_send_repeated_before_its_approval_expired_is_sent_again(
    url: str, opened: list[Runtime]
) -> None:
    rt, clock, tool = _runtime(url)
    opened.append(rt)
    rt.approvals.approve(_held(rt.call(CALL, run_id="r1", node_id="pay-bob")), by="alice", ttl_s=TTL_S)
    tool.refusing = True
    assert rt.call(CALL, run_id="r1", node_id="pay-bob").error is not None
    tried = len(tool.attempts)
    tool.refusing = False
    clock.advance(TTL_S - 1)
    done = rt.call(CALL, run_id="r1", node_id="pay-bob")
    assert done.ok, done
    assert len(tool.attempts) == tried + 1


def test_a_committed_send_repeated_after_its_approval_expired_is_replayed_by_the_ledger(
    url: str, opened: list[Runtime]
) -> None:
    rt, clock, tool = _runtime(url)
    opened.append(rt)
    rt.approvals.approve(_held(rt.call(CALL, run_id="r1", node_id="pay-bob")), by="alice", ttl_s=TTL_S)
    done = rt.call(CALL, run_id="r1", node_id="pay-bob")
    assert done.ok, done
    clock.advance(10 * TTL_S)
    again = rt.call(CALL, run_id="r1", node_id="pay-bob")
    assert again.ok and again.diagnostics.get("replayed"), again
    assert again.data == done.data and tool.attempts == ["bob"]
    assert {r.status for r in rt.approvals.list(status=None)} == {"consumed"}


def test_a_send_a_later_gate_stopped_repeated_after_its_approval_expired_asks_again(
    url: str, opened: list[Runtime]
) -> None:
    rt, clock, tool = _runtime(url, flow_policy=AskBeforePaying())
    opened.append(rt)
    tool_request = _held(rt.call(CALL, run_id="r1", node_id="pay-bob"))
    rt.approvals.approve(tool_request, by="alice", ttl_s=TTL_S)
    flow_request = _held(rt.call(CALL, run_id="r1", node_id="pay-bob"), rule="flow")
    rt.approvals.approve(flow_request, by="alice", ttl_s=100 * TTL_S)  # still valid below
    clock.advance(TTL_S)  # the tool's approval, spent on a call never sent, has expired
    late = rt.call(CALL, run_id="r1", node_id="pay-bob")
    assert _held(late) not in (tool_request, flow_request)
    assert tool.attempts == []


def _consumed(store: MemoryApprovalStore, expires_at: float | None) -> ApprovalRequest:
    request = ApprovalRequest(
        id="apr_consumed",
        run_id="r1",
        node_id="pay-bob",
        tool="pay@1",
        args_digest="d",
        arguments={},
        provenance={},
        status="consumed",
        decided_by="alice",
        expires_at=expires_at,
    )
    store.create(request.evolve(status="pending"))
    stored = store.update(request.id, ("pending",), request)
    assert stored is not None
    return stored


@settings(max_examples=200, deadline=None)
@given(
    ttl=st.one_of(st.none(), st.floats(min_value=0.001, max_value=1e6)),
    waited=st.floats(min_value=0, max_value=2e6),
    answer=st.sampled_from(["replays", "sends", "unreadable", "not given"]),
)
def test_a_consumed_approval_stands_for_its_node_while_valid_or_while_the_ledger_replays(
    ttl: float | None, waited: float, answer: str
) -> None:
    start = 1_000_000.0
    store = MemoryApprovalStore()
    _consumed(store, None if ttl is None else start + ttl)
    clock = ManualClock(start=start + waited)

    def answered() -> bool:
        if answer == "unreadable":
            raise OSError("the ledger store is gone")
        return answer == "replays"

    found = find_decision(
        store,
        run_id="r1",
        node_id="pay-bob",
        tool="pay@1",
        digest="d",
        clock=clock,
        answered=None if answer == "not given" else answered,
    )
    valid = ttl is None or start + waited < start + ttl
    stands = valid or answer == "replays"
    assert (isinstance(found, ApprovalRequest) and found.id == "apr_consumed") is stands, found
    if not stands:
        assert found is None  # nothing else filed: the gate files a new request (needs_approval)
