"""Two identical calls in one model message are two actions, through LangGraph as in a session.

A session reads a logical action as (turn, tool@version, canonical arguments, occurrence within
the message): a message proposing the same write twice sends it twice, and a resumed or repeated
message replays both. The LangGraph tools node runs each call of the message through its own
``Runtime.acall``, where every call would be the first occurrence of its own message (the second
of two identical writes answered ``replayed`` with the first's result, never sent): each tool
counts its occurrence over the ``AIMessage``'s calls in order, after the engine's normalization
of the arguments, and passes it on (``Runtime.acall(..., occurrence=...)``).
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from actionspace import Runtime
from actionspace.adapters.langgraph import governed_tools
from actionspace.session import Session


def _two_sends() -> list[dict[str, Any]]:
    return [
        {"name": "send", "args": {"to": "bob", "text": "hi"}, "id": f"m{i}", "type": "tool_call"}
        for i in (1, 2)
    ]


def _runtime(mailed: list[str]) -> Runtime:
    rt = Runtime("memory://")

    @rt.tool(effect="write", writes=["mail:{to}"])
    def send(to: str, text: str) -> dict[str, str]:
        """Send a message."""
        mailed.append(to)
        return {"sent": to}

    return rt


def test_a_session_sends_two_identical_calls_of_one_message_twice() -> None:
    mailed: list[str] = []
    rt = _runtime(mailed)
    s: Session = rt.session(run_id="conv", provider="openai_chat")
    s.user("Tell Bob hi, twice")
    calls = [
        {
            "id": c["id"],
            "type": "function",
            "function": {"name": "send", "arguments": '{"to":"bob","text":"hi"}'},
        }
        for c in _two_sends()
    ]
    turn = s.handle({"role": "assistant", "content": None, "tool_calls": calls})
    assert [o.status for o in turn.observations] == ["ok", "ok"] and mailed == ["bob", "bob"]
    rt.close()


def test_a_langgraph_message_with_two_identical_calls_sends_both() -> None:
    mailed: list[str] = []
    rt = _runtime(mailed)

    def agent(state: MessagesState) -> dict[str, Any]:
        if isinstance(state["messages"][-1], ToolMessage):
            return {"messages": [AIMessage(content="Sent.")]}
        return {"messages": [AIMessage(content="", tool_calls=_two_sends())]}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode(governed_tools(rt, names=["send"])))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    app = graph.compile(checkpointer=InMemorySaver())
    try:
        out = app.invoke(
            {"messages": [HumanMessage("Tell Bob hi, twice")]}, {"configurable": {"thread_id": "t"}}
        )
        answers = [m for m in out["messages"] if isinstance(m, ToolMessage)]
        assert len(answers) == 2
        assert not any('"replayed":true' in str(m.content) for m in answers), [m.content for m in answers]
        assert mailed == ["bob", "bob"]
    finally:
        rt.close()
