"""Two principals proposing one held call in one run: each is told of its own request, never of the
other's proposer, and the approval of its own request lets its call run without filing again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from actionspace import Principal, Runtime
from actionspace.policy.flow import Ask, Decision, FlowPolicy, FlowRequest

ALICE = Principal(id="alice", scopes=("*",), tenant="acme")
MALLORY = Principal(id="mallory", scopes=("*",), tenant="umbrella")
CALL = {"name": "pay", "arguments": {"to": "bob", "cents": 500}}


class AskForPayments(FlowPolicy):
    def check(self, request: FlowRequest) -> Decision:
        return Ask("payments are audited")


def _runtime(url: str, *, flow: bool) -> tuple[Runtime, list[str]]:
    options: dict[str, Any] = {"flow_policy": AskForPayments()} if flow else {}
    rt = Runtime(url, **options)
    paid: list[str] = []

    @rt.tool(effect="external", idempotency="native", requires_approval=not flow)
    def pay(to: str, cents: int, idempotency_key: str) -> str:
        """Pay someone (the bank dedupes by key)."""
        paid.append(to)
        return "paid"

    return rt, paid


def _held(obs: Any) -> dict[str, Any]:
    assert obs.error is not None and obs.error.category == "needs_approval", obs
    return dict(obs.error.details)


@pytest.mark.parametrize("flow", [False, True], ids=["gate", "flow_rule"])
@pytest.mark.parametrize("store", ["memory", "sqlite"])
def test_a_second_proposer_is_held_on_its_own_request(tmp_path: Path, store: str, flow: bool) -> None:
    url = "memory://" if store == "memory" else f"sqlite:///{tmp_path / 'a.db'}"
    rt, paid = _runtime(url, flow=flow)
    try:
        alice = _held(rt.call(CALL, run_id="r1", node_id="n", principal=ALICE))
        mallory = _held(rt.call(CALL, run_id="r1", node_id="n", principal=MALLORY))
        assert mallory["request_id"] != alice["request_id"]
        assert "alice" not in repr(mallory) and "acme" not in repr(mallory)
        assert mallory["proposed_by"] == {"id": "mallory", "tenant": "umbrella"}

        rt.approvals.approve(str(mallory["request_id"]), by="reviewer")
        assert rt.call(CALL, run_id="r1", node_id="n", principal=MALLORY).ok
        assert paid == ["bob"]
        assert len(rt.approvals.list(status=None)) == 2  # nothing filed again
        still = _held(rt.call(CALL, run_id="r1", node_id="n", principal=ALICE))
        assert still["request_id"] == alice["request_id"]
    finally:
        rt.close()
