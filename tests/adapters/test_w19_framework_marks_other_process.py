"""A mark the approval store failed to take when a framework asked a person about a call reaches
the store from whichever process resumes the run, and the person's answer given in the framework
decides the request there.

The mark (``<framework run>:<call id>`` on the request) was kept in the memory of the process
that failed to write it, and written again only there: a run resumed in another process (a web
worker other than the one that ran the first turn) found no mark, and the request stayed pending
after the person's "no" (Pydantic AI's ``ToolDenied``, the OpenAI Agents SDK's ``reject``), or the
call stayed held after the SDK's "yes". The held call's request is in the run's trace under the
call's id (``approval_requested``): the resuming process knows the framework run and its call ids,
so it writes the mark from there. Fault injection: an approval store whose mark write fails in the
first process, and a real second process (tests/proc.py) resuming the run.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pydantic_ai")
pytest.importorskip("agents")

from pydantic_ai.messages import ModelMessagesTypeAdapter

from actionspace.adapters._openai_asked import ASKED
from actionspace.adapters._pydantic_denials import DEFERRED
from actionspace.adapters.pydantic_ai import GovernedToolset
from actionspace.approval.requests import ApprovalStore
from tests.adapters.test_w17_pydantic_ai_denials import deferred
from tests.adapters.test_w17_pydantic_ai_denials import shop as pydantic_shop
from tests.proc import run_child
from tests.store_faults import StoreDown


def failing_marks(store: ApprovalStore, key: str) -> list[int]:
    """Makes every write of ``details`` holding ``key`` fail; returns the count of failures."""
    failed = [0]
    update: Callable[..., Any] = store.update

    def failing(request_id: str, expected: Any, request: Any) -> Any:
        if key in request.details:
            failed[0] += 1
            raise StoreDown("the database does not answer")
        return update(request_id, expected, request)

    store.update = failing  # type: ignore[method-assign]
    return failed


PYDANTIC_CHILD = """
import json, sys
from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults, ToolDenied
from pydantic_ai.messages import ModelMessagesTypeAdapter
from tests.adapters.test_w17_pydantic_ai_denials import scripted, shop
from actionspace.adapters.pydantic_ai import GovernedToolset

url, history_path, run_id = sys.argv[1:4]
rt, charged = shop(url)
governed = GovernedToolset(rt, run_id=run_id or None)
agent = Agent(scripted("c1"), toolsets=[governed.toolset], output_type=[str, DeferredToolRequests])
history = ModelMessagesTypeAdapter.validate_json(open(history_path).read())
answers = DeferredToolResults(approvals={"c1": ToolDenied("card reported stolen")})
done = agent.run_sync(message_history=history, deferred_tool_results=answers)
requests = [(r.status, r.decision_reason) for r in rt.approvals.list(status=None)]
rt.close()
print(json.dumps({"output": done.output, "charged": charged, "requests": requests}), flush=True)
"""


@pytest.mark.parametrize("run_id", ["order-7", ""])
def test_a_pydantic_ai_denial_resumed_in_another_process_denies_a_request_whose_mark_was_lost(
    tmp_path: Path, run_id: str
) -> None:
    url = f"sqlite:///{tmp_path / 'as.db'}"
    rt, _ = pydantic_shop(url)
    failed = failing_marks(rt.approvals.store, DEFERRED)
    _, result = deferred(GovernedToolset(rt, run_id=run_id or None), "c1")
    [pending] = rt.approvals.list()
    assert failed[0] >= 1 and DEFERRED not in pending.details  # the mark was lost here
    history = tmp_path / "history.json"
    history.write_bytes(ModelMessagesTypeAdapter.dump_json(result.all_messages()))
    rt.close()  # this process is gone: what it kept in memory with it
    done = run_child(PYDANTIC_CHILD, url, str(history), run_id)
    assert done["output"] == "Done." and done["charged"] == []
    assert done["requests"] == [["denied", "card reported stolen"]]


OPENAI_CHILD = """
import asyncio, json, sys
from agents import Agent, Runner, RunState
from tests.adapters.test_openai_agents import OFFLINE, ScriptedModel, call, say
from tests.adapters.test_w12_openai_resume import shop_on
from actionspace.adapters.openai_agents import governed_tools

path, saved_path = sys.argv[1:3]
charges = []
rt = shop_on(path, charges)
model = ScriptedModel([[call("c1", "charge", {"card": "4242", "cents": 500})], [say("done")]])
agent = Agent(name="till", model=model, tools=governed_tools(rt, run_id="r1"))

async def main():
    state = await RunState.from_string(agent, open(saved_path).read())
    return await Runner.run(agent, state, run_config=OFFLINE)

result = asyncio.run(main())
requests = [(r.status, r.decision_reason) for r in rt.approvals.list(status=None)]
rt.close()
print(json.dumps({"output": result.final_output, "charged": charges, "requests": requests}), flush=True)
"""


@pytest.mark.parametrize("answer", ["reject", "approve"])
def test_an_sdk_answer_resumed_in_another_process_decides_a_request_whose_mark_was_lost(
    tmp_path: Path, answer: str
) -> None:
    import asyncio

    from agents import Agent, Runner

    from actionspace.adapters.openai_agents import governed_tools
    from tests.adapters.test_openai_agents import OFFLINE, ScriptedModel, call, say
    from tests.adapters.test_w12_openai_resume import CHARGE, shop_on

    path = tmp_path / "as.db"
    charges: list[tuple[str, int]] = []
    rt = shop_on(path, charges)
    failed = failing_marks(rt.approvals.store, ASKED)
    model = ScriptedModel([[call("c1", "charge", CHARGE)], [say("done")]])
    agent = Agent(name="till", model=model, tools=governed_tools(rt, run_id="r1"))

    async def first() -> str:
        result = await Runner.run(agent, "charge order 7", run_config=OFFLINE)
        state = result.to_state()
        if answer == "reject":
            state.reject(result.interruptions[0], rejection_message="over budget this month")
        else:
            state.approve(result.interruptions[0])
        return str(state.to_string())

    saved = asyncio.run(first())
    [pending] = rt.approvals.list()
    assert failed[0] >= 1 and ASKED not in pending.details  # the mark was lost here
    rt.close()
    saved_path = tmp_path / "state.json"
    saved_path.write_text(saved)
    done = run_child(OPENAI_CHILD, str(path), str(saved_path))
    assert done["output"] == "done"
    if answer == "reject":
        assert done["charged"] == [] and done["requests"] == [["denied", "over budget this month"]]
    else:
        assert done["charged"] == [["4242", 500]] and [s for s, _ in done["requests"]] == ["consumed"]
