"""A call the person rejects in the OpenAI Agents SDK (``RunState.reject``) is denied in
``rt.approvals`` too, with the person's message as its reason: the SDK never calls the tool, so the
adapter reads the rejection from the run's context when the run resumes (in this process or
another), before the model is asked again. Driven by the real SDK with a scripted model."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("agents")

from agents import Agent, Runner
from agents import RunState as SDKRunState
from agents.items import TResponseOutputItem

from actionspace import Runtime
from actionspace._unicode import text_for_postgres
from actionspace.adapters.openai_agents import governed_tools
from tests.adapters.framework_tools import shop, trace_kinds
from tests.adapters.test_openai_agents import OFFLINE, ScriptedModel, call, say, tool_outputs
from tests.proc import run_child

CHARGE = {"card": "4242", "cents": 500}


def fed_back(model: ScriptedModel, call_id: str) -> list[str]:
    """What the model was given as the output of call ``call_id``, in its last request."""
    return [
        str(item.get("output"))
        for item in model.inputs[-1]
        if isinstance(item, dict)
        and item.get("type") == "function_call_output"
        and item["call_id"] == call_id
    ]


def test_a_call_rejected_in_the_sdk_is_denied_with_the_persons_reason() -> None:
    s = shop()
    model = ScriptedModel([[call("c1", "charge", CHARGE)], [say("not paid")]])
    agent = Agent(name="till", model=model, tools=governed_tools(s.rt, run_id="r1"))

    async def run() -> Any:
        result = await Runner.run(agent, "charge order 7", run_config=OFFLINE)
        state = result.to_state()
        state.reject(result.interruptions[0], rejection_message="over budget this month")
        return await Runner.run(agent, state, run_config=OFFLINE)

    result = asyncio.run(run())
    assert result.final_output == "not paid" and s.charges == [] and s.rt.ledger.list() == []
    [request] = s.rt.approvals.list(status=None)
    assert (request.status, request.decided_by, request.decision_reason) == (
        "denied",
        "openai-agents",
        "over budget this month",
    )
    assert fed_back(model, "c1") == ["over budget this month"]  # the model reads the person's words
    assert "approval_decided" in trace_kinds(s, "r1")


def test_a_rejection_without_a_message_is_denied_without_a_reason() -> None:
    s = shop()
    model = ScriptedModel([[call("c1", "charge", CHARGE)], [say("not paid")]])
    agent = Agent(name="till", model=model, tools=governed_tools(s.rt))

    async def run() -> Any:
        result = await Runner.run(agent, "charge order 7", run_config=OFFLINE)
        state = result.to_state()
        state.reject(result.interruptions[0])
        return await Runner.run(agent, state, run_config=OFFLINE)

    asyncio.run(run())
    [request] = s.rt.approvals.list(status=None)
    assert request.status == "denied" and request.decision_reason is None and s.charges == []
    [told] = fed_back(model, "c1")
    assert told and "charged" not in told


def test_a_rejected_call_proposed_again_in_the_run_is_refused_as_denied() -> None:
    """The denial binds the call in its run, as a denial in ``rt.approvals`` does: the model's
    second proposal of the very same charge is answered ``permission_denied`` and never runs, even
    when the person approves it in the SDK."""
    s = shop()
    model = ScriptedModel([[call("c1", "charge", CHARGE)], [call("c2", "charge", CHARGE)], [say("stopped")]])
    agent = Agent(name="till", model=model, tools=governed_tools(s.rt, run_id="r1"))

    async def run() -> Any:
        result = await Runner.run(agent, "charge order 7", run_config=OFFLINE)
        state = result.to_state()
        state.reject(result.interruptions[0], rejection_message="no")
        result = await Runner.run(agent, state, run_config=OFFLINE)
        for item in result.interruptions:
            state = result.to_state()
            state.approve(item)
            result = await Runner.run(agent, state, run_config=OFFLINE)
        return result

    result = asyncio.run(run())
    assert s.charges == []
    answer = json.loads(tool_outputs(result)[-1])
    assert answer["error"]["category"] == "permission_denied" and answer["error"]["recovery"]


def test_of_two_identical_calls_one_approved_one_rejected_the_charge_runs_once() -> None:
    """Both calls of one response hold on one request: the rejection of one does not deny the
    request the other was approved on, and the approved one runs."""
    s = shop()
    model = ScriptedModel([[call("c1", "charge", CHARGE), call("c2", "charge", CHARGE)], [say("done")]])
    agent = Agent(name="till", model=model, tools=governed_tools(s.rt, run_id="r1"))

    async def run() -> Any:
        result = await Runner.run(agent, "charge order 7 once", run_config=OFFLINE)
        first, second = result.interruptions
        state = result.to_state()
        state.approve(first)
        state.reject(second, rejection_message="once is enough")
        return await Runner.run(agent, state, run_config=OFFLINE)

    asyncio.run(run())
    assert s.charges == [("4242", 500)]
    statuses = sorted(r.status for r in s.rt.approvals.list(status=None))
    assert "consumed" in statuses and "pending" not in statuses
    assert fed_back(model, "c2") == ["once is enough"]


def test_a_request_stays_pending_while_another_call_held_on_it_is_undecided() -> None:
    s = shop()
    model = ScriptedModel([[call("c1", "charge", CHARGE), call("c2", "charge", CHARGE)], [say("done")]])
    agent = Agent(name="till", model=model, tools=governed_tools(s.rt, run_id="r1"))

    async def run() -> Any:
        result = await Runner.run(agent, "charge order 7", run_config=OFFLINE)
        first, _ = result.interruptions
        state = result.to_state()
        state.reject(first)
        result = await Runner.run(agent, state, run_config=OFFLINE)  # c2 asked again
        [left] = result.interruptions
        assert [r.status for r in s.rt.approvals.list(status=None)] == ["pending"]
        state = result.to_state()
        state.approve(left)
        return await Runner.run(agent, state, run_config=OFFLINE)

    assert asyncio.run(run()).final_output == "done"
    assert s.charges == [("4242", 500)]


def test_rejecting_every_call_of_a_tool_denies_each_request_the_run_asked_about() -> None:
    s = shop()
    turns: list[list[TResponseOutputItem]] = [
        [call("c1", "charge", CHARGE)],
        [call("c2", "charge", {"card": "4242", "cents": 700})],
        [say("gave up")],
    ]
    model = ScriptedModel(turns)
    agent = Agent(name="till", model=model, tools=governed_tools(s.rt, run_id="r1"))

    async def run() -> Any:
        result = await Runner.run(agent, "charge twice", run_config=OFFLINE)
        state = result.to_state()
        state.reject(result.interruptions[0], always_reject=True)
        return await Runner.run(agent, state, run_config=OFFLINE)

    assert asyncio.run(run()).final_output == "gave up"
    assert s.charges == []
    requests = s.rt.approvals.list(status=None)
    assert requests and {r.status for r in requests} == {"denied"}


def test_a_rejection_of_another_tool_leaves_this_tools_request_alone() -> None:
    """``always_reject`` of ``refund`` rejects, for the SDK, every call id asked of ``refund``:
    the charge approved beside it still runs on its request."""
    s = shop()
    refunds: list[str] = []

    @s.rt.tool(effect="write", writes=["card:{card}"], requires_approval=True)
    def refund(card: str) -> str:
        """Refund a card's last charge."""
        refunds.append(card)
        return "refunded"

    model = ScriptedModel(
        [[call("c1", "charge", CHARGE), call("c2", "refund", {"card": "4242"})], [say("ok")]]
    )
    agent = Agent(name="till", model=model, tools=governed_tools(s.rt, run_id="r1"))

    async def run() -> Any:
        result = await Runner.run(agent, "charge and refund", run_config=OFFLINE)
        charge_item, refund_item = result.interruptions
        state = result.to_state()
        state.approve(charge_item)
        state.reject(refund_item, always_reject=True)
        return await Runner.run(agent, state, run_config=OFFLINE)

    asyncio.run(run())
    assert s.charges == [("4242", 500)] and refunds == []
    by_tool = {r.tool.partition("@")[0]: r.status for r in s.rt.approvals.list(status=None)}
    assert by_tool == {"charge": "consumed", "refund": "denied"}


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(reason=st.text(max_size=40))
def test_any_rejection_message_denies_the_request(reason: str) -> None:
    """Whatever the person typed (U+0000, lone surrogates included), the request is denied and the
    run goes on; the reason is kept as a store can hold it."""
    s = shop()
    model = ScriptedModel([[call("c1", "charge", CHARGE)], [say("not paid")]])
    agent = Agent(name="till", model=model, tools=governed_tools(s.rt, run_id="r1"))

    async def run() -> Any:
        result = await Runner.run(agent, "charge order 7", run_config=OFFLINE)
        state = result.to_state()
        state.reject(result.interruptions[0], rejection_message=reason)
        return await Runner.run(agent, state, run_config=OFFLINE)

    assert asyncio.run(run()).final_output == "not paid"
    [request] = s.rt.approvals.list(status=None)
    assert request.status == "denied" and s.charges == []
    assert request.decision_reason == text_for_postgres(reason)


CHILD = """
import asyncio, json, sys
from agents import Agent, Runner, RunState
from actionspace import Runtime
from actionspace.adapters.openai_agents import governed_tools
from tests.adapters.test_openai_agents import OFFLINE, ScriptedModel, say

url, saved_path = sys.argv[1:3]
rt = Runtime(url, recover_on_start=False)
charges = []

@rt.tool(effect="write", writes=["card:{card}"], requires_approval=True)
def charge(card: str, cents: int) -> dict:
    "Charge a card, in cents."
    charges.append(card)
    return {"charged": cents}

model = ScriptedModel([[say("not paid")]])
agent = Agent(name="till", model=model, tools=governed_tools(rt, run_id="conv-1"))

async def main():
    state = await RunState.from_string(agent, open(saved_path).read())
    return await Runner.run(agent, state, run_config=OFFLINE)

result = asyncio.run(main())
[request] = rt.approvals.list(status=None)
rt.close()
print(json.dumps({"final": result.final_output, "charges": charges, "status": request.status,
                  "reason": request.decision_reason}), flush=True)
"""


def test_a_rejection_resumed_in_another_process_denies_the_request(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'as.db'}"
    rt = Runtime(url)

    @rt.tool(effect="write", writes=["card:{card}"], requires_approval=True)
    def charge(card: str, cents: int) -> dict[str, Any]:
        """Charge a card, in cents."""
        raise AssertionError("never run here")

    model = ScriptedModel([[call("c1", "charge", CHARGE)]])
    agent = Agent(name="till", model=model, tools=governed_tools(rt, run_id="conv-1"))

    async def interrupted() -> str:
        result = await Runner.run(agent, "charge order 7", run_config=OFFLINE)
        state = result.to_state()
        state.reject(result.interruptions[0], rejection_message="card reported stolen")
        return state.to_string()

    saved = tmp_path / "state.json"
    saved.write_text(asyncio.run(interrupted()))
    rt.close()
    done = run_child(CHILD, url, str(saved))
    assert done == {"final": "not paid", "charges": [], "status": "denied", "reason": "card reported stolen"}


def test_an_approval_of_every_call_holds_past_a_thousand_newer_requests(tmp_path: Path) -> None:
    """``always_approve``: the SDK run's later call runs on it however many requests other runs
    filed since the person approved."""
    s = shop()
    turns: list[list[TResponseOutputItem]] = [
        [call("c1", "charge", CHARGE)],
        [call("c2", "charge", {"card": "4242", "cents": 700})],
        [say("ok")],
    ]

    async def run() -> Any:
        agent = Agent(name="till", model=ScriptedModel(turns), tools=governed_tools(s.rt, run_id="conv-1"))
        result = await Runner.run(agent, "charge twice", run_config=OFFLINE)
        state = result.to_state()
        state.approve(result.interruptions[0], always_approve=True)
        saved = state.to_string()
        for n in range(1001):  # other conversations' charges, held for their people
            s.rt.call({"name": "charge", "arguments": {"card": f"c{n}", "cents": 1}}, run_id=f"other-{n}")
        again = Agent(
            name="till", model=ScriptedModel(turns[1:]), tools=governed_tools(s.rt, run_id="conv-1")
        )
        return await Runner.run(again, await SDKRunState.from_string(again, saved), run_config=OFFLINE)

    result = asyncio.run(run())
    assert s.charges == [("4242", 500), ("4242", 700)]
    assert [json.loads(o)["status"] for o in tool_outputs(result)] == ["ok", "ok"]


def test_a_call_rejected_in_a_streamed_run_is_denied() -> None:
    from agents.testing import ScriptedModel as StreamingModel
    from agents.testing import assistant_message, function_call

    s = shop()
    model = StreamingModel([[function_call("charge", CHARGE, call_id="c1")], [assistant_message("not paid")]])
    agent = Agent(name="till", model=model, tools=governed_tools(s.rt, run_id="r1"))

    async def run() -> Any:
        first = Runner.run_streamed(agent, "charge order 7", run_config=OFFLINE)
        async for _ in first.stream_events():
            pass
        state = first.to_state()
        state.reject(first.interruptions[0], rejection_message="not this card")
        resumed = Runner.run_streamed(agent, state, run_config=OFFLINE)
        async for _ in resumed.stream_events():
            pass
        return resumed

    assert asyncio.run(run()).final_output == "not paid" and s.charges == []
    [request] = s.rt.approvals.list(status=None)
    assert (request.status, request.decision_reason) == ("denied", "not this card")
