"""The Pydantic AI adapter, end to end with Pydantic AI's FunctionModel and TestModel: no network."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

pytest.importorskip("pydantic_ai")

from pydantic_ai import Agent, DeferredToolRequests
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel

from actionspace.adapters.pydantic_ai import GovernedToolset
from tests.adapters.framework_tools import shop, trace_kinds

CHARGE = {"card": "4242", "cents": 500}


def returns(messages: list[ModelMessage]) -> list[ToolReturnPart]:
    return [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]


def charge_twice(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Charges, charges again with the same arguments (a model retry), then answers."""
    done = len(returns(messages))
    if done < 2:
        return ModelResponse(parts=[ToolCallPart("charge", CHARGE, tool_call_id=f"c{done + 1}")])
    return ModelResponse(parts=[TextPart("paid")])


def test_a_charge_approved_through_deferred_tools_runs_once() -> None:
    s = shop()
    toolset = GovernedToolset(s.rt, run_id="r1")
    agent = Agent(
        FunctionModel(charge_twice), toolsets=[toolset.toolset], output_type=[str, DeferredToolRequests]
    )

    async def run() -> Any:
        result = await agent.run("charge order 7")
        assert isinstance(result.output, DeferredToolRequests) and s.charges == []
        [part] = result.output.approvals
        held = result.output.metadata[part.tool_call_id]
        assert held["tool"] == "charge" and held["arguments"] == CHARGE and held["effects"] == ["card:4242"]
        answers = toolset.decide(result.output, {part.tool_call_id: True}, by="alice", reason="order 7")
        return await agent.run(message_history=result.all_messages(), deferred_tool_results=answers)

    result = asyncio.run(run())
    assert result.output == "paid"
    assert s.charges == [("4242", 500)]
    first, second = (json.loads(str(p.content)) for p in returns(result.all_messages()))
    assert first["data"]["charged"] == 500 and second["replayed"] is True
    [request] = s.rt.approvals.list(status=None)
    assert request.status == "consumed" and request.decided_by == "alice"
    [entry] = s.rt.ledger.list()
    assert entry.state == "committed"
    assert {"approval_requested", "approval_decided", "observation"} <= set(trace_kinds(s, "r1"))


def test_a_denial_recorded_through_decide_is_what_the_model_reads() -> None:
    s = shop()
    toolset = GovernedToolset(s.rt, run_id="r1")

    def once(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if returns(messages):
            return ModelResponse(parts=[TextPart("not paid")])
        return ModelResponse(parts=[ToolCallPart("charge", CHARGE, tool_call_id="c1")])

    agent = Agent(FunctionModel(once), toolsets=[toolset.toolset], output_type=[str, DeferredToolRequests])

    async def run() -> Any:
        result = await agent.run("charge order 7")
        assert isinstance(result.output, DeferredToolRequests)
        answers = toolset.decide(result.output, {"c1": False}, by="bob", reason="duplicate order")
        return await agent.run(message_history=result.all_messages(), deferred_tool_results=answers)

    result = asyncio.run(run())
    assert result.output == "not paid" and s.charges == []
    [request] = s.rt.approvals.list(status=None)
    assert request.status == "denied" and request.decided_by == "bob"


def test_a_framework_approval_without_decide_is_recorded_as_the_approver() -> None:
    s = shop()
    toolset = GovernedToolset(s.rt, run_id="r1")
    agent = Agent(
        FunctionModel(charge_twice), toolsets=[toolset.toolset], output_type=[str, DeferredToolRequests]
    )

    async def run() -> Any:
        from pydantic_ai import DeferredToolResults

        result = await agent.run("charge order 7")
        answers = DeferredToolResults(approvals={"c1": True})
        return await agent.run(message_history=result.all_messages(), deferred_tool_results=answers)

    assert asyncio.run(run()).output == "paid"
    assert s.charges == [("4242", 500)]
    [request] = s.rt.approvals.list(status=None)
    assert request.decided_by == "pydantic-ai"


def test_the_test_model_calls_a_read_tool_through_the_engine() -> None:
    s = shop()
    toolset = GovernedToolset(s.rt, run_id="r1", names=["lookup"])
    agent = Agent(TestModel(call_tools=["lookup"]), toolsets=[toolset.toolset])
    result = agent.run_sync("what is due?")
    [ret] = returns(result.all_messages())
    assert json.loads(str(ret.content))["data"]["cents"] == 500
    assert "observation" in trace_kinds(s, "r1")


@pytest.mark.parametrize("raw", ["[1, 2]", "null", "7", '"order 7"', "true"])
def test_arguments_that_are_not_an_object_come_back_to_the_model_as_a_typed_error(raw: str) -> None:
    s = shop()
    toolset = GovernedToolset(s.rt, run_id="r1")

    def once(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if returns(messages):
            return ModelResponse(parts=[TextPart("sorry")])
        return ModelResponse(parts=[ToolCallPart("lookup", raw, tool_call_id="c1")])

    result = Agent(FunctionModel(once), toolsets=[toolset.toolset]).run_sync("what is due?")
    assert result.output == "sorry"
    [ret] = returns(result.all_messages())
    error = json.loads(str(ret.content))["error"]
    assert error["category"] == "invalid_arguments" and error["recovery"] == ["change_arguments"]
    assert "validated" in trace_kinds(s, "r1")


def test_an_answer_that_is_not_a_bool_is_refused_and_approves_nothing() -> None:
    s = shop()
    toolset = GovernedToolset(s.rt, run_id="r1")
    agent = Agent(
        FunctionModel(charge_twice), toolsets=[toolset.toolset], output_type=[str, DeferredToolRequests]
    )
    result = agent.run_sync("charge order 7")
    assert isinstance(result.output, DeferredToolRequests)
    with pytest.raises(TypeError, match="True or False"):
        toolset.decide(result.output, {"c1": "false"}, by="alice")  # type: ignore[dict-item]
    [request] = s.rt.approvals.list(status=None)
    assert request.status == "pending" and s.charges == []
