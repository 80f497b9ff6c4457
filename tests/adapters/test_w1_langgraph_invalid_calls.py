"""LangChain puts a tool call it could not read in ``AIMessage.invalid_tool_calls``, which a
``ToolNode`` never sees: ``governed_tool_node`` answers such a message with actionspace's
``parse_error`` (a ``ToolMessage`` of status ``error`` per call id) and runs none of its calls,
as the engine treats a model message holding a malformed call."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

import pytest

pytest.importorskip("langgraph")

from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.types import Command

from actionspace.adapters.langgraph import governed_tool_node, governed_tools_condition
from tests.adapters.framework_tools import Shop, shop

THREAD = {"configurable": {"thread_id": "t1"}}


def counted() -> Shop:
    s = shop()
    looked: list[str] = []

    @s.rt.tool(effect="read")
    def due(order: str) -> dict[str, Any]:
        """The amount due on an order (counted)."""
        looked.append(order)
        return {"order": order, "cents": 500}

    s.looked = looked  # type: ignore[attr-defined]
    return s


def raw_calls(*entries: tuple[str | None, str, str]) -> AIMessage:
    """An AIMessage as a chat model integration builds it from the provider's raw tool calls
    (id, name, arguments text): LangChain files the unreadable ones under ``invalid_tool_calls``."""
    calls = [{"id": i, "type": "function", "function": {"name": n, "arguments": a}} for i, n, a in entries]
    return AIMessage(content="", additional_kwargs={"tool_calls": calls})


def proposes(call_id: str, name: str, args: dict[str, Any]) -> AIMessage:
    return AIMessage(
        content="", tool_calls=[{"name": name, "args": args, "id": call_id, "type": "tool_call"}]
    )


def graph(s: Shop, replies: Sequence[BaseMessage]) -> Any:
    llm = FakeMessagesListChatModel(responses=list(replies))

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [llm.invoke(state["messages"])]}

    g = StateGraph(MessagesState)
    g.add_node("agent", agent)
    g.add_node("tools", governed_tool_node(s.rt, run_id="r1"))
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", governed_tools_condition)
    g.add_edge("tools", "agent")
    return g.compile(checkpointer=InMemorySaver())


def answers(out: dict[str, Any]) -> list[ToolMessage]:
    return [m for m in out["messages"] if isinstance(m, ToolMessage)]


def assert_parse_errors(messages: list[ToolMessage], ids: list[str], said: str) -> None:
    assert [m.tool_call_id for m in messages] == ids
    for m in messages:
        assert m.status == "error"
        error = json.loads(str(m.content))["error"]
        assert error["category"] == "parse_error" and "re_emit_call" in error["recovery"]
        assert said in error["message"]


def test_an_unreadable_call_is_answered_with_a_parse_error_and_the_model_recovers() -> None:
    s = counted()
    replies = [
        raw_calls(("c1", "due", '{"order": ')),
        proposes("c2", "due", {"order": "7"}),
        AIMessage("500"),
    ]
    out = graph(s, replies).invoke({"messages": [HumanMessage("what is due?")]}, THREAD)
    first, second = answers(out)
    assert_parse_errors([first], ["c1"], "c1")
    assert second.tool_call_id == "c2" and json.loads(str(second.content))["data"]["cents"] == 500
    assert s.looked == ["7"] and out["messages"][-1].content == "500"  # type: ignore[attr-defined]
    parsed = [e.data for e in s.rt.trace.events("r1") if e.kind == "parsed"]
    assert "c1" in parsed[0]["error"] and parsed[0]["calls"] == ()
    observed = [e.data.get("category") for e in s.rt.trace.events("r1") if e.kind == "observation"]
    assert observed[0] == "parse_error"


def test_a_readable_call_beside_an_unreadable_one_does_not_run() -> None:
    s = counted()
    message = raw_calls(("c1", "due", '{"order": "7"}'), ("c2", "charge", '{"card": "42'))
    assert message.tool_calls and message.invalid_tool_calls
    out = asyncio.run(
        graph(s, [message, AIMessage("sorry")]).ainvoke({"messages": [HumanMessage("pay")]}, THREAD)
    )
    assert_parse_errors(answers(out), ["c1", "c2"], "c2")
    assert s.looked == [] and s.charges == []  # type: ignore[attr-defined]


def test_calls_sharing_an_id_run_none_and_each_id_is_answered_once() -> None:
    s = counted()
    message = AIMessage(
        content="",
        tool_calls=[
            {"name": "due", "args": {"order": "7"}, "id": "c1", "type": "tool_call"},
            {"name": "due", "args": {"order": "8"}, "id": "c1", "type": "tool_call"},
        ],
    )
    out = graph(s, [message, AIMessage("sorry")]).invoke({"messages": [HumanMessage("due?")]}, THREAD)
    assert_parse_errors(answers(out), ["c1"], "id of an earlier call")
    assert s.looked == []  # type: ignore[attr-defined]


def test_an_invalid_call_whose_arguments_read_well_still_does_not_run() -> None:
    s = counted()
    invalid = {
        "type": "invalid_tool_call",
        "id": "c1",
        "name": "due",
        "args": '{"order": "7"}',
        "error": "bad",
    }
    message = AIMessage(content="", invalid_tool_calls=[invalid])
    out = graph(s, [message, AIMessage("sorry")]).invoke({"messages": [HumanMessage("due?")]}, THREAD)
    assert_parse_errors(answers(out), ["c1"], "could not be read (bad)")
    assert s.looked == []  # type: ignore[attr-defined]


def test_an_invalid_call_without_an_id_runs_nothing_and_the_others_are_answered() -> None:
    s = counted()
    invalid = {"type": "invalid_tool_call", "id": None, "name": None, "args": None, "error": None}
    message = AIMessage(
        content="",
        tool_calls=[{"name": "due", "args": {"order": "7"}, "id": "c1", "type": "tool_call"}],
        invalid_tool_calls=[invalid],
    )
    out = graph(s, [message, AIMessage("sorry")]).invoke({"messages": [HumanMessage("due?")]}, THREAD)
    assert_parse_errors(answers(out), ["c1"], "function.name must be a non-empty string")
    assert s.looked == []  # type: ignore[attr-defined]


def test_a_held_call_still_interrupts_and_runs_once_approved() -> None:
    s = shop()
    charge = proposes("c1", "charge", {"card": "4242", "cents": 500})
    app = graph(s, [charge, AIMessage("paid")])
    out = app.invoke({"messages": [HumanMessage("charge order 7")]}, THREAD)
    [interrupt] = out["__interrupt__"]
    assert interrupt.value["tool"] == "charge" and s.charges == []
    out = app.invoke(Command(resume=True), THREAD)
    assert s.charges == [("4242", 500)] and out["messages"][-1].content == "paid"


def test_the_condition_routes_a_message_of_invalid_calls_only_to_the_tools() -> None:
    invalid = raw_calls(("c1", "due", "{"))
    assert not invalid.tool_calls
    assert governed_tools_condition({"messages": [invalid]}) == "tools"
    assert governed_tools_condition([AIMessage("done")]) == "__end__"
