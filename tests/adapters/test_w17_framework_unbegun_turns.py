"""A store that fails while a framework run begins its turn (saving the user's words) ends the call
as a typed ``transient`` error the model reads, nothing sent, in each framework adapter: never an
exception that ends the whole agent run. The model's next proposal of the call runs it, once."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

pytest.importorskip("agents")
pytest.importorskip("pydantic_ai")
pytest.importorskip("langgraph")

from agents import Agent, Runner
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from pydantic_ai import Agent as PydanticAgent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from actionspace import Runtime
from actionspace.adapters import langgraph, openai_agents, pydantic_ai
from tests.adapters.test_openai_agents import OFFLINE, ScriptedModel, call, say, tool_outputs

PAY = {"to": "bob", "cents": 500}


def till(fail: int) -> tuple[Runtime, list[dict[str, Any]]]:
    """A runtime whose ``pay`` records each payment sent; its store fails the first ``fail`` times
    the user's words are saved."""
    rt = Runtime("memory://", recover_on_start=False)
    sent: list[dict[str, Any]] = []

    @rt.tool(effect="write", writes=["account:{to}"])
    def pay(to: str, cents: int) -> str:
        """Pay someone, in cents."""
        sent.append({"to": to, "cents": cents})
        return "paid"

    save = rt.user_input
    left = [fail]

    def flaky(run_id: str, text: Any, **options: Any) -> None:
        if left[0] > 0:
            left[0] -= 1
            raise OSError("disk I/O error")
        save(run_id, text, **options)

    setattr(rt, "user_input", flaky)  # noqa: B010 (a store failing where the user's words are saved)
    return rt, sent


def unbegun(answer: dict[str, Any]) -> None:
    assert answer["status"] == "error"
    assert answer["error"]["category"] == "transient" and "nothing was sent" in answer["error"]["message"]
    assert answer["error"]["recovery"]


@pytest.mark.parametrize("run_id", ["conv-1", None])
def test_openai_agents(run_id: str | None) -> None:
    rt, sent = till(fail=1)
    model = ScriptedModel([[call("c1", "pay", PAY)], [call("c2", "pay", PAY)], [say("paid")]])
    agent = Agent(name="till", model=model, tools=openai_agents.governed_tools(rt, run_id=run_id))
    result = asyncio.run(Runner.run(agent, "pay bob", run_config=OFFLINE))
    first, second = (json.loads(o) for o in tool_outputs(result))
    unbegun(first)
    assert second["status"] == "ok" and sent == [PAY]


@pytest.mark.parametrize("run_id", ["conv-1", None])
def test_pydantic_ai(run_id: str | None) -> None:
    rt, sent = till(fail=1)

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        answered = sum(isinstance(p, ToolReturnPart) for m in messages for p in m.parts)
        if answered < 2:
            return ModelResponse(parts=[ToolCallPart("pay", dict(PAY), tool_call_id=f"c{answered}")])
        return ModelResponse(parts=[TextPart("paid")])

    governed = pydantic_ai.GovernedToolset(rt, run_id=run_id)
    result = PydanticAgent(FunctionModel(model), toolsets=[governed.toolset]).run_sync("pay bob")
    first, second = (
        json.loads(str(p.content))
        for m in result.all_messages()
        for p in m.parts
        if isinstance(p, ToolReturnPart)
    )
    unbegun(first)
    assert second["status"] == "ok" and sent == [PAY]


@pytest.mark.parametrize("asynchronous", [False, True])
def test_langgraph(asynchronous: bool) -> None:
    rt, sent = till(fail=1)
    proposals: list[BaseMessage] = [
        AIMessage(content="", tool_calls=[{"name": "pay", "args": PAY, "id": c, "type": "tool_call"}])
        for c in ("c1", "c2")
    ]
    llm = FakeMessagesListChatModel(responses=[*proposals, AIMessage(content="paid")])
    g = StateGraph(MessagesState)
    g.add_node("agent", lambda state: {"messages": [llm.invoke(state["messages"])]})
    g.add_node("tools", ToolNode(langgraph.governed_tools(rt)))
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", tools_condition)
    g.add_edge("tools", "agent")
    app: Any = g.compile(checkpointer=InMemorySaver())
    thread = {"configurable": {"thread_id": "t1"}}
    start = {"messages": [HumanMessage("pay bob")]}
    out = asyncio.run(app.ainvoke(start, thread)) if asynchronous else app.invoke(start, thread)
    first, second = (json.loads(str(m.content)) for m in out["messages"] if isinstance(m, ToolMessage))
    unbegun(first)
    assert second["status"] == "ok" and sent == [PAY]
