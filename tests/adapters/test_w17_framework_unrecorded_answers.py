"""An approval store that fails while a framework adapter records the person's answer (the
framework approved a held call) ends the call as a typed ``transient`` error the model reads,
nothing sent, in each framework adapter: never an exception that ends the whole agent run. The
call proposed again, and approved again, runs once."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

pytest.importorskip("agents")
pytest.importorskip("pydantic_ai")
pytest.importorskip("langgraph")

from agents import Agent, Runner
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.types import Command
from pydantic_ai import Agent as PydanticAgent
from pydantic_ai import DeferredToolRequests, DeferredToolResults
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from actionspace.adapters import openai_agents, pydantic_ai
from tests.adapters.framework_tools import Shop, shop
from tests.adapters.test_langgraph import THREAD, graph, proposes, tool_texts
from tests.adapters.test_openai_agents import OFFLINE, ScriptedModel, call, say, tool_outputs

CHARGE = {"card": "4242", "cents": 500}


def failing_once(s: Shop, method: str) -> None:
    """The approval store's ``method`` fails the next time it is called, then works again."""
    store = s.rt.approvals.store
    works = getattr(store, method)
    left = [1]

    def flaky(*args: Any, **kwargs: Any) -> Any:
        if left[0] > 0:
            left[0] -= 1
            raise OSError("disk I/O error")
        return works(*args, **kwargs)

    setattr(store, method, flaky)


def unsent(answer: dict[str, Any]) -> None:
    assert answer["status"] == "error"
    assert answer["error"]["category"] == "transient" and "nothing was sent" in answer["error"]["message"]


@pytest.mark.parametrize("method", ["get", "update"])
def test_openai_agents(method: str) -> None:
    s = shop()
    model = ScriptedModel([[call("c1", "charge", CHARGE)], [call("c2", "charge", CHARGE)], [say("paid")]])
    agent = Agent(name="till", model=model, tools=openai_agents.governed_tools(s.rt, run_id="r1"))

    async def run() -> Any:
        result = await Runner.run(agent, "charge order 7", run_config=OFFLINE)
        failing_once(s, method)
        while result.interruptions:  # the person approves each proposal in the SDK
            state = result.to_state()
            for item in result.interruptions:
                state.approve(item)
            result = await Runner.run(agent, state, run_config=OFFLINE)
        return result

    result = asyncio.run(run())
    first, second = (json.loads(o) for o in tool_outputs(result))
    unsent(first)
    assert second["status"] == "ok" and s.charges == [("4242", 500)]


@pytest.mark.parametrize("method", ["get", "update"])
def test_pydantic_ai(method: str) -> None:
    s = shop()

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        answered = sum(isinstance(p, ToolReturnPart) for m in messages for p in m.parts)
        if answered < 2:
            return ModelResponse(parts=[ToolCallPart("charge", dict(CHARGE), tool_call_id=f"c{answered}")])
        return ModelResponse(parts=[TextPart("paid")])

    governed = pydantic_ai.GovernedToolset(s.rt, run_id="r1")
    agent: PydanticAgent[None, Any] = PydanticAgent(
        FunctionModel(model), toolsets=[governed.toolset], output_type=[str, DeferredToolRequests]
    )
    result = agent.run_sync("charge order 7")
    failing_once(s, method)
    while isinstance(result.output, DeferredToolRequests):  # approved in Pydantic AI each time
        answers = DeferredToolResults(approvals={p.tool_call_id: True for p in result.output.approvals})
        result = agent.run_sync(message_history=result.all_messages(), deferred_tool_results=answers)
    first, second = (
        json.loads(str(p.content))
        for m in result.all_messages()
        for p in m.parts
        if isinstance(p, ToolReturnPart)
    )
    unsent(first)
    assert second["status"] == "ok" and s.charges == [("4242", 500)]


@pytest.mark.parametrize("method", ["get", "update"])
def test_langgraph(method: str) -> None:
    s = shop()
    app = graph(s, [proposes("c1"), proposes("c2"), AIMessage(content="paid")])
    out = app.invoke({"messages": [HumanMessage("charge order 7")]}, THREAD)
    failing_once(s, method)
    while out.get("__interrupt__"):
        out = app.invoke(Command(resume=True), THREAD)
    first, second = tool_texts(out)
    unsent(first)
    assert second["status"] == "ok" and s.charges == [("4242", 500)]
