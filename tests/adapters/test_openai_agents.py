"""The OpenAI Agents SDK adapter, end to end with a scripted model: no network, no API key."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

pytest.importorskip("agents")

from agents import Agent, FunctionTool, RunConfig, Runner, Usage
from agents.items import ModelResponse, TResponseOutputItem, TResponseStreamEvent
from agents.models.interface import Model
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputRefusal,
    ResponseOutputText,
)

from actionspace.adapters.openai_agents import governed_tools
from tests.adapters.framework_tools import shop, trace_kinds

OFFLINE = RunConfig(tracing_disabled=True)


class ScriptedModel(Model):
    """Answers each model request with the next scripted list of output items."""

    def __init__(self, turns: list[list[TResponseOutputItem]]) -> None:
        self.turns = list(turns)
        self.inputs: list[Any] = []

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        self.inputs.append(args[1] if len(args) > 1 else kwargs.get("input"))
        return ModelResponse(output=self.turns.pop(0), usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[TResponseStreamEvent]:
        raise NotImplementedError


def call(call_id: str, name: str, arguments: dict[str, Any]) -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(
        type="function_call", call_id=call_id, name=name, arguments=json.dumps(arguments), id=f"fc_{call_id}"
    )


def say(text: str) -> ResponseOutputMessage:
    content: list[ResponseOutputText | ResponseOutputRefusal] = [
        ResponseOutputText(type="output_text", text=text, annotations=[])
    ]
    return ResponseOutputMessage(
        id="msg", type="message", role="assistant", status="completed", content=content
    )


def tool_outputs(result: Any) -> list[str]:
    return [item.output for item in result.new_items if type(item).__name__ == "ToolCallOutputItem"]


CHARGE = {"card": "4242", "cents": 500}


def test_an_approved_charge_proposed_twice_runs_once() -> None:
    s = shop()
    model = ScriptedModel([[call("c1", "charge", CHARGE)], [call("c2", "charge", CHARGE)], [say("paid")]])
    agent = Agent(name="till", model=model, tools=governed_tools(s.rt, run_id="r1"))

    async def run() -> Any:
        result = await Runner.run(agent, "charge order 7", run_config=OFFLINE)
        while result.interruptions:  # the SDK's own approval: a person approves each item
            state = result.to_state()
            for item in result.interruptions:
                state.approve(item)
            result = await Runner.run(agent, state, run_config=OFFLINE)
        return result

    result = asyncio.run(run())
    assert result.final_output == "paid"
    assert s.charges == [("4242", 500)]
    first, second = tool_outputs(result)
    assert json.loads(first)["data"] == {"charged": 500, "card": "4242"}
    assert json.loads(second)["replayed"] is True
    [entry] = s.rt.ledger.list()
    assert entry.state == "committed"
    [request] = s.rt.approvals.list(status=None)
    assert request.status == "consumed" and request.decided_by == "openai-agents"
    kinds = trace_kinds(s, "r1")
    assert "approval_requested" in kinds and "approval_decided" in kinds and "observation" in kinds


def test_a_rejected_charge_never_reaches_the_tool() -> None:
    s = shop()
    model = ScriptedModel([[call("c1", "charge", CHARGE)], [say("not paid")]])
    agent = Agent(name="till", model=model, tools=governed_tools(s.rt, run_id="r1"))

    async def run() -> Any:
        result = await Runner.run(agent, "charge order 7", run_config=OFFLINE)
        state = result.to_state()
        state.reject(result.interruptions[0])
        return await Runner.run(agent, state, run_config=OFFLINE)

    result = asyncio.run(run())
    assert result.final_output == "not paid" and s.charges == []
    assert s.rt.ledger.list() == []


def test_invalid_arguments_come_back_to_the_model_as_a_typed_error() -> None:
    s = shop()
    model = ScriptedModel([[call("c1", "lookup", {"order": 7})], [say("sorry")]])
    agent = Agent(name="till", model=model, tools=governed_tools(s.rt, run_id="r1"))
    result = asyncio.run(Runner.run(agent, "what is due on 7?", run_config=OFFLINE))
    [output] = tool_outputs(result)
    assert json.loads(output)["error"]["category"] == "invalid_arguments"
    assert "validated" in trace_kinds(s, "r1")


def test_only_tools_that_may_need_a_person_ask_the_sdk_for_approval() -> None:
    tools = {t.name: t for t in governed_tools(shop().rt) if isinstance(t, FunctionTool)}
    assert callable(tools["charge"].needs_approval) and tools["lookup"].needs_approval is False
    assert tools["charge"].params_json_schema["required"] == ["card", "cents"]
