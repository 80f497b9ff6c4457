"""Each LangGraph thread is one actionspace run (or, with ``run_id`` given, acts in that run), and
each user message in a thread is a new turn: tools built once and used by a compiled graph for
many conversations never replay one thread's write as another's answer, while a graph resumed
from its checkpoint after an interrupt stays in its turn and commits once."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

pytest.importorskip("langgraph")

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import Command

from actionspace import Runtime
from actionspace.adapters.langgraph import (
    governed_tool_node,
    governed_tools,
    governed_tools_condition,
    thread_run_id,
)
from tests.adapters.framework_tools import shop

HI = {"to": "bob", "text": "hi"}
CHARGE = {"card": "4242", "cents": 500}


def mailer() -> tuple[Runtime, list[tuple[str, str]]]:
    rt = Runtime("memory://")
    sent: list[tuple[str, str]] = []

    @rt.tool(effect="write", writes=["mail:{to}"])
    def send(to: str, text: str) -> dict[str, Any]:
        """Send a message."""
        sent.append((to, text))
        return {"sent": len(sent)}

    return rt, sent


def call(call_id: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "args": args, "id": call_id, "type": "tool_call"}


def send_once(messages: list[AnyMessage]) -> AIMessage:
    """Sends hi to bob once per user message of the thread, then answers; the call id repeats
    from thread to thread (``p1`` for a thread's first message), as a provider's may."""
    if isinstance(messages[-1], ToolMessage):
        return AIMessage("sent")
    asked = sum(isinstance(m, HumanMessage) for m in messages)
    return AIMessage(content="", tool_calls=[call(f"p{asked}", "send", HI)])


def compiled(tools_node: Any, agent: Any = send_once, *, checkpointer: bool = True) -> Any:
    def model(state: MessagesState) -> dict[str, Any]:
        return {"messages": [agent(state["messages"])]}

    g = StateGraph(MessagesState)
    g.add_node("agent", model)
    g.add_node("tools", tools_node)
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", governed_tools_condition)
    g.add_edge("tools", "agent")
    return g.compile(checkpointer=InMemorySaver() if checkpointer else None)


def thread(name: Any) -> RunnableConfig:
    return {"configurable": {"thread_id": name}}


def answers(out: dict[str, Any]) -> list[dict[str, Any]]:
    return [json.loads(str(m.content)) for m in out["messages"] if isinstance(m, ToolMessage)]


def ledger_runs(rt: Runtime) -> list[str]:
    return sorted(e.run_id for e in rt.ledger.list())


def user_words(rt: Runtime, run_id: str) -> list[str]:
    return [e.data["text"] for e in rt.trace.events(run_id) if e.kind == "user_input"]


def turns(rt: Runtime, run_id: str) -> int:
    return [e.kind for e in rt.trace.events(run_id)].count("user_turn")


@pytest.mark.parametrize("node", ["tools", "tool_node"])
def test_separate_threads_of_one_graph_each_send_their_own_write(node: str) -> None:
    rt, sent = mailer()
    app = compiled(ToolNode(governed_tools(rt)) if node == "tools" else governed_tool_node(rt))
    first = app.invoke({"messages": [HumanMessage("send bob hi")]}, thread("alice"))
    second = app.invoke({"messages": [HumanMessage("send bob hi")]}, thread("carol"))
    assert sent == [("bob", "hi"), ("bob", "hi")]
    for out in (first, second):
        [answer] = answers(out)
        assert answer["status"] == "ok" and "replayed" not in answer
    alice, carol = thread_run_id("alice"), thread_run_id("carol")
    assert alice != carol and ledger_runs(rt) == sorted([alice, carol])
    assert user_words(rt, alice) == ["send bob hi"] and user_words(rt, carol) == ["send bob hi"]


def test_concurrent_threads_act_in_runs_of_their_own() -> None:
    rt, sent = mailer()
    app = compiled(ToolNode(governed_tools(rt)))

    async def both() -> list[Any]:
        asks = [app.ainvoke({"messages": [HumanMessage("send bob hi")]}, thread(t)) for t in "ab"]
        return list(await asyncio.gather(*asks))

    asyncio.run(both())
    assert sent == [("bob", "hi"), ("bob", "hi")]
    assert len(set(ledger_runs(rt))) == 2


def test_the_same_thread_id_acts_in_the_same_run_from_tools_built_again() -> None:
    """The run of a thread is named by the thread id: a graph built again (another process) finds
    it, and the thread's second message is the run's second turn."""
    rt, sent = mailer()
    saver = InMemorySaver()

    def app() -> Any:
        g = StateGraph(MessagesState)
        g.add_node("agent", lambda state: {"messages": [send_once(state["messages"])]})
        g.add_node("tools", ToolNode(governed_tools(rt)))
        g.add_edge(START, "agent")
        g.add_conditional_edges("agent", tools_condition)
        g.add_edge("tools", "agent")
        return g.compile(checkpointer=saver)

    app().invoke({"messages": [HumanMessage("send bob hi")]}, thread("alice"))
    app().invoke({"messages": [HumanMessage("once more")]}, thread("alice"))
    assert sent == [("bob", "hi"), ("bob", "hi")]
    assert ledger_runs(rt) == [thread_run_id("alice")] * 2
    assert user_words(rt, thread_run_id("alice")) == ["send bob hi", "once more"]


@pytest.mark.parametrize("node", ["tools", "tool_node"])
def test_each_user_message_of_a_thread_in_a_named_run_is_a_new_turn(node: str) -> None:
    rt, sent = mailer()
    app = compiled(
        ToolNode(governed_tools(rt, run_id="conv"))
        if node == "tools"
        else governed_tool_node(rt, run_id="conv")
    )
    app.invoke({"messages": [HumanMessage("send bob hi")]}, thread("alice"))
    out = app.invoke({"messages": [HumanMessage("once more")]}, thread("alice"))
    assert sent == [("bob", "hi"), ("bob", "hi")]
    assert "replayed" not in answers(out)[-1]
    assert ledger_runs(rt) == ["conv", "conv"]
    assert turns(rt, "conv") == 2 and user_words(rt, "conv") == ["send bob hi", "once more"]


def test_every_thread_acts_in_the_run_given() -> None:
    rt, sent = mailer()
    app = compiled(ToolNode(governed_tools(rt, run_id="conv")))
    for name in ("alice", "carol"):
        app.invoke({"messages": [HumanMessage(f"send bob hi for {name}")]}, thread(name))
    assert sent == [("bob", "hi"), ("bob", "hi")] and ledger_runs(rt) == ["conv", "conv"]
    assert user_words(rt, "conv") == ["send bob hi for alice", "send bob hi for carol"]


def test_the_calls_of_one_message_run_in_one_turn() -> None:
    """A ToolNode runs a message's calls on worker threads at once: the turn starts once."""
    rt, sent = mailer()
    people = ["bob", "carol", "dave", "erin"]

    def agent(messages: list[AnyMessage]) -> AIMessage:
        if isinstance(messages[-1], ToolMessage):
            return AIMessage("sent")
        calls = [call(f"c{i}", "send", {"to": p, "text": "hi"}) for i, p in enumerate(people)]
        return AIMessage(content="", tool_calls=calls)

    compiled(ToolNode(governed_tools(rt)), agent).invoke(
        {"messages": [HumanMessage("tell all")]}, thread("t")
    )
    assert sorted(to for to, _ in sent) == people
    [run_id] = set(ledger_runs(rt))
    assert turns(rt, run_id) == 1 and user_words(rt, run_id) == ["tell all"]


def test_a_turn_that_first_calls_another_tool_is_still_a_new_turn() -> None:
    """A ToolNode may hold other tools beside actionspace's: their answers in a thread's new turn
    do not make the turn look already started."""
    from langchain_core.tools import tool

    rt, sent = mailer()

    @tool
    def weather(city: str) -> str:
        """The weather in a city."""
        return "sunny"

    def agent(messages: list[AnyMessage]) -> AIMessage:
        asked = sum(isinstance(m, HumanMessage) for m in messages)
        since = messages[max(i for i, m in enumerate(messages) if isinstance(m, HumanMessage)) :]
        answered = [m.name for m in since if isinstance(m, ToolMessage)]
        if not answered and asked > 1:
            return AIMessage(content="", tool_calls=[call(f"w{asked}", "weather", {"city": "Oslo"})])
        if "send" not in answered:
            return AIMessage(content="", tool_calls=[call(f"p{asked}", "send", HI)])
        return AIMessage("sent")

    app = compiled(ToolNode([*governed_tools(rt), weather]), agent)
    app.invoke({"messages": [HumanMessage("send bob hi")]}, thread("t"))
    out = app.invoke({"messages": [HumanMessage("check the weather, then send bob hi again")]}, thread("t"))
    assert sent == [("bob", "hi"), ("bob", "hi")]
    assert "replayed" not in json.loads(str(out["messages"][-2].content))
    assert turns(rt, thread_run_id("t")) == 2


def charge_twice(messages: list[AnyMessage]) -> AIMessage:
    """Proposes the charge, then (with a new call id) the same charge again, then answers."""
    done = sum(isinstance(m, ToolMessage) for m in messages)
    if done < 2:
        return AIMessage(content="", tool_calls=[call(f"c{done + 1}", "charge", CHARGE)])
    return AIMessage("paid")


@pytest.mark.parametrize("rebuilt", [False, True], ids=["same-graph", "graph-built-again"])
def test_an_interrupted_charge_in_a_thread_without_a_run_id_commits_once(rebuilt: bool) -> None:
    s = shop()
    saver = InMemorySaver()

    def app() -> Any:
        g = StateGraph(MessagesState)
        g.add_node("agent", lambda state: {"messages": [charge_twice(state["messages"])]})
        g.add_node("tools", ToolNode(governed_tools(s.rt)))
        g.add_edge(START, "agent")
        g.add_conditional_edges("agent", tools_condition)
        g.add_edge("tools", "agent")
        return g.compile(checkpointer=saver)

    graph = app()
    out = graph.invoke({"messages": [HumanMessage("charge order 7")]}, thread("order-7"))
    [pause] = out["__interrupt__"]
    assert s.charges == []
    graph = app() if rebuilt else graph
    out = graph.invoke(Command(resume={"approved": True, "by": "alice"}), thread("order-7"))
    assert "__interrupt__" not in out and out["messages"][-1].content == "paid"
    assert s.charges == [("4242", 500)]
    first, second = answers(out)
    assert first["data"]["charged"] == 500 and second["replayed"] is True
    [request] = s.rt.approvals.list(status=None)
    assert request.id == pause.value["request_id"] and request.decided_by == "alice"
    [entry] = s.rt.ledger.list()
    assert entry.state == "committed" and entry.run_id == thread_run_id("order-7")
    assert turns(s.rt, entry.run_id) == 1


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("rebuilt", [False, True], ids=["same-graph", "graph-built-again"])
def test_a_write_beside_an_interrupted_call_is_not_sent_again_on_resume(rebuilt: bool, mode: str) -> None:
    """LangGraph runs the whole tools node again on resume: the write that ran before the
    interrupt is proposed again there, in its turn, and replayed."""
    s = shop()
    mailed: list[str] = []

    @s.rt.tool(effect="write", writes=["mail:{to}"])
    def send(to: str, text: str) -> dict[str, Any]:
        """Send a message."""
        mailed.append(to)
        return {"sent": to}

    def agent(messages: list[AnyMessage]) -> AIMessage:
        if isinstance(messages[-1], ToolMessage):
            return AIMessage("done")
        return AIMessage(content="", tool_calls=[call("m1", "send", HI), call("c1", "charge", CHARGE)])

    saver = InMemorySaver()

    def app() -> Any:
        g = StateGraph(MessagesState)
        g.add_node("agent", lambda state: {"messages": [agent(state["messages"])]})
        g.add_node("tools", governed_tool_node(s.rt))
        g.add_edge(START, "agent")
        g.add_conditional_edges("agent", governed_tools_condition)
        g.add_edge("tools", "agent")
        return g.compile(checkpointer=saver)

    def invoke(graph: Any, given: Any) -> Any:
        if mode == "sync":
            return graph.invoke(given, thread("t"))
        return asyncio.run(graph.ainvoke(given, thread("t")))

    graph = app()
    out = invoke(graph, {"messages": [HumanMessage("mail bob, then charge")]})
    assert out["__interrupt__"]
    # Async, the node's calls run together and the interrupt ends the node: a send whose worker
    # thread had not begun it yet is withdrawn (never sent), one it began ran. Sync, it ran first.
    sent_before = list(mailed)
    assert sent_before == ["bob"] or (mode == "async" and sent_before == [])
    out = invoke(app() if rebuilt else graph, Command(resume=True))
    assert mailed == ["bob"] and s.charges == [("4242", 500)]
    mail, charge = answers(out)
    assert mail["data"] == {"sent": "bob"} and charge["data"]["charged"] == 500
    assert bool(mail.get("replayed")) is bool(sent_before)  # sent once: before the interrupt, or now


def test_a_graph_without_a_thread_id_acts_in_the_run_of_its_tools_as_before() -> None:
    rt, sent = mailer()
    app = compiled(ToolNode(governed_tools(rt, run_id="r1")), checkpointer=False)
    app.invoke({"messages": [HumanMessage("send bob hi")]})
    app.invoke({"messages": [HumanMessage("send bob hi")]})
    assert {e.run_id for e in rt.ledger.list()} == {"r1"}
    assert turns(rt, "r1") == 0 and sent == [("bob", "hi")]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    ids=st.lists(
        st.one_of(st.text(max_size=20), st.integers(), st.just("a:b"), st.just("\ud800")),
        min_size=2,
        max_size=4,
        unique_by=str,
    )
)
def test_any_thread_ids_name_runs_of_their_own(ids: list[Any]) -> None:
    """Whatever a thread id is (text, a number, a lone surrogate), the tool invoked with it answers
    and acts in that thread's run; two thread ids never share a run."""
    rt, sent = mailer()
    [tool] = governed_tools(rt)
    for thread_id in ids:
        message = tool.invoke(call("p1", "send", HI), thread(thread_id))
        assert isinstance(message, ToolMessage)
        assert json.loads(str(message.content))["status"] == "ok"
    assert len(sent) == len(ids) and ledger_runs(rt) == sorted(thread_run_id(t) for t in ids)
