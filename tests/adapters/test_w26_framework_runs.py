"""One framework run is one actionspace run (or, with ``run_id`` given, one user turn of it): the
same tools, reused by every run of an agent as agent builders do, never replay one run's write as
another run's answer, while a run resumed (approvals, deferred tools) or a call re-proposed within
a run still commits once."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

pytest.importorskip("agents")
pytest.importorskip("pydantic_ai")

from agents import Agent as OpenAIAgent
from agents import Runner
from pydantic_ai import Agent, DeferredToolRequests
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from actionspace import Runtime
from actionspace.adapters.openai_agents import governed_tools
from actionspace.adapters.pydantic_ai import GovernedToolset
from tests.adapters.framework_tools import shop
from tests.adapters.test_openai_agents import OFFLINE, ScriptedModel, call, say, tool_outputs

HI = {"to": "bob", "text": "hi"}


def mailer() -> tuple[Runtime, list[tuple[str, str]]]:
    rt = Runtime("memory://")
    sent: list[tuple[str, str]] = []

    @rt.tool(effect="write", writes=["mail:{to}"])
    async def send(to: str, text: str) -> dict[str, Any]:
        """Send a message."""
        sent.append((to, text))
        return {"sent": len(sent)}

    return rt, sent


def user_words(rt: Runtime, run_id: str) -> list[str]:
    """The user's words recorded in the run, a provenance source for later arguments."""
    return [e.data["text"] for e in rt.trace.events(run_id) if e.kind == "user_input"]


def returns(messages: list[ModelMessage]) -> list[ToolReturnPart]:
    return [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]


def send_once(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Sends hi to bob once per user prompt of the conversation, then answers."""
    if isinstance(messages[-1].parts[-1], ToolReturnPart):
        return ModelResponse(parts=[TextPart("sent")])
    asked = sum(p.part_kind == "user-prompt" for m in messages for p in m.parts)
    return ModelResponse(parts=[ToolCallPart("send", HI, tool_call_id=f"p{asked}")])


def ledger_runs(rt: Runtime) -> list[str]:
    return sorted(e.run_id for e in rt.ledger.list())


def test_pydantic_ai_runs_of_one_toolset_without_a_run_id_are_separate_runs() -> None:
    rt, sent = mailer()
    agent = Agent(FunctionModel(send_once), toolsets=[GovernedToolset(rt).toolset])
    first = agent.run_sync("send bob hi")
    second = agent.run_sync("send bob hi")
    assert sent == [("bob", "hi"), ("bob", "hi")]
    for result in (first, second):
        [ret] = returns(result.all_messages())
        assert "replayed" not in json.loads(str(ret.content))
    first_run, second_run = ledger_runs(rt)
    assert first_run != second_run


def test_pydantic_ai_each_user_prompt_of_a_named_run_is_a_new_turn() -> None:
    rt, sent = mailer()
    toolset = GovernedToolset(rt, run_id="conv")
    agent = Agent(FunctionModel(send_once), toolsets=[toolset.toolset])
    first = agent.run_sync("send bob hi")
    agent.run_sync("and once more", message_history=first.all_messages())
    assert sent == [("bob", "hi"), ("bob", "hi")]
    assert ledger_runs(rt) == ["conv", "conv"]
    assert [e.kind for e in rt.trace.events("conv")].count("user_turn") == 2
    assert user_words(rt, "conv") == ["send bob hi", "and once more"]
    assert toolset.run_id == "conv"


def test_pydantic_ai_concurrent_runs_of_one_toolset_each_send_their_own() -> None:
    rt, sent = mailer()
    agent = Agent(FunctionModel(send_once), toolsets=[GovernedToolset(rt).toolset])

    async def both() -> list[Any]:
        return list(await asyncio.gather(agent.run("send bob hi"), agent.run("send bob hi")))

    asyncio.run(both())
    assert sent == [("bob", "hi"), ("bob", "hi")]
    assert len(set(ledger_runs(rt))) == 2


def test_pydantic_ai_a_resumed_run_without_a_run_id_stays_in_its_run() -> None:
    s = shop()
    toolset = GovernedToolset(s.rt)
    charge = {"card": "4242", "cents": 500}

    def charge_twice(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        done = len(returns(messages))
        if done < 2:
            return ModelResponse(parts=[ToolCallPart("charge", charge, tool_call_id=f"c{done + 1}")])
        return ModelResponse(parts=[TextPart("paid")])

    agent = Agent(
        FunctionModel(charge_twice), toolsets=[toolset.toolset], output_type=[str, DeferredToolRequests]
    )
    held = agent.run_sync("charge order 7")
    assert isinstance(held.output, DeferredToolRequests)
    answers = toolset.decide(held.output, {"c1": True}, by="alice")
    result = agent.run_sync(message_history=held.all_messages(), deferred_tool_results=answers)
    assert result.output == "paid" and s.charges == [("4242", 500)]
    [request] = s.rt.approvals.list(status=None)
    assert request.decided_by == "alice" and request.status == "consumed"
    [entry] = s.rt.ledger.list()
    assert entry.run_id == toolset.run_id


def agents_send(call_id: str) -> ScriptedModel:
    return ScriptedModel([[call(call_id, "send", HI)], [say("sent")]])


def test_openai_agents_runs_of_the_same_tools_without_a_run_id_are_separate_runs() -> None:
    rt, sent = mailer()
    tools = governed_tools(rt)

    async def twice() -> list[Any]:
        first = await Runner.run(
            OpenAIAgent(name="a", model=agents_send("call_1"), tools=tools), "send bob hi", run_config=OFFLINE
        )
        second = await Runner.run(
            OpenAIAgent(name="a", model=agents_send("call_2"), tools=tools), "send bob hi", run_config=OFFLINE
        )
        return [first, second]

    results = asyncio.run(twice())
    assert sent == [("bob", "hi"), ("bob", "hi")]
    for result in results:
        [output] = tool_outputs(result)
        assert "replayed" not in json.loads(output)
    first_run, second_run = ledger_runs(rt)
    assert first_run != second_run


def test_openai_agents_each_run_in_a_named_run_is_a_new_turn() -> None:
    rt, sent = mailer()
    tools = governed_tools(rt, run_id="conv")

    async def twice() -> None:
        first = await Runner.run(
            OpenAIAgent(name="a", model=agents_send("call_1"), tools=tools), "send bob hi", run_config=OFFLINE
        )
        follow_up: list[Any] = [*first.to_input_list(), {"role": "user", "content": "once more"}]
        await Runner.run(
            OpenAIAgent(name="a", model=agents_send("call_2"), tools=tools), follow_up, run_config=OFFLINE
        )

    asyncio.run(twice())
    assert sent == [("bob", "hi"), ("bob", "hi")]
    assert ledger_runs(rt) == ["conv", "conv"]
    assert user_words(rt, "conv") == ["send bob hi", "once more"]


def test_openai_agents_a_run_resumed_from_its_state_without_a_run_id_commits_once() -> None:
    s = shop()
    charge = {"card": "4242", "cents": 500}
    model = ScriptedModel([[call("c1", "charge", charge)], [call("c2", "charge", charge)], [say("paid")]])
    agent = OpenAIAgent(name="till", model=model, tools=governed_tools(s.rt))

    async def run() -> Any:
        result = await Runner.run(agent, "charge order 7", run_config=OFFLINE)
        while result.interruptions:
            state = result.to_state()
            for item in result.interruptions:
                state.approve(item)
            result = await Runner.run(agent, state, run_config=OFFLINE)
        return result

    result = asyncio.run(run())
    assert result.final_output == "paid" and s.charges == [("4242", 500)]
    _, second = tool_outputs(result)
    assert json.loads(second)["replayed"] is True
    [entry] = s.rt.ledger.list()
    assert entry.state == "committed"


def test_openai_agents_a_run_resumed_from_serialized_state_by_new_tools_commits_once() -> None:
    """A resume elsewhere (a new process builds its tools again) finds the run by its first call id
    and stays in its turn: the charge re-proposed after the resume is replayed, not sent again."""
    from agents import RunState

    s = shop()
    charge = {"card": "4242", "cents": 500}
    model = ScriptedModel([[call("c1", "charge", charge)], [call("c2", "charge", charge)], [say("paid")]])

    async def run() -> Any:
        agent = OpenAIAgent(name="till", model=model, tools=governed_tools(s.rt))
        result = await Runner.run(agent, "charge order 7", run_config=OFFLINE)
        while result.interruptions:
            saved = result.to_state().to_json()
            agent = OpenAIAgent(name="till", model=model, tools=governed_tools(s.rt))
            state = await RunState.from_json(agent, saved)
            for item in state.get_interruptions():
                state.approve(item)
            result = await Runner.run(agent, state, run_config=OFFLINE)
        return result

    result = asyncio.run(run())
    assert result.final_output == "paid" and s.charges == [("4242", 500)]
    [entry] = s.rt.ledger.list()
    assert entry.state == "committed"
