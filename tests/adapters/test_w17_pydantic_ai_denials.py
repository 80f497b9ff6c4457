"""Pydantic AI: a call the person denies with Pydantic AI's own deferred tool results (``False`` or
``ToolDenied``, no ``GovernedToolset.decide``) is denied in ``rt.approvals`` too, with the words
given to ``ToolDenied`` as its reason. Pydantic AI never calls the tool of a denied call; the
toolset reads the denial from the run's messages before the model is asked again."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("pydantic_ai")

from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults, ToolDenied
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel

from actionspace import Runtime
from actionspace._unicode import text_for_postgres
from actionspace.adapters.pydantic_ai import GovernedToolset
from tests.proc import run_child

CHARGE = {"card": "4242", "cents": 500}


def shop(url: str = "memory://") -> tuple[Runtime, list[tuple[Any, ...]]]:
    rt = Runtime(url, recover_on_start=False)
    charged: list[tuple[Any, ...]] = []

    @rt.tool(effect="write", writes=["card:{card}"], requires_approval=True)
    def charge(card: str, cents: int) -> dict[str, int]:
        """Charge a card, in cents."""
        charged.append((card, cents))
        return {"charged": cents}

    return rt, charged


def scripted(*calls: str) -> FunctionModel:
    """Proposes the charge once per call id in one response, then answers."""

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if any(isinstance(p, ToolReturnPart) for m in messages for p in m.parts):
            return ModelResponse(parts=[TextPart("Done.")])
        return ModelResponse(parts=[ToolCallPart("charge", dict(CHARGE), tool_call_id=c) for c in calls])

    return FunctionModel(model)


def deferred(governed: GovernedToolset, *calls: str) -> tuple[Agent[None, Any], Any]:
    agent: Agent[None, Any] = Agent(
        scripted(*calls), toolsets=[governed.toolset], output_type=[str, DeferredToolRequests]
    )
    result = agent.run_sync("Charge order 7")
    assert isinstance(result.output, DeferredToolRequests)
    return agent, result


def returned(result: Any) -> dict[str, Any]:
    """What the model was given of each call, by call id, in the resumed run."""
    return {
        p.tool_call_id: (p.outcome, p.content)
        for m in result.new_messages()
        for p in m.parts
        if isinstance(p, ToolReturnPart)
    }


@pytest.mark.parametrize("run_id", ["order-7", None])
def test_a_call_denied_in_pydantic_ai_alone_is_denied_in_the_runtime(run_id: str | None) -> None:
    rt, charged = shop()
    governed = GovernedToolset(rt, run_id=run_id)
    agent, result = deferred(governed, "c1")
    answers = DeferredToolResults(approvals={"c1": False})
    done = agent.run_sync(message_history=result.all_messages(), deferred_tool_results=answers)
    assert done.output == "Done." and charged == []
    [request] = rt.approvals.list(status=None)
    assert (request.status, request.decided_by, request.decision_reason) == ("denied", "pydantic-ai", None)
    assert request.id == result.output.metadata["c1"]["request_id"]
    assert returned(done)["c1"][0] == "denied"


def test_the_words_of_a_tool_denied_are_the_reason_recorded() -> None:
    rt, charged = shop()
    governed = GovernedToolset(rt, run_id="order-7")
    agent, result = deferred(governed, "c1")
    answers = DeferredToolResults(approvals={"c1": ToolDenied("card reported stolen")})
    done = agent.run_sync(message_history=result.all_messages(), deferred_tool_results=answers)
    [request] = rt.approvals.list(status=None)
    assert request.status == "denied" and request.decision_reason == "card reported stolen"
    assert returned(done)["c1"] == ("denied", "card reported stolen") and charged == []


def test_of_two_identical_calls_one_approved_one_denied_the_charge_runs_once() -> None:
    rt, charged = shop()
    governed = GovernedToolset(rt, run_id="order-7")
    agent, result = deferred(governed, "c1", "c2")
    answers = DeferredToolResults(approvals={"c1": True, "c2": ToolDenied("once is enough")})
    agent.run_sync(message_history=result.all_messages(), deferred_tool_results=answers)
    assert charged == [("4242", 500)]
    statuses = [r.status for r in rt.approvals.list(status=None)]
    assert "consumed" in statuses and "pending" not in statuses


def test_a_denied_call_proposed_again_in_the_run_is_refused_as_denied() -> None:
    rt, charged = shop()
    governed = GovernedToolset(rt, run_id="order-7")
    agent, result = deferred(governed, "c1")
    denied = agent.run_sync(
        message_history=result.all_messages(),
        deferred_tool_results=DeferredToolResults(approvals={"c1": False}),
    )
    again = agent.run_sync(
        message_history=[
            *denied.all_messages(),
            ModelResponse(parts=[ToolCallPart("charge", dict(CHARGE), "c2")]),
        ],
        deferred_tool_results=DeferredToolResults(approvals={"c2": True}),
    )
    assert charged == []
    answer = json.loads(str(returned(again)["c2"][1]))
    assert answer["error"]["category"] == "permission_denied" and answer["error"]["recovery"]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(words=st.text(max_size=40))
def test_any_words_of_a_denial_deny_the_request(words: str) -> None:
    rt, charged = shop()
    governed = GovernedToolset(rt, run_id="order-7")
    agent, result = deferred(governed, "c1")
    answers = DeferredToolResults(approvals={"c1": ToolDenied(words)})
    agent.run_sync(message_history=result.all_messages(), deferred_tool_results=answers)
    [request] = rt.approvals.list(status=None)
    assert request.status == "denied" and charged == []
    if words != ToolDenied().message:
        assert request.decision_reason == text_for_postgres(words)


CHILD = """
import json, sys
from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults, ToolDenied
from pydantic_ai.messages import ModelMessagesTypeAdapter
from tests.adapters.test_w17_pydantic_ai_denials import scripted, shop
from actionspace.adapters.pydantic_ai import GovernedToolset

url, history_path = sys.argv[1:3]
rt, charged = shop(url)
governed = GovernedToolset(rt)
agent = Agent(scripted("c1"), toolsets=[governed.toolset], output_type=[str, DeferredToolRequests])
history = ModelMessagesTypeAdapter.validate_json(open(history_path).read())
done = agent.run_sync(message_history=history,
                      deferred_tool_results=DeferredToolResults(approvals={"c1": ToolDenied("not today")}))
[request] = rt.approvals.list(status=None)
rt.close()
print(json.dumps({"output": done.output, "charged": charged, "status": request.status,
                  "reason": request.decision_reason}), flush=True)
"""


def test_a_denial_given_to_a_run_resumed_in_another_process_denies_the_request(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'as.db'}"
    rt, _ = shop(url)
    _, result = deferred(GovernedToolset(rt), "c1")
    history = tmp_path / "history.json"
    history.write_bytes(ModelMessagesTypeAdapter.dump_json(result.all_messages()))
    rt.close()
    done = run_child(CHILD, url, str(history))
    assert done == {"output": "Done.", "charged": [], "status": "denied", "reason": "not today"}


def test_a_denial_given_to_a_streamed_run_denies_the_request() -> None:
    rt, charged = shop()
    governed = GovernedToolset(rt, run_id="order-7")

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        raise AssertionError("streamed only")

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
        if any(isinstance(p, ToolReturnPart) for m in messages for p in m.parts):
            yield "Done."
        else:
            yield {0: DeltaToolCall(name="charge", json_args=json.dumps(CHARGE), tool_call_id="c1")}

    agent: Agent[None, Any] = Agent(
        FunctionModel(model, stream_function=stream),
        toolsets=[governed.toolset],
        output_type=[str, DeferredToolRequests],
    )

    async def run() -> Any:
        async with agent.run_stream("Charge order 7") as first:
            assert isinstance(await first.get_output(), DeferredToolRequests)
            history = first.all_messages()
        answers = DeferredToolResults(approvals={"c1": ToolDenied("not this card")})
        async with agent.run_stream(message_history=history, deferred_tool_results=answers) as resumed:
            return await resumed.get_output()

    assert asyncio.run(run()) == "Done." and charged == []
    [request] = rt.approvals.list(status=None)
    assert (request.status, request.decision_reason) == ("denied", "not this card")
