"""Pydantic AI: a person's edit (``ToolApproved(override_args=...)``) that is never held on a
request of its own still ends the request the person was shown for the model's call.

The edit is the person's answer to that request. When the edited call runs on a request of its
own, the request shown is ``consumed`` by it, the edit under ``details["edited"]``. An edit that is
never held ends it the same way, saying what became of the edit: one the runtime refuses
(``invalid_arguments``, a flow rule) ran nothing, and the request records the refusal
(``details["edited"]["refused"]``, its ``request_id`` None); one that needs no approval of its own
ran, without a request (``request_id`` None). Either way the request is not left pending (listed
forever) nor left approved by a ``decide`` the edit came with (the model's own arguments would
then run on an answer given only for other ones); the model's own call proposed again is asked
about anew. Before, such a request stayed pending, or approved."""

from __future__ import annotations

import json
from typing import Any

import pytest

pytest.importorskip("pydantic_ai")

from pydantic_ai import DeferredToolRequests, DeferredToolResults, ToolApproved
from pydantic_ai.messages import ModelResponse, ToolCallPart, ToolReturnPart

from actionspace import Runtime
from actionspace.adapters.pydantic_ai import GovernedToolset
from actionspace.policy.flow_policies import ALLOW, Ask, Decision, FlowPolicy, FlowRequest
from tests.adapters.test_w17_pydantic_ai_denials import CHARGE, deferred, shop

BAD = {"card": "4242", "cents": "three hundred"}


def _answers(result: Any) -> dict[str, Any]:
    return {
        p.tool_call_id: json.loads(str(p.content))
        for m in result.new_messages()
        for p in m.parts
        if isinstance(p, ToolReturnPart)
    }


def _again(agent: Any, done: Any) -> Any:
    """The model proposes its own call again, in a later response of the same run."""
    return agent.run_sync(
        message_history=[
            *done.all_messages(),
            ModelResponse(parts=[ToolCallPart("charge", dict(CHARGE), "c2")]),
        ]
    )


@pytest.mark.parametrize("with_decide", [False, True])
def test_a_refused_edit_consumes_the_original_request_saying_it_was_refused(with_decide: bool) -> None:
    rt, charged = shop()
    governed = GovernedToolset(rt, run_id="order-7")
    agent, result = deferred(governed, "c1")
    original = result.output.metadata["c1"]["request_id"]
    if with_decide:
        answers = governed.decide(result.output, {"c1": True}, by="alice", reason="a smaller amount")
    else:
        answers = DeferredToolResults()
    answers.approvals["c1"] = ToolApproved(override_args=dict(BAD))
    done = agent.run_sync(message_history=result.all_messages(), deferred_tool_results=answers)
    assert _answers(done)["c1"]["error"]["category"] == "invalid_arguments" and charged == []
    assert rt.approvals.list() == []  # nothing left pending
    shown = rt.approvals.get(original)
    assert shown is not None and shown.status == "consumed"
    assert shown.decided_by == ("alice" if with_decide else "pydantic-ai")
    edited = shown.details["edited"]
    assert edited["request_id"] is None and edited["arguments"] == BAD
    assert edited["refused"]["category"] == "invalid_arguments"
    assert shown.expires_at is not None and not shown.honoured()
    decided = [e.data for e in rt.trace.events("order-7") if e.kind == "approval_decided"]
    assert {"request_id": original, "status": "consumed", "refused": "invalid_arguments"}.items() <= decided[
        -1
    ].items()
    # the model's 500 was not what the person approved: asked about anew, never run on that answer
    again = _again(agent, done)
    assert isinstance(again.output, DeferredToolRequests) and charged == []
    [pending] = rt.approvals.list()
    assert pending.id != original and pending.arguments == CHARGE


class BigCharges(FlowPolicy):
    """A person approves a charge above 400 cents; a smaller one needs no approval."""

    def check(self, request: FlowRequest) -> Decision:
        if request.spec.name == "charge" and int(request.arguments.get("cents", 0)) > 400:
            return Ask("a charge above 4 dollars", details={"rule": "big_charge"})
        return ALLOW


def _ruled_shop() -> tuple[Runtime, list[tuple[Any, ...]]]:
    """A charge held for approval only above 400 cents (a flow rule), so an edit below runs unheld."""
    rt = Runtime("memory://", recover_on_start=False, flow_policy=BigCharges())
    charged: list[tuple[Any, ...]] = []

    @rt.tool(effect="write", writes=["card:{card}"])
    def charge(card: str, cents: int) -> dict[str, int]:
        """Charge a card, in cents."""
        charged.append((card, cents))
        return {"charged": cents}

    return rt, charged


def test_an_edit_that_needs_no_approval_of_its_own_runs_once_and_consumes_the_original() -> None:
    rt, charged = _ruled_shop()
    governed = GovernedToolset(rt, run_id="order-8")
    agent, result = deferred(governed, "c1")
    original = result.output.metadata["c1"]["request_id"]
    edit = {"card": "4242", "cents": 300}
    answers = DeferredToolResults(approvals={"c1": ToolApproved(override_args=dict(edit))})
    done = agent.run_sync(message_history=result.all_messages(), deferred_tool_results=answers)
    assert _answers(done)["c1"]["status"] == "ok" and charged == [("4242", 300)]
    assert rt.approvals.list() == []
    shown = rt.approvals.get(original)
    assert shown is not None and shown.status == "consumed" and not shown.honoured()
    edited = shown.details["edited"]
    assert edited == {"request_id": None, "arguments": edit}
    again = _again(agent, done)
    assert isinstance(again.output, DeferredToolRequests) and charged == [("4242", 300)]
