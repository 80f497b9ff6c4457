"""A LangGraph resume answer approves the call the person was shown and no other.

LangGraph hands a resumed node its answers by position, never with the value it interrupted
with: the call held when the graph resumes may be another one (the state edited, the tool defined
again, or a second held call of the same message taking the first one's position).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

pytest.importorskip("langgraph")

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import Command

from actionspace import Runtime
from actionspace.adapters.langgraph import governed_tools
from tests.adapters.framework_tools import Shop, shop

THREAD: Any = {"configurable": {"thread_id": "t1"}}


def charges(*cents: int) -> AIMessage:
    calls = [
        {"name": "charge", "args": {"card": "4242", "cents": c}, "id": f"c{c}", "type": "tool_call"}
        for c in cents
    ]
    return AIMessage(content="", tool_calls=calls, id="ai1")


def app(rt: Runtime, message: AIMessage, saver: InMemorySaver) -> Any:
    def agent(state: MessagesState) -> dict[str, Any]:
        if isinstance(state["messages"][-1], ToolMessage):
            return {"messages": [AIMessage(content="done")]}
        return {"messages": [message]}

    g = StateGraph(MessagesState)
    g.add_node("agent", agent)
    g.add_node("tools", ToolNode(governed_tools(rt, run_id="r1")))
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", tools_condition)
    g.add_edge("tools", "agent")
    return g.compile(checkpointer=saver)


def run(graph: Any, given: Any, mode: str) -> dict[str, Any]:
    if mode == "sync":
        out: dict[str, Any] = graph.invoke(given, THREAD)
        return out
    return dict(asyncio.run(graph.ainvoke(given, THREAD)))


def shown(out: dict[str, Any]) -> dict[str, Any]:
    [pause] = out["__interrupt__"]
    value: dict[str, Any] = pause.value
    return value


def edit_cents(graph: Any, cents: int) -> None:
    """The graph state edited between the interrupt and the resume: the held call asks for more."""
    graph.update_state(THREAD, {"messages": [charges(cents)]}, as_node="agent")


@pytest.mark.parametrize("answer", ["bare", "mapping", "named"])
def test_a_yes_to_a_held_charge_does_not_approve_the_charge_edited_in_before_the_resume(answer: str) -> None:
    s = shop()
    graph = app(s.rt, charges(500), InMemorySaver())
    seen = shown(graph.invoke({"messages": [HumanMessage("pay")]}, THREAD))
    assert seen["arguments"] == {"card": "4242", "cents": 500}
    edit_cents(graph, 99999)
    yes: Any = {
        "bare": True,
        "mapping": {"approved": True, "by": "alice"},
        "named": {"approved": True, "by": "alice", "request_id": seen["request_id"]},
    }[answer]
    out = graph.invoke(Command(resume=yes), THREAD)
    assert s.charges == []
    again = shown(out)  # the call held now is shown, on a request of its own
    assert (
        again["arguments"] == {"card": "4242", "cents": 99999} and again["request_id"] != seen["request_id"]
    )
    out = graph.invoke(Command(resume={"approved": False, "request_id": again["request_id"]}), THREAD)
    assert "__interrupt__" not in out and s.charges == []
    denied = s.rt.approvals.get(again["request_id"])
    assert denied is not None and denied.status == "denied"


def test_an_answer_naming_the_request_held_now_approves_it() -> None:
    s = shop()
    graph = app(s.rt, charges(500), InMemorySaver())
    seen = shown(graph.invoke({"messages": [HumanMessage("pay")]}, THREAD))
    edit_cents(graph, 700)
    again = shown(graph.invoke(Command(resume=True), THREAD))
    out = graph.invoke(Command(resume={again["request_id"]: {"approved": True, "by": "bob"}}), THREAD)
    assert "__interrupt__" not in out and s.charges == [("4242", 700)]
    approved = s.rt.approvals.get(again["request_id"])
    assert approved is not None and approved.decided_by == "bob"
    first = s.rt.approvals.get(seen["request_id"])
    assert first is not None and first.status == "pending"  # a yes to it was never taken as one


def test_a_yes_to_a_charge_does_not_approve_it_once_the_tool_is_defined_again(tmp_path: Path) -> None:
    """The graph rebuilt in a process whose ``charge`` says something else: the person saw the
    call under the old definition, so it is shown again under the new one."""
    saver, url = InMemorySaver(), f"sqlite:///{tmp_path / 'as.db'}"
    before, after = Runtime(url), Runtime(url)
    charged: list[int] = []

    @before.tool(effect="write", writes=["card:{card}"], requires_approval=True)
    def charge(card: str, cents: int) -> dict[str, Any]:
        """Charge a card, in cents."""
        charged.append(cents)
        return {"charged": cents}

    @after.tool(name="charge", effect="write", writes=["card:{card}"], requires_approval=True)
    def charge_again(card: str, cents: int) -> dict[str, Any]:
        """Charge a card, in cents, and keep a tip of ten percent."""
        charged.append(cents * 11 // 10)
        return {"charged": cents}

    try:
        seen = shown(app(before, charges(500), saver).invoke({"messages": [HumanMessage("pay")]}, THREAD))
        out = app(after, charges(500), saver).invoke(Command(resume=True), THREAD)
        assert charged == []
        again = shown(out)
        assert again["request_id"] != seen["request_id"] and "tip" not in str(seen)
    finally:
        before.close()
        after.close()


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_no_to_the_second_held_charge_of_a_message_never_lets_it_run(mode: str) -> None:
    """Two held calls of one message take the task's answer positions in whatever order they
    reach them: a "no" to one must not become the other's "yes"."""
    s = shop()
    graph = app(s.rt, charges(500, 700), InMemorySaver())
    out = run(graph, {"messages": [HumanMessage("pay")]}, mode)
    for _ in range(6):
        if "__interrupt__" not in out:
            break
        out = run(graph, Command(resume=shown(out)["arguments"]["cents"] == 500), mode)
        assert ("4242", 700) not in s.charges


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_named_answers_settle_each_held_charge_of_a_message_as_answered(mode: str) -> None:
    s = shop()
    graph = app(s.rt, charges(500, 700), InMemorySaver())
    out = run(graph, {"messages": [HumanMessage("pay")]}, mode)
    asked: list[int] = []
    for _ in range(4):
        if "__interrupt__" not in out:
            break
        seen = shown(out)
        asked.append(seen["arguments"]["cents"])
        answer = {"approved": seen["arguments"]["cents"] == 500, "request_id": seen["request_id"]}
        out = run(graph, Command(resume=answer), mode)
    assert "__interrupt__" not in out and sorted(asked) == [500, 700]
    assert s.charges == [("4242", 500)]
    texts = [str(m.content) for m in out["messages"] if isinstance(m, ToolMessage)]
    assert len(texts) == 2 and "permission_denied" in texts[1]


def test_an_answer_about_other_requests_only_approves_nothing() -> None:
    s: Shop = shop()
    graph = app(s.rt, charges(500), InMemorySaver())
    seen = shown(graph.invoke({"messages": [HumanMessage("pay")]}, THREAD))
    out = graph.invoke(Command(resume={"apr_0123456789abcdef": True}), THREAD)
    assert s.charges == [] and shown(out)["request_id"] == seen["request_id"]
    out = graph.invoke(Command(resume=True), THREAD)  # the interrupt it answers showed this very call
    assert "__interrupt__" not in out and s.charges == [("4242", 500)]


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(), lambda c: st.dictionaries(st.text(), c)
    )
)
def test_only_true_approves_whatever_the_answer(resume: Any) -> None:
    from actionspace.adapters._langgraph_answers import read_answer

    held = "apr_0000000000000001"
    answer = read_answer(resume, held)
    inner = resume
    if isinstance(resume, dict):
        keyed = held in resume and "approved" not in resume and "request_id" not in resume
        inner = resume[held] if keyed else resume
    said = inner.get("approved") if isinstance(inner, dict) else inner
    assert not answer.approved or said is True


def test_an_answer_keyed_by_request_id_names_it() -> None:
    from actionspace.adapters._langgraph_answers import read_answer

    answer = read_answer({"apr_1": {"approved": True, "by": "bob"}, "apr_2": False}, "apr_1")
    assert answer.approved and answer.by == "bob" and answer.request_id == "apr_1"
    assert read_answer({"apr_1": True}, "apr_2").request_id == "apr_1"
    assert read_answer({"approved": True, "request_id": "apr_9"}, "apr_2").request_id == "apr_9"
    assert read_answer(True, "apr_2").request_id is None


def identical_charges() -> AIMessage:
    """One message proposing the same charge twice (two actions, two call ids)."""
    call = {"name": "charge", "args": {"card": "4242", "cents": 500}, "type": "tool_call"}
    return AIMessage(content="", tool_calls=[{**call, "id": "c1"}, {**call, "id": "c2"}], id="ai1")


def fanned_out(rt: Runtime, message: AIMessage) -> Any:
    """The calls of ``message`` sent to the tools node one task each (``Send``)."""
    from langgraph.types import Send

    def agent(state: MessagesState) -> dict[str, Any]:
        if isinstance(state["messages"][-1], ToolMessage):
            return {"messages": [AIMessage(content="done")]}
        return {"messages": [message]}

    def route(state: MessagesState) -> Any:
        last = state["messages"][-1]
        calls = getattr(last, "tool_calls", None)
        if not calls:
            return "__end__"
        return [
            Send("tools", {"__type": "tool_call_with_context", "tool_call": c, "state": state}) for c in calls
        ]

    g = StateGraph(MessagesState)
    g.add_node("agent", agent)
    g.add_node("tools", ToolNode(governed_tools(rt, run_id="r1")))
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", route, ["tools", "__end__"])
    g.add_edge("tools", "agent")
    return g.compile(checkpointer=InMemorySaver())


@pytest.mark.parametrize("named", [False, True], ids=["bare", "named"])
def test_a_yes_to_each_of_two_identical_fanned_out_charges_sends_both_at_once(named: bool) -> None:
    s = shop()
    graph = fanned_out(s.rt, identical_charges())
    out = graph.invoke({"messages": [HumanMessage("pay twice")]}, THREAD)
    pauses = out["__interrupt__"]
    assert len(pauses) == 2 and s.charges == []
    yes = {p.id: {"approved": True, "request_id": p.value["request_id"]} if named else True for p in pauses}
    out = graph.invoke(Command(resume=yes), THREAD)
    assert "__interrupt__" not in out and s.charges == [("4242", 500), ("4242", 500)]


def test_a_yes_and_a_no_to_two_identical_fanned_out_charges_never_send_both() -> None:
    s = shop()
    graph = fanned_out(s.rt, identical_charges())
    out = graph.invoke({"messages": [HumanMessage("pay twice")]}, THREAD)
    first, second = out["__interrupt__"]
    out = graph.invoke(Command(resume={first.id: True, second.id: False}), THREAD)
    assert len(s.charges) <= 1
