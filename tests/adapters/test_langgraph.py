"""The LangGraph adapter, end to end with LangChain's fake chat model in a compiled graph: no network."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

pytest.importorskip("langgraph")

from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import Command

from actionspace.adapters.langgraph import governed_tools
from tests.adapters.framework_tools import Shop, shop, trace_kinds

CHARGE = {"card": "4242", "cents": 500}
THREAD = {"configurable": {"thread_id": "t1"}}


def proposes(call_id: str, name: str = "charge", args: dict[str, Any] | None = None) -> AIMessage:
    call = {"name": name, "args": CHARGE if args is None else args, "id": call_id, "type": "tool_call"}
    return AIMessage(content="", tool_calls=[call])


def graph(s: Shop, replies: list[BaseMessage]) -> Any:
    llm = FakeMessagesListChatModel(responses=replies)

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [llm.invoke(state["messages"])]}

    g = StateGraph(MessagesState)
    g.add_node("agent", agent)
    g.add_node("tools", ToolNode(governed_tools(s.rt, run_id="r1")))
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", tools_condition)
    g.add_edge("tools", "agent")
    return g.compile(checkpointer=InMemorySaver())


def tool_texts(out: dict[str, Any]) -> list[dict[str, Any]]:
    return [json.loads(str(m.content)) for m in out["messages"] if isinstance(m, ToolMessage)]


def test_an_interrupted_charge_resumed_with_approval_runs_once() -> None:
    s = shop()
    app = graph(s, [proposes("c1"), proposes("c2"), AIMessage(content="paid")])
    out = app.invoke({"messages": [HumanMessage("charge order 7")]}, THREAD)
    [interrupt] = out["__interrupt__"]
    assert interrupt.value["tool"] == "charge" and interrupt.value["arguments"] == CHARGE
    assert s.charges == []
    out = app.invoke(Command(resume={"approved": True, "by": "alice", "reason": "order 7"}), THREAD)
    assert "__interrupt__" not in out and out["messages"][-1].content == "paid"
    assert s.charges == [("4242", 500)]
    first, second = tool_texts(out)
    assert first["data"]["charged"] == 500 and second["replayed"] is True
    [request] = s.rt.approvals.list(status=None)
    assert request.id == interrupt.value["request_id"] and request.decided_by == "alice"
    [entry] = s.rt.ledger.list()
    assert entry.state == "committed"
    assert {"approval_requested", "approval_decided", "observation"} <= set(trace_kinds(s, "r1"))


def test_resuming_with_a_denial_is_what_the_model_reads() -> None:
    s = shop()
    app = graph(s, [proposes("c1"), AIMessage(content="not paid")])
    app.invoke({"messages": [HumanMessage("charge order 7")]}, THREAD)
    out = app.invoke(Command(resume=False), THREAD)
    [denied] = tool_texts(out)
    assert denied["error"]["category"] == "permission_denied" and s.charges == []
    [request] = s.rt.approvals.list(status=None)
    assert request.status == "denied" and request.decided_by == "langgraph"


def test_the_async_graph_runs_a_read_tool_through_the_engine() -> None:
    s = shop()
    app = graph(s, [proposes("c1", "lookup", {"order": "7"}), AIMessage(content="500 due")])
    out = asyncio.run(app.ainvoke({"messages": [HumanMessage("what is due?")]}, THREAD))
    [looked] = tool_texts(out)
    assert looked["data"] == {"order": "7", "cents": 500}
    assert "observation" in trace_kinds(s, "r1")


def test_invalid_arguments_come_back_as_a_typed_error_not_an_exception() -> None:
    s = shop()
    app = graph(s, [proposes("c1", "lookup", {"order": 7}), AIMessage(content="sorry")])
    out = app.invoke({"messages": [HumanMessage("what is due?")]}, THREAD)
    [looked] = tool_texts(out)
    assert looked["error"]["category"] == "invalid_arguments"


@pytest.mark.parametrize(
    "resume",
    [
        "false",
        "no",
        {"approved": "false"},
        {"approved": "no"},
        [{"type": "ignore", "args": None}],
        {"type": "reject"},
    ],
)
def test_only_an_explicit_true_approves_a_held_call(resume: Any) -> None:
    """A resume value that is not ``True`` (or ``{"approved": True}``), such as a form's string
    or an inbox's list of responses, is a denial: a held call never runs on a truthy accident."""
    s = shop()
    app = graph(s, [proposes("c1"), AIMessage(content="not paid")])
    app.invoke({"messages": [HumanMessage("charge order 7")]}, THREAD)
    out = app.invoke(Command(resume=resume), THREAD)
    assert s.charges == []
    [denied] = tool_texts(out)
    assert denied["error"]["category"] == "permission_denied"
    [request] = s.rt.approvals.list(status=None)
    assert request.status == "denied"
