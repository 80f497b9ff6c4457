"""Two identical calls of one OpenAI Agents response are two actions, also when the person
approves them one at a time and the run is resumed by tools built again (a worker that builds
its agent per request): the SDK hands a resumed call no word of the response it came in, so
which calls make up a response is remembered per runtime, not per set of tools. The approved
second charge was answered ``replayed`` with the first one's result before, never charged.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

pytest.importorskip("agents")

from agents import Agent, Runner, RunState

from actionspace.adapters import openai_agents
from tests.adapters.framework_tools import shop
from tests.adapters.test_openai_agents import OFFLINE, ScriptedModel, call, say, tool_outputs

CHARGE = {"card": "4242", "cents": 500}


def held_ids(result: Any) -> list[str]:
    return [str(getattr(item.raw_item, "call_id", "")) for item in result.interruptions]


def replayed(outputs: list[str]) -> list[bool]:
    return [json.loads(o).get("replayed") is True for o in outputs]


@pytest.mark.parametrize("approved_first", ["c1", "c2"])
@pytest.mark.parametrize("earlier", [False, True], ids=["first-response", "after-an-earlier-response"])
def test_identical_charges_approved_one_by_one_by_rebuilt_tools_are_each_charged_once(
    earlier: bool, approved_first: str
) -> None:
    """In either order of approval: the response's calls keep their places, whichever runs first."""
    s = shop()
    first: list[Any] = [call("c0", "charge", CHARGE)] if earlier else []
    responses: list[list[Any]] = [
        *([first] if earlier else []),
        [call("c1", "charge", CHARGE), call("c2", "charge", CHARGE)],
        [say("paid")],
    ]

    def agent(skip: int) -> Agent[Any]:
        tools = openai_agents.governed_tools(s.rt)  # a worker builds its tools per request
        return Agent(name="till", model=ScriptedModel(responses[skip:]), tools=tools)

    async def run() -> tuple[Any, Any]:
        a = agent(0)
        held = await Runner.run(a, "charge order 7 twice", run_config=OFFLINE)
        if earlier:  # c0, approved, runs alone in its response; the model then proposes c1, c2
            state = held.to_state()
            state.approve(held.interruptions[0])
            held = await Runner.run(a, state, run_config=OFFLINE)
        assert held_ids(held) == ["c1", "c2"]
        state = held.to_state()
        now = held.interruptions[held_ids(held).index(approved_first)]
        state.approve(now)  # the person approves one now, the other later
        held = await Runner.run(a, state, run_config=OFFLINE)
        assert held_ids(held) == [c for c in ("c1", "c2") if c != approved_first]
        saved = held.to_state().to_json()
        outcomes = []
        for _ in range(2):  # resumed by rebuilt tools, then once more from the same saved state
            b = agent(len(responses) - 1)
            again = await RunState.from_json(b, saved)
            for item in again.get_interruptions():
                again.approve(item)
            outcomes.append(await Runner.run(b, again, run_config=OFFLINE))
        return outcomes[0], outcomes[1]

    resumed, retried = asyncio.run(run())
    # c1 is c0's action proposed again in its turn (replayed); c2 is its second occurrence
    assert s.charges == [("4242", 500), ("4242", 500)]
    if approved_first == "c1":
        assert replayed(tool_outputs(resumed))[-2:] == [earlier, False]
    assert replayed(tool_outputs(retried))[-1] is True
    assert len([e for e in s.rt.ledger.list() if e.tool.startswith("charge@")]) == 2
