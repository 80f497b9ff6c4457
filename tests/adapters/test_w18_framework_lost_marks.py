"""A framework's "no" (or "yes") given for a call whose request could not be marked when the
framework asked the person (the approval store failing at that moment) still decides that request:
the mark is kept and written again as the run's next turn begins, or as it resumes, before the
framework's answers are read. Fault injection: an approval store whose write fails once."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

pytest.importorskip("agents")
pytest.importorskip("pydantic_ai")

from agents import Agent, Runner
from pydantic_ai import DeferredToolResults, ToolDenied

from actionspace.adapters._openai_asked import ASKED
from actionspace.adapters._pydantic_denials import DEFERRED
from actionspace.adapters.openai_agents import governed_tools
from actionspace.adapters.pydantic_ai import GovernedToolset
from actionspace.approval.requests import ApprovalStore
from tests.adapters.framework_tools import shop
from tests.adapters.test_openai_agents import OFFLINE, ScriptedModel, call, say
from tests.adapters.test_w17_pydantic_ai_denials import deferred
from tests.adapters.test_w17_pydantic_ai_denials import shop as pydantic_shop
from tests.store_faults import StoreDown

CHARGE = {"card": "4242", "cents": 500}


class FailingWrites:
    """Makes the next ``times`` writes of ``details`` holding ``key`` fail (a store gone for a moment)."""

    def __init__(self, store: ApprovalStore, key: str, times: int = 1) -> None:
        self.left = times
        self.failed = 0
        update: Callable[..., Any] = store.update

        def failing(request_id: str, expected: Any, request: Any) -> Any:
            if self.left > 0 and key in request.details:
                self.left -= 1
                self.failed += 1
                raise StoreDown("the database does not answer")
            return update(request_id, expected, request)

        store.update = failing  # type: ignore[method-assign]


def test_an_sdk_rejection_of_a_call_whose_mark_was_lost_denies_its_request() -> None:
    s = shop()
    failing = FailingWrites(s.rt.approvals.store, ASKED)
    model = ScriptedModel([[call("c1", "charge", CHARGE)], [say("not paid")]])
    agent = Agent(name="till", model=model, tools=governed_tools(s.rt, run_id="r1"))

    async def run() -> Any:
        result = await Runner.run(agent, "charge order 7", run_config=OFFLINE)
        [pending] = s.rt.approvals.list()
        assert failing.failed == 1 and ASKED not in pending.details  # the mark was lost
        state = result.to_state()
        state.reject(result.interruptions[0], rejection_message="over budget this month")
        return await Runner.run(agent, state, run_config=OFFLINE)

    result = asyncio.run(run())
    assert result.final_output == "not paid" and s.charges == []
    [request] = s.rt.approvals.list(status=None)
    assert (request.status, request.decision_reason) == ("denied", "over budget this month")


def test_an_sdk_approval_of_a_call_whose_mark_was_lost_runs_it_once() -> None:
    s = shop()
    FailingWrites(s.rt.approvals.store, ASKED)
    model = ScriptedModel([[call("c1", "charge", CHARGE)], [say("paid")]])
    agent = Agent(name="till", model=model, tools=governed_tools(s.rt, run_id="r1"))

    async def run() -> Any:
        result = await Runner.run(agent, "charge order 7", run_config=OFFLINE)
        state = result.to_state()
        state.approve(result.interruptions[0])
        return await Runner.run(agent, state, run_config=OFFLINE)

    result = asyncio.run(run())
    assert result.final_output == "paid" and s.charges == [("4242", 500)]
    [request] = s.rt.approvals.list(status=None)
    assert (request.status, request.decided_by) == ("consumed", "openai-agents")


def test_a_mark_the_store_fails_to_write_again_is_written_at_a_later_look() -> None:
    """The write fails when the SDK asks and again at the first look of the resumed run: the
    rejection is not taken as settled, and a later look (the SDK asks before each model request)
    writes the mark and denies the request."""
    s = shop()
    failing = FailingWrites(s.rt.approvals.store, ASKED, times=2)
    model = ScriptedModel([[call("c1", "charge", CHARGE)], [say("not paid")]])
    agent = Agent(name="till", model=model, tools=governed_tools(s.rt, run_id="r1"))

    async def run() -> None:
        result = await Runner.run(agent, "charge order 7", run_config=OFFLINE)
        state = result.to_state()
        state.reject(result.interruptions[0], rejection_message="no")
        await Runner.run(agent, state, run_config=OFFLINE)

    asyncio.run(run())
    assert failing.failed == 2
    [request] = s.rt.approvals.list(status=None)
    assert (request.status, request.decision_reason) == ("denied", "no") and s.charges == []


def test_a_pydantic_ai_denial_of_a_call_whose_mark_was_lost_denies_its_request() -> None:
    rt, charged = pydantic_shop()
    failing = FailingWrites(rt.approvals.store, DEFERRED)
    governed = GovernedToolset(rt, run_id="order-7")
    agent, result = deferred(governed, "c1")
    [pending] = rt.approvals.list()
    assert failing.failed == 1 and DEFERRED not in pending.details
    answers = DeferredToolResults(approvals={"c1": ToolDenied("card reported stolen")})
    done = agent.run_sync(message_history=result.all_messages(), deferred_tool_results=answers)
    assert done.output == "Done." and charged == []
    [request] = rt.approvals.list(status=None)
    assert (request.status, request.decision_reason) == ("denied", "card reported stolen")
