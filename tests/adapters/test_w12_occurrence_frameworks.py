"""Two identical writes in one model message are two actions through every framework adapter,
as in a session: both are sent; the message run again (a resumed graph, a resumed run) replays
both and sends neither a third time; the same message in the next user turn is new actions.

Each framework runs the message's calls one by one through ``Runtime.acall``; the adapter counts
each call's occurrence among the identical calls of its message and passes it on.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

pytest.importorskip("langgraph")
pytest.importorskip("agents")
pytest.importorskip("pydantic_ai")

from agents import Agent as OpenAIAgent
from agents import Runner, RunState
from agents.items import TResponseOutputItem
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.types import Command
from pydantic_ai import Agent, DeferredToolRequests
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from actionspace import Runtime
from actionspace.adapters import langgraph, openai_agents
from actionspace.adapters.pydantic_ai import GovernedToolset
from tests.adapters.framework_tools import Shop, shop
from tests.adapters.test_openai_agents import OFFLINE, ScriptedModel, call, say, tool_outputs

HI = {"to": "bob", "text": "hi"}
CHARGE = {"card": "4242", "cents": 500}


def mailing_shop() -> tuple[Shop, list[str]]:
    """The shared shop (``charge`` needs approval) with ``send``, a write that needs none."""
    s = shop()
    mailed: list[str] = []

    @s.rt.tool(effect="write", writes=["mail:{to}"])
    async def send(to: str, text: str) -> dict[str, Any]:
        """Send a message."""
        mailed.append(to)
        return {"sent": to}

    return s, mailed


def replayed(outputs: list[Any]) -> list[bool]:
    return [json.loads(str(o)).get("replayed") is True for o in outputs]


# ---------------------------------------------------------------- LangGraph


def lc_call(call_id: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "args": args, "id": call_id, "type": "tool_call"}


def graph(rt: Runtime, message: list[dict[str, Any]], saver: InMemorySaver) -> Any:
    """agent → tools → agent; the agent proposes ``message`` once per user message."""

    def agent(state: MessagesState) -> dict[str, Any]:
        messages: list[AnyMessage] = state["messages"]
        if isinstance(messages[-1], ToolMessage):
            return {"messages": [AIMessage("done")]}
        asked = sum(isinstance(m, HumanMessage) for m in messages)
        calls = [{**c, "id": f"{c['id']}-{asked}"} for c in message]
        return {"messages": [AIMessage(content="", tool_calls=calls)]}

    g = StateGraph(MessagesState)
    g.add_node("agent", agent)
    g.add_node("tools", langgraph.governed_tool_node(rt))
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", langgraph.governed_tools_condition)
    g.add_edge("tools", "agent")
    return g.compile(checkpointer=saver)


def lc_answers(out: dict[str, Any]) -> list[Any]:
    return [m.content for m in out["messages"] if isinstance(m, ToolMessage)]


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("rebuilt", [False, True], ids=["same-graph", "graph-built-again"])
def test_langgraph_a_resumed_graph_replays_both_identical_writes(rebuilt: bool, mode: str) -> None:
    """LangGraph runs the whole tools node again on resume: both sends are proposed again in
    their turn, each as the same occurrence, and both are replayed."""
    s, mailed = mailing_shop()
    message = [lc_call("m1", "send", HI), lc_call("m2", "send", HI), lc_call("c1", "charge", CHARGE)]
    saver = InMemorySaver()
    config: Any = {"configurable": {"thread_id": "t"}}

    def invoke(app: Any, given: Any) -> Any:
        if mode == "sync":
            return app.invoke(given, config)
        return asyncio.run(app.ainvoke(given, config))

    app = graph(s.rt, message, saver)
    out = invoke(app, {"messages": [HumanMessage("mail bob twice, then charge")]})
    assert out["__interrupt__"] and mailed == ["bob", "bob"]
    out = invoke(graph(s.rt, message, saver) if rebuilt else app, Command(resume=True))
    assert mailed == ["bob", "bob"] and s.charges == [("4242", 500)]
    first, second, charged = lc_answers(out)
    assert replayed([first, second]) == [True, True]
    assert json.loads(str(charged))["data"]["charged"] == 500
    assert len([e for e in s.rt.ledger.list() if e.tool.startswith("send@")]) == 2


def test_langgraph_the_same_message_in_the_next_user_turn_is_new_actions() -> None:
    s, mailed = mailing_shop()
    app = graph(s.rt, [lc_call("m1", "send", HI), lc_call("m2", "send", HI)], InMemorySaver())
    config: Any = {"configurable": {"thread_id": "t"}}
    app.invoke({"messages": [HumanMessage("mail bob twice")]}, config)
    out = app.invoke({"messages": [HumanMessage("and twice more")]}, config)
    assert mailed == ["bob"] * 4
    assert replayed(lc_answers(out)) == [False] * 4


# ---------------------------------------------------------------- OpenAI Agents


def test_openai_agents_a_response_with_two_identical_writes_sends_both() -> None:
    s, mailed = mailing_shop()
    model = ScriptedModel([[call("a1", "send", HI), call("a2", "send", HI)], [say("sent")]])
    agent = OpenAIAgent(name="a", model=model, tools=openai_agents.governed_tools(s.rt))
    result = asyncio.run(Runner.run(agent, "tell bob hi, twice", run_config=OFFLINE))
    assert mailed == ["bob", "bob"]
    assert replayed(tool_outputs(result)) == [False, False]


def test_openai_agents_a_later_response_proposing_the_write_again_is_replayed() -> None:
    """Within one user turn, a write the model proposes again in a later response is the one
    already committed (its first occurrence), as in a session."""
    s, mailed = mailing_shop()
    model = ScriptedModel(
        [[call("a1", "send", HI), call("a2", "send", HI)], [call("a3", "send", HI)], [say("sent")]]
    )
    agent = OpenAIAgent(name="a", model=model, tools=openai_agents.governed_tools(s.rt))
    result = asyncio.run(Runner.run(agent, "tell bob hi, twice", run_config=OFFLINE))
    assert mailed == ["bob", "bob"]
    assert replayed(tool_outputs(result)) == [False, False, True]


def test_openai_agents_a_run_resumed_twice_from_one_state_charges_each_occurrence_once() -> None:
    """Two identical charges in one response, both approved: resumed from the saved state they
    are charged once each; the same state resumed again (a retry) replays both."""
    s = shop()
    tools = openai_agents.governed_tools(s.rt)
    model_turns: list[list[TResponseOutputItem]] = [
        [call("c1", "charge", CHARGE), call("c2", "charge", CHARGE)],
        [say("paid")],
    ]

    async def run() -> list[Any]:
        agent = OpenAIAgent(name="till", model=ScriptedModel(model_turns), tools=tools)
        held = await Runner.run(agent, "charge order 7 twice", run_config=OFFLINE)
        assert len(held.interruptions) == 2 and s.charges == []
        saved = held.to_state().to_json()
        results = []
        for _ in range(2):
            again = OpenAIAgent(name="till", model=ScriptedModel(model_turns[1:]), tools=tools)
            state = await RunState.from_json(again, saved)
            for item in state.get_interruptions():
                state.approve(item)
            results.append(await Runner.run(again, state, run_config=OFFLINE))
        return results

    first, second = asyncio.run(run())
    assert s.charges == [("4242", 500), ("4242", 500)]
    assert replayed(tool_outputs(first)) == [False, False]
    assert replayed(tool_outputs(second)) == [True, True]


def test_openai_agents_the_same_response_in_the_next_user_turn_is_new_actions() -> None:
    s, mailed = mailing_shop()
    tools = openai_agents.governed_tools(s.rt, run_id="conv")

    def model(run: int) -> ScriptedModel:
        return ScriptedModel([[call(f"a{run}-1", "send", HI), call(f"a{run}-2", "send", HI)], [say("sent")]])

    async def twice() -> Any:
        first = await Runner.run(
            OpenAIAgent(name="a", model=model(1), tools=tools), "hi bob x2", run_config=OFFLINE
        )
        follow_up: list[Any] = [*first.to_input_list(), {"role": "user", "content": "twice more"}]
        return await Runner.run(
            OpenAIAgent(name="a", model=model(2), tools=tools), follow_up, run_config=OFFLINE
        )

    second = asyncio.run(twice())
    assert mailed == ["bob"] * 4
    assert replayed(tool_outputs(second)) == [False, False]


# ---------------------------------------------------------------- Pydantic AI


def returns(messages: list[ModelMessage]) -> list[ToolReturnPart]:
    return [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]


def twice_per_prompt(name: str, args: dict[str, Any]) -> FunctionModel:
    """Proposes ``name`` twice in one response per user prompt, then answers."""

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if isinstance(messages[-1].parts[-1], ToolReturnPart):
            return ModelResponse(parts=[TextPart("done")])
        asked = sum(p.part_kind == "user-prompt" for m in messages for p in m.parts)
        parts = [ToolCallPart(name, args, tool_call_id=f"p{asked}-{n}") for n in (1, 2)]
        return ModelResponse(parts=list(parts))

    return FunctionModel(model)


def test_pydantic_ai_a_response_with_two_identical_writes_sends_both() -> None:
    s, mailed = mailing_shop()
    agent = Agent(twice_per_prompt("send", HI), toolsets=[GovernedToolset(s.rt).toolset])
    result = agent.run_sync("tell bob hi, twice")
    assert mailed == ["bob", "bob"]
    assert replayed([p.content for p in returns(result.all_messages())]) == [False, False]


def test_pydantic_ai_arguments_spelled_apart_that_name_one_action_are_both_sent() -> None:
    """The count is taken on the arguments as the action is known by: ``500.0`` cents is 500."""
    s = shop()
    toolset = GovernedToolset(s.rt)

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if returns(messages):
            return ModelResponse(parts=[TextPart("done")])
        spelled: list[str | dict[str, Any]] = [CHARGE, '{"cents": 500.0, "card": "4242"}']
        return ModelResponse(
            parts=[ToolCallPart("charge", a, tool_call_id=f"c{n}") for n, a in enumerate(spelled)]
        )

    agent = Agent(FunctionModel(model), toolsets=[toolset.toolset], output_type=[str, DeferredToolRequests])
    held = agent.run_sync("charge 500 twice")
    assert isinstance(held.output, DeferredToolRequests)
    answers = toolset.decide(held.output, {"c0": True, "c1": True}, by="alice")
    agent.run_sync(message_history=held.all_messages(), deferred_tool_results=answers)
    assert s.charges == [("4242", 500), ("4242", 500)]


def test_pydantic_ai_a_run_resumed_twice_with_the_same_answers_charges_each_occurrence_once() -> None:
    s = shop()
    toolset = GovernedToolset(s.rt)
    agent = Agent(
        twice_per_prompt("charge", CHARGE),
        toolsets=[toolset.toolset],
        output_type=[str, DeferredToolRequests],
    )
    held = agent.run_sync("charge order 7 twice")
    assert isinstance(held.output, DeferredToolRequests) and len(held.output.approvals) == 2
    answers = toolset.decide(held.output, {"p1-1": True, "p1-2": True}, by="alice")
    first = agent.run_sync(message_history=held.all_messages(), deferred_tool_results=answers)
    second = agent.run_sync(message_history=held.all_messages(), deferred_tool_results=answers)
    assert s.charges == [("4242", 500), ("4242", 500)]
    assert replayed([p.content for p in returns(first.new_messages())]) == [False, False]
    assert replayed([p.content for p in returns(second.new_messages())]) == [True, True]


def test_pydantic_ai_the_same_response_in_the_next_user_turn_is_new_actions() -> None:
    s, mailed = mailing_shop()
    agent = Agent(twice_per_prompt("send", HI), toolsets=[GovernedToolset(s.rt, run_id="conv").toolset])
    first = agent.run_sync("tell bob hi, twice")
    second = agent.run_sync("and twice more", message_history=first.all_messages())
    assert mailed == ["bob"] * 4
    assert replayed([p.content for p in returns(second.new_messages())]) == [False, False]
