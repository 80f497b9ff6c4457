"""Pydantic AI: an answer given with ``GovernedToolset.decide`` approves the request the person saw,
and nothing else. A run resumed with it whose call is held on another request (the message history
sent back holds other arguments, or the tool's definition changed meanwhile) is deferred again on
that request; it never runs on the earlier answer, approved in the toolset's name."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("pydantic_ai")

from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from actionspace import Runtime
from actionspace.adapters.pydantic_ai import GovernedToolset


def shop() -> tuple[Runtime, list[tuple[Any, ...]]]:
    rt = Runtime("memory://", recover_on_start=False)
    charged: list[tuple[Any, ...]] = []

    @rt.tool(effect="write", writes=["card:{card}"], requires_approval=True)
    def charge(card: str, cents: int) -> dict[str, int]:
        """Charge a card, in cents."""
        charged.append((card, cents))
        return {"charged": cents}

    return rt, charged


def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    if any(isinstance(p, ToolReturnPart) for m in messages for p in m.parts):
        return ModelResponse(parts=[TextPart("Paid.")])
    return ModelResponse(parts=[ToolCallPart("charge", {"card": "4242", "cents": 500}, tool_call_id="c1")])


def held(governed: GovernedToolset) -> tuple[Agent[None, Any], Any]:
    agent: Agent[None, Any] = Agent(
        FunctionModel(model), toolsets=[governed.toolset], output_type=[str, DeferredToolRequests]
    )
    result = agent.run_sync("Charge order 7")
    assert isinstance(result.output, DeferredToolRequests)
    return agent, result


def test_arguments_changed_in_the_history_sent_back_are_deferred_again_not_charged() -> None:
    rt, charged = shop()
    governed = GovernedToolset(rt, run_id="order-7")
    agent, result = held(governed)
    answers = governed.decide(result.output, {"c1": True}, by="alice")
    history = result.all_messages()
    for message in history:  # the client that kept the history sends back another amount
        for part in message.parts:
            if isinstance(part, ToolCallPart):
                part.args = {"card": "4242", "cents": 50_000}

    again = agent.run_sync(message_history=history, deferred_tool_results=answers)

    assert charged == []
    assert isinstance(again.output, DeferredToolRequests)
    [part] = again.output.approvals
    asked = again.output.metadata[part.tool_call_id]
    assert asked["arguments"] == {"card": "4242", "cents": 50_000}
    first = result.output.metadata["c1"]["request_id"]
    assert asked["request_id"] != first
    assert rt.approvals.get(asked["request_id"]).status == "pending"  # type: ignore[union-attr]
    assert rt.approvals.get(first).status == "approved"  # type: ignore[union-attr]

    # the person decides the amount now asked: it is charged, once, on that decision
    answers = governed.decide(again.output, {part.tool_call_id: True}, by="bob")
    done = agent.run_sync(message_history=again.all_messages(), deferred_tool_results=answers)
    assert done.output == "Paid." and charged == [("4242", 50_000)]
    assert rt.approvals.get(asked["request_id"]).decided_by == "bob"  # type: ignore[union-attr]


def test_a_tool_redefined_before_the_resume_is_deferred_again_on_its_new_definition() -> None:
    rt, charged = shop()
    governed = GovernedToolset(rt, run_id="order-7")
    _, result = held(governed)
    answers = governed.decide(result.output, {"c1": True}, by="alice")

    @rt.tool(effect="write", writes=["card:{card}"], requires_approval=True, name="charge", version="2")
    def charge_v2(card: str, cents: int, memo: str = "") -> dict[str, int]:
        """Charge a card, in cents, with a memo on the statement."""
        charged.append((card, cents, memo))
        return {"charged": cents}

    rebuilt = GovernedToolset(rt, run_id="order-7")
    agent: Agent[None, Any] = Agent(
        FunctionModel(model), toolsets=[rebuilt.toolset], output_type=[str, DeferredToolRequests]
    )
    again = agent.run_sync(message_history=result.all_messages(), deferred_tool_results=answers)

    assert charged == []
    assert isinstance(again.output, DeferredToolRequests)
    [part] = again.output.approvals
    assert (
        again.output.metadata[part.tool_call_id]["request_id"] != result.output.metadata["c1"]["request_id"]
    )
    assert {r.decided_by for r in rt.approvals.list(status=None)} == {"alice", None}


def test_the_call_decided_runs_on_its_decision() -> None:
    rt, charged = shop()
    governed = GovernedToolset(rt, run_id="order-7")
    agent, result = held(governed)
    answers = governed.decide(result.output, {"c1": True}, by="alice", reason="confirmed")
    done = agent.run_sync(message_history=result.all_messages(), deferred_tool_results=answers)
    assert done.output == "Paid." and charged == [("4242", 500)]
    [request] = rt.approvals.list(status=None)
    assert request.decided_by == "alice" and request.status == "consumed"


def test_an_approval_given_without_decide_still_runs_the_call_as_the_toolset_s_approver() -> None:
    rt, charged = shop()
    governed = GovernedToolset(rt, run_id="order-7", approver="desk")
    agent, result = held(governed)
    done = agent.run_sync(
        message_history=result.all_messages(),
        deferred_tool_results=DeferredToolResults(approvals={"c1": True}),
    )
    assert done.output == "Paid." and charged == [("4242", 500)]
    [request] = rt.approvals.list(status=None)
    assert request.decided_by == "desk"
