"""An approval given in the OpenAI Agents SDK approves the call under the definition the person was
shown, never under one the tool got between the interruption and the resume (a deploy between
them, or the same process defining the tool again): that call is held again, or refused with a
typed error, and nothing runs. Driven by the real SDK with a scripted model."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents")

from agents import Agent, Runner
from agents import RunState as SDKRunState
from agents.items import TResponseOutputItem

from actionspace import Runtime
from actionspace.adapters.openai_agents import governed_tools
from tests.adapters.test_openai_agents import OFFLINE, ScriptedModel, call, say, tool_outputs

CHARGE = {"card": "4242", "cents": 500}
SCHEMA = {
    "type": "object",
    "properties": {"card": {"type": "string"}, "cents": {"type": "integer"}},
    "required": ["card", "cents"],
}

Charges = list[tuple[str, str, int]]
SHOWN = "Charge a card, in cents./write"
"""What the charge of the definition the person was shown records."""


def define(rt: Runtime, charges: Charges, *, how: str, version: str = "1", effect: str = "write") -> None:
    """``charge`` as ``how`` describes it; each definition's function records as ``how/effect``."""

    def charge(card: str, cents: int) -> dict[str, Any]:
        charges.append((f"{how}/{effect}", card, cents))
        return {"charged": cents, "card": card}

    rt.add_tool(
        name="charge",
        version=version,
        description=how,
        input_schema=SCHEMA,
        fn=charge,
        effect=effect,
        writes=["card:{card}"],
        requires_approval=True,
    )


def model() -> ScriptedModel:
    return ScriptedModel([[call("c1", "charge", CHARGE)], [say("done")]])


async def interrupted(rt: Runtime, run_id: str | None) -> str:
    """The run stopped for the SDK's approval of the charge, approved there, saved as JSON text."""
    agent = Agent(name="till", model=model(), tools=governed_tools(rt, run_id=run_id))
    result = await Runner.run(agent, "charge order 7", run_config=OFFLINE)
    assert len(result.interruptions) == 1
    state = result.to_state()
    state.approve(result.interruptions[0])
    return state.to_string()


async def resumed(rt: Runtime, run_id: str | None, saved: str) -> Any:
    """A worker resuming ``saved`` with the tools it builds itself."""
    agent = Agent(name="till", model=model(), tools=governed_tools(rt, run_id=run_id))
    state = await SDKRunState.from_string(agent, saved)
    return await Runner.run(agent, state, run_config=OFFLINE)


def _replaced(rt: Runtime) -> None:
    """``charge@1`` gone from the catalog, so that another definition takes its version label."""
    if "charge@1" in rt.catalog:
        rt.catalog.retire("charge@1")
        rt.catalog.drop("charge@1")


def same_label(rt: Runtime, charges: Charges) -> None:
    """The same ``charge@1``, its description changed (a server numbering its versions anew)."""
    _replaced(rt)
    define(rt, charges, how="Charge a card, in dollars.")


def new_version(rt: Runtime, charges: Charges) -> None:
    if "charge@1" not in rt.catalog:  # a deploy keeps the earlier version beside the new one
        define(rt, charges, how="Charge a card, in cents.")
    define(rt, charges, how="Charge a card, in dollars.", version="2")


def other_effect(rt: Runtime, charges: Charges) -> None:
    """Same description and schema, another effect: the definition the person saw is not this one."""
    _replaced(rt)
    define(rt, charges, how="Charge a card, in cents.", effect="external")


CHANGES: dict[str, Callable[[Runtime, Charges], None]] = {
    "same-version-label": same_label,
    "new-version": new_version,
    "other-effect": other_effect,
}


@pytest.mark.parametrize("change", list(CHANGES))
@pytest.mark.parametrize("run_id", [None, "conv-1"])
@pytest.mark.parametrize("where", ["same-process", "other-process"])
def test_a_tool_redefined_before_the_resume_does_not_run_on_the_earlier_approval(
    tmp_path: Path, change: str, run_id: str | None, where: str
) -> None:
    charges: Charges = []
    path = tmp_path / "as.db"
    rt = Runtime(f"sqlite:///{path}")
    define(rt, charges, how="Charge a card, in cents.")
    saved = asyncio.run(interrupted(rt, run_id))
    assert charges == []

    # a deploy between the interruption and the resume, or the same process defining it again
    resumer = Runtime(f"sqlite:///{path}") if where == "other-process" else rt
    CHANGES[change](resumer, charges)

    result = asyncio.run(resumed(resumer, run_id, saved))
    [output] = tool_outputs(result)
    answer = json.loads(output)
    redefined = [c for c in charges if c[0] != SHOWN]
    assert redefined == []  # the definition nobody approved never ran
    if charges:  # only the very definition shown may run: the run kept the version it was offered
        assert change == "new-version" and charges == [(SHOWN, "4242", 500)]
        assert answer["status"] == "ok"
    else:
        assert answer["error"]["category"] in ("needs_approval", "version_mismatch")
        decided = resumer.approvals.list(status=None)
        assert [r.status for r in decided if r.status != "pending"] == []


@pytest.mark.parametrize("run_id", [None, "conv-1"])
@pytest.mark.parametrize("where", ["same-process", "other-process"])
def test_an_unchanged_tool_runs_once_on_the_sdk_approval(
    tmp_path: Path, run_id: str | None, where: str
) -> None:
    """The control: nothing redefined, the approval given in the SDK runs the call, once."""
    charges: Charges = []
    path = tmp_path / "as.db"
    rt = Runtime(f"sqlite:///{path}")
    define(rt, charges, how="Charge a card, in cents.")
    saved = asyncio.run(interrupted(rt, run_id))
    resumer = rt
    if where == "other-process":
        resumer = Runtime(f"sqlite:///{path}")
        define(resumer, charges, how="Charge a card, in cents.")
    result = asyncio.run(resumed(resumer, run_id, saved))
    [output] = tool_outputs(result)
    assert json.loads(output)["data"] == {"charged": 500, "card": "4242"}
    assert charges == [(SHOWN, "4242", 500)]
    [request] = resumer.approvals.list(status=None)
    assert request.status == "consumed" and request.decided_by == "openai-agents"


def test_the_held_call_names_the_request_filed_when_the_sdk_asked(tmp_path: Path) -> None:
    """Held again, the call is on a request of its own for the new definition, which names the one
    filed when the SDK asked; deciding that one in ``rt.approvals`` runs the call as now defined."""
    charges: Charges = []
    rt = Runtime(f"sqlite:///{tmp_path / 'as.db'}")
    define(rt, charges, how="Charge a card, in cents.")
    saved = asyncio.run(interrupted(rt, "conv-1"))
    [asked] = rt.approvals.list()  # filed when the SDK asked, for the definition shown then
    same_label(rt, charges)
    result = asyncio.run(resumed(rt, "conv-1", saved))
    [output] = tool_outputs(result)
    error = json.loads(output)["error"]
    assert error["category"] == "needs_approval" and asked.id in error["message"]
    [held] = [r for r in rt.approvals.list() if r.id != asked.id]
    assert held.details.get("definition_changed_since") == asked.id
    assert held.definition != asked.definition
    rt.approvals.approve(held.id, by="ops")
    again = rt.call({"name": "charge", "arguments": CHARGE}, run_id="conv-1")
    assert again.ok and charges == [("Charge a card, in dollars./write", "4242", 500)]


@pytest.mark.parametrize("redefined", [False, True])
def test_an_approval_for_every_call_of_a_tool_is_for_the_definition_shown(
    tmp_path: Path, redefined: bool
) -> None:
    """``always_approve``: a later call of the tool in the SDK run, never asked about, runs on it
    while the tool is as the person saw it; once the tool is defined again, neither call runs."""
    charges: Charges = []
    rt = Runtime(f"sqlite:///{tmp_path / 'as.db'}")
    define(rt, charges, how="Charge a card, in cents.")
    turns: list[list[TResponseOutputItem]] = [
        [call("c1", "charge", CHARGE)],
        [call("c2", "charge", {"card": "4242", "cents": 700})],
        [say("ok")],
    ]

    async def run() -> Any:
        agent = Agent(name="till", model=ScriptedModel(turns), tools=governed_tools(rt, run_id="conv-1"))
        result = await Runner.run(agent, "charge twice", run_config=OFFLINE)
        state = result.to_state()
        state.approve(result.interruptions[0], always_approve=True)
        saved = state.to_string()
        if redefined:
            same_label(rt, charges)
        again = Agent(name="till", model=ScriptedModel(turns[1:]), tools=governed_tools(rt, run_id="conv-1"))
        return await Runner.run(again, await SDKRunState.from_string(again, saved), run_config=OFFLINE)

    result = asyncio.run(run())
    answers = [json.loads(output) for output in tool_outputs(result)]
    if redefined:
        assert charges == []
        assert [a["error"]["category"] for a in answers] == ["needs_approval", "needs_approval"]
    else:
        assert charges == [(SHOWN, "4242", 500), (SHOWN, "4242", 700)]
        assert [a["status"] for a in answers] == ["ok", "ok"]


def test_a_request_whose_mark_the_store_lost_runs_once_on_the_sdk_approval_in_the_same_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store fails as the SDK asks (the request is filed, marking it is not): the person is
    asked all the same, and the mark, kept in memory, is written as the approved call comes back:
    the answer decides the very request the SDK asked about, and the charge runs once."""
    charges: Charges = []
    rt = Runtime(f"sqlite:///{tmp_path / 'as.db'}")
    define(rt, charges, how="Charge a card, in cents.")
    store = rt.approvals.store

    def down(*args: Any, **kwargs: Any) -> Any:
        raise OSError("disk I/O error")

    monkeypatch.setattr(store, "update", down)
    saved = asyncio.run(interrupted(rt, "conv-1"))
    monkeypatch.undo()
    [request] = rt.approvals.list()
    result = asyncio.run(resumed(rt, "conv-1", saved))
    [output] = tool_outputs(result)
    assert json.loads(output)["status"] == "ok" and charges == [(SHOWN, "4242", 500)]
    [after] = rt.approvals.list(status=None)
    assert (after.id, after.status) == (request.id, "consumed")


def test_a_request_the_sdk_asked_about_unmarked_runs_on_the_sdk_approval_elsewhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The mark the store failed to take lived in the memory of the process that asked: a run
    resumed by another runtime (another process) finds the request unmarked, and writes the mark
    from the run's trace (the hold recorded when the SDK asked, under the call's id): the answer
    is about that request, and the call runs on it, once (adapters/_marks.py)."""
    charges: Charges = []
    url = f"sqlite:///{tmp_path / 'as.db'}"
    rt = Runtime(url)
    define(rt, charges, how="Charge a card, in cents.")

    def down(*args: Any, **kwargs: Any) -> Any:
        raise OSError("disk I/O error")

    monkeypatch.setattr(rt.approvals.store, "update", down)
    saved = asyncio.run(interrupted(rt, "conv-1"))
    monkeypatch.undo()
    rt.close()
    rt = Runtime(url)
    define(rt, charges, how="Charge a card, in cents.")
    [request] = rt.approvals.list()
    result = asyncio.run(resumed(rt, "conv-1", saved))
    [output] = tool_outputs(result)
    assert json.loads(output)["status"] == "ok" and charges == [(SHOWN, "4242", 500)]
    [after] = rt.approvals.list(status=None)
    assert (after.id, after.status) == (request.id, "consumed")


def test_a_call_rejected_in_the_sdk_never_runs_and_its_request_is_denied(tmp_path: Path) -> None:
    charges: Charges = []
    rt = Runtime(f"sqlite:///{tmp_path / 'as.db'}")
    define(rt, charges, how="Charge a card, in cents.")

    async def run() -> Any:
        agent = Agent(name="till", model=model(), tools=governed_tools(rt, run_id="conv-1"))
        result = await Runner.run(agent, "charge order 7", run_config=OFFLINE)
        state = result.to_state()
        state.reject(result.interruptions[0])
        return await Runner.run(agent, state, run_config=OFFLINE)

    assert asyncio.run(run()).final_output == "done"
    assert charges == [] and rt.ledger.list() == []
    [request] = rt.approvals.list(status=None)
    assert request.status == "denied" and request.decided_by == "openai-agents"
