"""Pydantic AI: a call approved with other arguments (``ToolApproved(override_args=...)``) runs the
edited call, once, and settles the request the person was shown for the model's call: it is
``consumed`` by the edited call, the edit recorded in its details. It is never left pending (listed
forever), never denied (which would refuse a later identical call), and never honoured for the
model's own arguments: proposed again, they are asked about anew."""

from __future__ import annotations

import json
from typing import Any

import pytest

pytest.importorskip("pydantic_ai")

from pydantic_ai import DeferredToolRequests, DeferredToolResults, ToolApproved
from pydantic_ai.messages import ModelResponse, ToolCallPart, ToolReturnPart

from actionspace.adapters.pydantic_ai import GovernedToolset
from tests.adapters.test_w17_pydantic_ai_denials import CHARGE, deferred, shop

EDIT = {"card": "4242", "cents": 300}


def answers_of(result: Any) -> dict[str, Any]:
    return {
        p.tool_call_id: p.content
        for m in result.new_messages()
        for p in m.parts
        if isinstance(p, ToolReturnPart)
    }


@pytest.mark.parametrize("run_id", ["order-7", None])
def test_an_edited_approval_runs_the_edit_once_and_consumes_the_original_request(run_id: str | None) -> None:
    rt, charged = shop()
    governed = GovernedToolset(rt, run_id=run_id)
    agent, result = deferred(governed, "c1")
    original = result.output.metadata["c1"]["request_id"]
    answers = DeferredToolResults(approvals={"c1": ToolApproved(override_args=dict(EDIT))})
    done = agent.run_sync(message_history=result.all_messages(), deferred_tool_results=answers)
    assert done.output == "Done." and charged == [("4242", 300)]
    assert rt.approvals.list() == []  # nothing is left pending
    shown = rt.approvals.get(original)
    assert shown is not None and shown.status == "consumed" and shown.decided_by == "pydantic-ai"
    edited = shown.details["edited"]
    assert edited["arguments"] == EDIT
    ran = rt.approvals.get(edited["request_id"])
    assert ran is not None and ran.status == "consumed" and ran.arguments == EDIT
    assert shown.node_id == ran.node_id  # consumed by the call that ran on it
    kinds = [(e.kind, e.data.get("status")) for e in rt.trace.events(shown.run_id)]
    assert ("approval_decided", "consumed") in kinds


def test_the_models_own_call_proposed_again_after_an_edit_is_asked_about_again() -> None:
    rt, charged = shop()
    governed = GovernedToolset(rt, run_id="order-7")
    agent, result = deferred(governed, "c1")
    answers = DeferredToolResults(approvals={"c1": ToolApproved(override_args=dict(EDIT))})
    done = agent.run_sync(message_history=result.all_messages(), deferred_tool_results=answers)
    again = agent.run_sync(
        message_history=[
            *done.all_messages(),
            ModelResponse(parts=[ToolCallPart("charge", dict(CHARGE), "c2")]),
        ]
    )
    # neither refused as denied nor run on the edited answer: a question of its own
    assert isinstance(again.output, DeferredToolRequests) and charged == [("4242", 300)]
    [pending] = rt.approvals.list()
    assert pending.arguments == CHARGE and pending.id == again.output.metadata["c2"]["request_id"]


def test_an_edit_given_beside_decide_runs_on_the_persons_answer() -> None:
    rt, charged = shop()
    governed = GovernedToolset(rt, run_id="order-7")
    agent, result = deferred(governed, "c1")
    original = result.output.metadata["c1"]["request_id"]
    answers = governed.decide(result.output, {"c1": True}, by="alice", reason="a smaller amount")
    answers.approvals["c1"] = ToolApproved(override_args=dict(EDIT))
    done = agent.run_sync(message_history=result.all_messages(), deferred_tool_results=answers)
    assert done.output == "Done." and charged == [("4242", 300)]
    assert rt.approvals.list() == []
    shown = rt.approvals.get(original)
    assert shown is not None and shown.status == "consumed"
    ran = rt.approvals.get(shown.details["edited"]["request_id"])
    assert ran is not None and (ran.status, ran.decided_by, ran.arguments) == ("consumed", "alice", EDIT)
    # the model's 500 is not approved by alice's answer any more: asked about anew
    again = agent.run_sync(
        message_history=[
            *done.all_messages(),
            ModelResponse(parts=[ToolCallPart("charge", dict(CHARGE), "c2")]),
        ]
    )
    assert isinstance(again.output, DeferredToolRequests) and charged == [("4242", 300)]


def test_an_override_with_the_models_own_arguments_is_a_plain_approval() -> None:
    rt, charged = shop()
    governed = GovernedToolset(rt, run_id="order-7")
    agent, result = deferred(governed, "c1")
    original = result.output.metadata["c1"]["request_id"]
    answers = DeferredToolResults(approvals={"c1": ToolApproved(override_args=dict(CHARGE))})
    done = agent.run_sync(message_history=result.all_messages(), deferred_tool_results=answers)
    assert charged == [("4242", 500)] and rt.approvals.list() == []
    [request] = rt.approvals.list(status=None)
    assert request.id == original and request.status == "consumed" and "edited" not in request.details
    assert json.loads(str(answers_of(done)["c1"]))["status"] == "ok"


def test_an_edit_the_engine_refuses_runs_nothing_and_ends_the_original_saying_so() -> None:
    rt, charged = shop()
    governed = GovernedToolset(rt, run_id="order-7")
    agent, result = deferred(governed, "c1")
    original = result.output.metadata["c1"]["request_id"]
    bad = {"card": "4242", "cents": "three hundred"}
    answers = DeferredToolResults(approvals={"c1": ToolApproved(override_args=bad)})
    done = agent.run_sync(message_history=result.all_messages(), deferred_tool_results=answers)
    answer = json.loads(str(answers_of(done)["c1"]))
    assert answer["error"]["category"] == "invalid_arguments" and answer["error"]["recovery"]
    assert charged == []
    request = rt.approvals.get(original)
    # the person answered it with an edit, which ran nothing: ended, the refusal recorded
    assert request is not None and request.status == "consumed" and rt.approvals.list() == []
    assert request.details["edited"]["refused"]["category"] == "invalid_arguments"


@pytest.mark.parametrize("edit", [True, False])
def test_an_inline_handler_that_approves_with_an_edit_settles_the_original_request(edit: bool) -> None:
    """``HandleDeferredToolCalls`` answers within the run: the edited call runs once and nothing
    stays pending; approved as shown, the call runs on its own request."""
    from pydantic_ai import Agent
    from pydantic_ai.capabilities import HandleDeferredToolCalls

    from tests.adapters.test_w17_pydantic_ai_denials import scripted

    rt, charged = shop()
    governed = GovernedToolset(rt, run_id="order-7")

    def handler(ctx: Any, requests: DeferredToolRequests) -> DeferredToolResults:
        answer = ToolApproved(override_args=dict(EDIT)) if edit else ToolApproved()
        return DeferredToolResults(approvals={p.tool_call_id: answer for p in requests.approvals})

    agent: Agent[None, Any] = Agent(
        scripted("c1"), toolsets=[governed.toolset], capabilities=[HandleDeferredToolCalls(handler)]
    )
    assert agent.run_sync("Charge order 7").output == "Done."
    assert charged == [("4242", 300 if edit else 500)] and rt.approvals.list() == []
    statuses = sorted(r.status for r in rt.approvals.list(status=None))
    assert statuses == (["consumed", "consumed"] if edit else ["consumed"])


CHILD = """
import json, sys
from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults, ToolApproved
from pydantic_ai.messages import ModelMessagesTypeAdapter
from tests.adapters.test_w17_pydantic_ai_denials import scripted, shop
from actionspace.adapters.pydantic_ai import GovernedToolset

url, history_path = sys.argv[1:3]
rt, charged = shop(url)
agent = Agent(scripted("c1"), toolsets=[GovernedToolset(rt).toolset], output_type=[str, DeferredToolRequests])
history = ModelMessagesTypeAdapter.validate_json(open(history_path).read())
edit = ToolApproved(override_args={"card": "4242", "cents": 300})
answers = DeferredToolResults(approvals={"c1": edit})
done = agent.run_sync(message_history=history, deferred_tool_results=answers)
requests = {r.id: (r.status, r.details.get("edited", {}).get("request_id"))
            for r in rt.approvals.list(status=None)}
rt.close()
print(json.dumps({"output": done.output, "charged": charged, "requests": requests}), flush=True)
"""


def test_an_edit_given_to_a_run_resumed_in_another_process_settles_the_original(tmp_path: Any) -> None:
    from pydantic_ai.messages import ModelMessagesTypeAdapter

    from tests.adapters.test_w17_pydantic_ai_denials import shop as stored_shop
    from tests.proc import run_child

    url = f"sqlite:///{tmp_path / 'as.db'}"
    rt, _ = stored_shop(url)
    _, result = deferred(GovernedToolset(rt), "c1")
    original = result.output.metadata["c1"]["request_id"]
    history = tmp_path / "history.json"
    history.write_bytes(ModelMessagesTypeAdapter.dump_json(result.all_messages()))
    rt.close()
    done = run_child(CHILD, url, str(history))
    assert done["output"] == "Done." and done["charged"] == [["4242", 300]]
    requests = done["requests"]
    [edited] = [i for i in requests if i != original]
    assert requests == {original: ["consumed", edited], edited: ["consumed", None]}
