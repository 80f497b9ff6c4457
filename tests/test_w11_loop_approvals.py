"""A call that ran on its approval is replayed when the model proposes it again in its turn, even
while an identical call of another node waits for its own approval.

Two identical payments in one message are two actions (occurrences of one message); each needs
its approval. Once the first ran, proposing it again (a new call id, as after a timeout) must
answer what it did, ``diagnostics["replayed"]``: never ``needs_approval`` naming the second's
request (the model would report a payment that went through as waiting), and never consuming the
approval a person gave for the second payment.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from actionspace import Runtime

PAY = {"to": "bob", "amount": 5}


def _message(*ids: str) -> dict[str, Any]:
    calls = [
        {"id": i, "type": "function", "function": {"name": "pay", "arguments": json.dumps(PAY)}} for i in ids
    ]
    return {"role": "assistant", "content": None, "tool_calls": calls}


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return "memory://" if request.param == "memory" else f"sqlite:///{tmp_path}/runs.db"


def test_a_call_that_ran_is_replayed_while_an_identical_one_waits_for_its_approval(store: str) -> None:
    rt = Runtime(store, recover_on_start=False)
    paid: list[str] = []

    @rt.tool(effect="external", requires_approval=True)
    def pay(to: str, amount: int) -> str:
        """Pay someone."""
        paid.append(to)
        return f"paid {to}"

    s = rt.session(run_id="conv", provider="openai_chat")
    s.user("pay bob 5")
    held = s.handle(_message("a")).observations[0]
    assert held.error is not None and held.error.category == "needs_approval"
    rt.approvals.approve(held.error.details["request_id"], by="ops")
    assert s.handle(_message("b")).observations[0].data == "paid bob"

    first, second = s.handle(_message("c", "d")).observations  # the model means two payments
    assert first.diagnostics.get("replayed") is True and first.data == "paid bob"
    assert second.error is not None and second.error.category == "needs_approval"
    waiting = second.error.details["request_id"]

    again = s.handle(_message("e")).observations[0]  # the first, proposed again
    assert again.error is None, again.error
    assert again.diagnostics.get("replayed") is True and again.data == "paid bob"
    assert paid == ["bob"]

    rt.approvals.approve(waiting, by="ops")  # the person approves the second payment
    again = s.handle(_message("f")).observations[0]
    assert again.diagnostics.get("replayed") is True and paid == ["bob"]
    request = rt.approvals.get(waiting)
    assert request is not None and request.status == "approved"  # still the second payment's
    both = s.handle(_message("g", "h")).observations
    assert [o.data for o in both] == ["paid bob", "paid bob"] and paid == ["bob", "bob"]
    assert both[0].diagnostics.get("replayed") is True and not both[1].diagnostics.get("replayed")
    rt.close()
