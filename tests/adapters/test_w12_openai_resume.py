"""The same saved OpenAI Agents ``RunState`` resumed twice (a worker sends the approved write and
crashes before saving the new state; another worker, or this process with tools built again,
resumes the saved state once more) stays in the run's turn: the write is replayed, never sent
again. The decision that an SDK run already began its turn must come from the store, not from
what one set of tools remembers."""

from __future__ import annotations

import asyncio
import itertools
import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents")

from agents import Agent, Runner
from agents import RunState as SDKRunState

from actionspace import Runtime
from actionspace.adapters.openai_agents import governed_tools
from actionspace.discovery.runs import RunState
from actionspace.errors import RunStateError
from actionspace.policy.principal import Principal
from tests.adapters.test_openai_agents import OFFLINE, ScriptedModel, call, say, tool_outputs

CHARGE = {"card": "4242", "cents": 500}


def shop_on(path: Path, charges: list[tuple[str, int]]) -> Runtime:
    """A runtime on the SQLite file ``path`` (another one on the same file is another process)."""
    rt = Runtime(f"sqlite:///{path}")

    @rt.tool(effect="write", writes=["card:{card}"], requires_approval=True)
    def charge(card: str, cents: int) -> dict[str, Any]:
        """Charge a card, in cents."""
        charges.append((card, cents))
        return {"charged": cents, "card": card}

    return rt


def model() -> ScriptedModel:
    return ScriptedModel([[call("c1", "charge", CHARGE)], [say("paid")]])


async def saved_approval(rt: Runtime, run_id: str | None) -> str:
    """The run stopped for the SDK's approval of the charge, approved, saved as JSON text."""
    agent = Agent(name="till", model=model(), tools=governed_tools(rt, run_id=run_id))
    result = await Runner.run(agent, "charge order 7", run_config=OFFLINE)
    assert result.interruptions
    state = result.to_state()
    for item in result.interruptions:
        state.approve(item)
    return state.to_string()


async def resume(rt: Runtime, run_id: str | None, saved: str) -> Any:
    """A worker resuming ``saved`` with tools it builds itself."""
    agent = Agent(name="till", model=model(), tools=governed_tools(rt, run_id=run_id))
    state = await SDKRunState.from_string(agent, saved)
    return await Runner.run(agent, state, run_config=OFFLINE)


@pytest.mark.parametrize("run_id", [None, "conv-1"])
@pytest.mark.parametrize("elsewhere", [False, True], ids=["same-process", "other-process"])
def test_the_same_saved_state_resumed_twice_sends_the_write_once(
    tmp_path: Path, run_id: str | None, elsewhere: bool
) -> None:
    charges: list[tuple[str, int]] = []
    path = tmp_path / "as.db"
    rt = shop_on(path, charges)
    other = shop_on(path, charges) if elsewhere else rt
    if elsewhere and run_id is not None:
        assert other.run_state(run_id).turn == 0  # a worker that has the run open already
    saved = asyncio.run(saved_approval(rt, run_id))

    first = asyncio.run(resume(rt, run_id, saved))  # sends the charge, then "crashes": state not saved
    second = asyncio.run(resume(other, run_id, saved))

    assert charges == [("4242", 500)]
    [sent] = tool_outputs(first)
    assert json.loads(sent)["data"] == {"charged": 500, "card": "4242"}
    [again] = tool_outputs(second)
    assert json.loads(again)["replayed"] is True
    assert second.final_output == "paid"
    [entry] = other.ledger.list()
    assert entry.state == "committed"


def test_a_new_sdk_run_in_a_named_run_after_a_resume_is_still_a_new_turn(tmp_path: Path) -> None:
    """A run given new input (its first call id never seen) begins a new turn as before, even in
    a process that never saw the run: the same charge asked for again is charged again."""
    charges: list[tuple[str, int]] = []
    path = tmp_path / "as.db"
    rt = shop_on(path, charges)
    saved = asyncio.run(saved_approval(rt, "conv-1"))
    asyncio.run(resume(rt, "conv-1", saved))

    other = shop_on(path, charges)

    async def again() -> Any:
        agent = Agent(
            name="till",
            model=ScriptedModel([[call("c9", "charge", CHARGE)], [say("paid")]]),
            tools=governed_tools(other, run_id="conv-1"),
        )
        result = await Runner.run(agent, "charge order 7 again", run_config=OFFLINE)
        state = result.to_state()
        for item in result.interruptions:
            state.approve(item)
        return await Runner.run(agent, state, run_config=OFFLINE)

    result = asyncio.run(again())
    assert charges == [("4242", 500), ("4242", 500)]
    [sent] = tool_outputs(result)
    assert "replayed" not in json.loads(sent)


def test_who_began_the_turn_is_saved_restored_and_merged_with_it() -> None:
    """The marker travels with the turn: a snapshot carries it, a restore reads it, and a merge
    takes the stored one unless a turn began here since (then this process's is the latest)."""
    seq = itertools.count()
    run = RunState("r", Principal(id="p"), seq, turn=1, began="openai-agents:c1")
    data = run.snapshot()
    assert data["began"] == "openai-agents:c1"
    assert RunState.restore("r", data, itertools.count(), 1).began == "openai-agents:c1"
    assert "began" not in RunState("r", Principal(id="p"), itertools.count()).snapshot()

    here = RunState.restore("r", data, itertools.count(), 1)
    here.absorb({**data, "turn": 2, "began": "openai-agents:c7", "rev": 3})
    assert (here.turn, here.began) == (2, "openai-agents:c7")
    mine = RunState.restore("r", data, itertools.count(), 1)
    mine.turn, mine.began = 2, "openai-agents:c8"  # a turn begun here meanwhile
    mine.absorb({**data, "turn": 2, "began": "openai-agents:c7", "rev": 3})
    assert (mine.turn, mine.began) == (3, "openai-agents:c8")
    with pytest.raises(RunStateError):
        RunState.restore("r", {**data, "began": 7}, itertools.count(), 1)
