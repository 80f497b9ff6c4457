"""LangGraph: an observation that is an error reaches the model as a ``ToolMessage`` of status
``"error"`` (what LangChain's chat models turn into a provider's error flag, Anthropic's
``is_error``), its text the ``render-v2`` error with category and recovery; an answer that is not
an error keeps status ``"success"``. A tool invoked with bare arguments (no tool call) still
returns the text."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

pytest.importorskip("langgraph")

from langchain_core.messages import AIMessage, ToolMessage
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode

from actionspace import Runtime
from actionspace.adapters.langgraph import governed_tools


def desk() -> Runtime:
    rt = Runtime("memory://", recover_on_start=False)

    @rt.tool(effect="write", writes=["x:{k}"])
    def boom(k: str) -> dict[str, Any]:
        """Fails."""
        raise RuntimeError("backend exploded")

    @rt.tool(effect="read")
    def lookup(order: str) -> dict[str, Any]:
        """The amount due on an order."""
        return {"order": order, "cents": 500}

    return rt


def calls() -> AIMessage:
    return AIMessage(
        content="",
        tool_calls=[
            {"name": "boom", "args": {"k": "z"}, "id": "b1", "type": "tool_call"},
            {"name": "lookup", "args": {"order": "7"}, "id": "l1", "type": "tool_call"},
            {"name": "lookup", "args": {"order": 7}, "id": "l2", "type": "tool_call"},
        ],
    )


@pytest.mark.parametrize("asynchronous", [False, True])
def test_an_error_observation_is_a_tool_message_of_status_error(asynchronous: bool) -> None:
    graph = StateGraph(MessagesState)
    graph.add_node("tools", ToolNode(governed_tools(desk(), run_id="r1")))
    graph.add_edge(START, "tools")
    app = graph.compile()
    state: Any = {"messages": [calls()]}
    out = asyncio.run(app.ainvoke(state)) if asynchronous else app.invoke(state)
    answers = {m.tool_call_id: m for m in out["messages"] if isinstance(m, ToolMessage)}
    assert [answers[i].status for i in ("b1", "l1", "l2")] == ["error", "success", "error"]
    failed = json.loads(str(answers["b1"].content))
    assert failed["error"]["category"] == "unclassified" and failed["error"]["recovery"]
    invalid = json.loads(str(answers["l2"].content))
    assert invalid["error"]["category"] == "invalid_arguments" and invalid["error"]["recovery"]
    assert (answers["b1"].name, answers["l1"].name) == ("boom", "lookup")


def test_a_tool_invoked_with_bare_arguments_returns_the_text() -> None:
    [boom, _] = governed_tools(desk(), run_id="r1")
    text = boom.invoke({"k": "z"})
    assert isinstance(text, str) and json.loads(text)["error"]["category"] == "unclassified"
