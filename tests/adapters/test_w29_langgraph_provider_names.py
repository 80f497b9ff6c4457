"""A tool whose name providers refuse (MCP servers name tools ``files.read``) is offered to
LangGraph under a name they take; the model's calls of that name run the tool, and a refused
message is answered under the names the model used."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

pytest.importorskip("langgraph")

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode

from actionspace import Runtime
from actionspace.adapters.langgraph import governed_tool_node, governed_tools, governed_tools_condition

PROVIDER_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


def dotted_runtime(ran: list[str]) -> Runtime:
    rt = Runtime("memory://")

    def read(path: str) -> dict[str, str]:
        ran.append(path)
        return {"path": path}

    rt.add_tool(
        name="files.read",
        input_schema={"properties": {"path": {"type": "string"}}, "required": ["path"]},
        fn=read,
        effect="read",
        description="Read a file.",
    )
    return rt


def replying(first: AIMessage, node: Any) -> Any:
    def agent(state: MessagesState) -> dict[str, Any]:
        said: list[AnyMessage] = state["messages"]
        return {"messages": [first if isinstance(said[-1], HumanMessage) else AIMessage("done")]}

    g = StateGraph(MessagesState)
    g.add_node("agent", agent)
    g.add_node("tools", node)
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", governed_tools_condition)
    g.add_edge("tools", "agent")
    return g.compile()


def tool_messages(out: dict[str, Any]) -> list[ToolMessage]:
    return [m for m in out["messages"] if isinstance(m, ToolMessage)]


def offered_name(rt: Runtime) -> str:
    [tool] = governed_tools(rt, run_id="r0")
    return tool.name


def test_a_dotted_tool_is_offered_under_a_name_providers_take() -> None:
    name = offered_name(dotted_runtime([]))
    assert PROVIDER_NAME.fullmatch(name), name
    assert name != "files.read"


@pytest.mark.parametrize("node", ["tools", "tool_node"])
def test_the_model_calling_the_offered_name_runs_the_tool(node: str) -> None:
    ran: list[str] = []
    rt = dotted_runtime(ran)
    name = offered_name(rt)
    tools = (
        ToolNode(governed_tools(rt, run_id="r1")) if node == "tools" else governed_tool_node(rt, run_id="r1")
    )
    call = {"name": name, "args": {"path": "a.txt"}, "id": "c1", "type": "tool_call"}
    out = replying(AIMessage(content="", tool_calls=[call]), tools).invoke(
        {"messages": [HumanMessage("read")]}
    )
    [answer] = tool_messages(out)
    assert json.loads(str(answer.content))["data"] == {"path": "a.txt"} and ran == ["a.txt"]
    assert answer.name == name and answer.status == "success"
    [observed] = [e for e in rt.trace.events("r1") if e.kind == "observation"]
    assert observed.data["tool"] == "files.read"


def test_a_refused_message_is_answered_under_the_offered_names_and_runs_nothing() -> None:
    ran: list[str] = []
    rt = dotted_runtime(ran)
    name = offered_name(rt)
    readable = {"id": "c1", "type": "function", "function": {"name": name, "arguments": '{"path": "a"}'}}
    unreadable = {"id": "c2", "type": "function", "function": {"name": name, "arguments": '{"path": '}}
    message = AIMessage(content="", additional_kwargs={"tool_calls": [readable, unreadable]})
    assert message.tool_calls and message.invalid_tool_calls
    out = replying(message, governed_tool_node(rt, run_id="r1")).invoke({"messages": [HumanMessage("read")]})
    answered = tool_messages(out)
    assert [(m.tool_call_id, m.name, m.status) for m in answered] == [
        ("c1", name, "error"),
        ("c2", name, "error"),
    ]
    for m in answered:
        error = json.loads(str(m.content))["error"]
        assert error["category"] == "parse_error" and error["recovery"]
    assert ran == []
    [said] = [e.data["raw"] for e in rt.trace.events("r1") if e.kind == "model_output"]
    assert [c["function"]["name"] for c in said["tool_calls"]] == ["files.read", "files.read"]
