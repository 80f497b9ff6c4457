"""LangChain's ``HumanInTheLoopMiddleware`` (``create_agent``) listing in ``interrupt_on`` a tool that
also requires approval in actionspace: the person is asked once. The middleware's "approve" (or
"edit": the edited call) of the very call the tool is handed is recorded in ``rt.approvals`` as the
tools' approver, and the call runs on it; a call the middleware rejects never reaches actionspace.
Without the middleware's word on that call (the tool not listed, or the answer not provably about
it) actionspace asks as before. Driven by the real ``create_agent`` with a scripted chat model."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("langchain.agents")

from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from actionspace.adapters.langgraph import governed_tools
from tests.adapters.framework_tools import Shop, shop

CHARGE = {"card": "4242", "cents": 500}


class Scripted(FakeMessagesListChatModel):
    """LangChain's fake chat model, taking the tools ``create_agent`` binds (it ignores them)."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self


def charges(*ids: str, args: dict[str, Any] = CHARGE) -> AIMessage:
    calls = [{"name": "charge", "args": dict(args), "id": i, "type": "tool_call"} for i in ids]
    return AIMessage(content="", tool_calls=calls)


def agent_of(s: Shop, *responses: AIMessage, listed: bool = True, mode: str = "batched") -> Any:
    middleware = HumanInTheLoopMiddleware(
        interrupt_on={"charge": True} if listed else {"lookup": True},
        interrupt_mode=mode,  # type: ignore[arg-type]
    )
    return create_agent(
        Scripted(responses=[*responses, AIMessage(content="Paid.")]),
        tools=governed_tools(s.rt, run_id="order-7"),
        middleware=[middleware],
        checkpointer=InMemorySaver(),
    )


def answer(pause: Any, decision: dict[str, Any]) -> Any:
    """The person's answer to a pause: the middleware's question, or actionspace's."""
    value = pause.value
    if "action_requests" in value:
        return {"decisions": [dict(decision) for _ in value["action_requests"]]}
    if value.get("type") == "tool_approval":
        return {pause.id: dict(decision)}
    return {"approved": decision["type"] != "reject", "request_id": value["request_id"], "by": "alice"}


def drive(agent: Any, decision: dict[str, Any], *, asynchronous: bool = False) -> tuple[list[Any], Any]:
    """Run the agent to its end, giving ``decision`` at every pause; the pauses and the end state."""
    thread: Any = {"configurable": {"thread_id": "t1"}}

    def go(given: Any) -> Any:
        return asyncio.run(agent.ainvoke(given, thread)) if asynchronous else agent.invoke(given, thread)

    out = go({"messages": [HumanMessage("Charge order 7")]})
    pauses: list[Any] = []
    while out.get("__interrupt__") and len(pauses) < 5:
        pauses.extend(out["__interrupt__"])
        resume: dict[str, Any] = {}
        for pause in out["__interrupt__"]:
            resume.update(answer(pause, decision))
        out = go(Command(resume=resume))
    return pauses, out


@pytest.mark.parametrize("mode", ["batched", "per_call"])
@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_call_the_middleware_approved_runs_once_asked_once(mode: str, asynchronous: bool) -> None:
    s = shop()
    pauses, out = drive(agent_of(s, charges("c1"), mode=mode), {"type": "approve"}, asynchronous=asynchronous)
    assert len(pauses) == 1 and "request_id" not in pauses[0].value  # the middleware's question only
    assert s.charges == [("4242", 500)] and out["messages"][-1].content == "Paid."
    [request] = s.rt.approvals.list(status=None)
    assert (request.status, request.decided_by) == ("consumed", "langgraph")
    assert "HumanInTheLoopMiddleware" in str(request.decision_reason)


@pytest.mark.parametrize("mode", ["batched", "per_call"])
def test_a_call_the_middleware_edited_runs_the_edit_once(mode: str) -> None:
    s = shop()
    edit = {"type": "edit", "edited_action": {"name": "charge", "args": {"card": "4242", "cents": 300}}}
    pauses, _ = drive(agent_of(s, charges("c1"), mode=mode), edit)
    assert len(pauses) == 1 and s.charges == [("4242", 300)]
    [request] = s.rt.approvals.list(status=None)
    assert request.status == "consumed" and request.arguments == {"card": "4242", "cents": 300}


@pytest.mark.parametrize("mode", ["batched", "per_call"])
def test_a_call_the_middleware_rejected_never_reaches_actionspace(mode: str) -> None:
    s = shop()
    pauses, out = drive(agent_of(s, charges("c1"), mode=mode), {"type": "reject", "message": "no"})
    assert len(pauses) == 1 and s.charges == [] and s.rt.approvals.list(status=None) == []
    told = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert told and "no" in str(told[-1].content)


def test_a_tool_the_middleware_does_not_list_is_asked_about_by_actionspace() -> None:
    s = shop()
    pauses, _ = drive(agent_of(s, charges("c1"), listed=False), {"type": "approve"})
    assert len(pauses) == 1 and "request_id" in pauses[0].value  # actionspace's question
    assert s.charges == [("4242", 500)]
    [request] = s.rt.approvals.list(status=None)
    assert (request.status, request.decided_by) == ("consumed", "alice")


def test_of_two_identical_calls_one_rejected_in_the_middleware_the_other_is_asked_about_again() -> None:
    """The middleware's answers name no call: one "approve" beside one "reject" of the same call
    does not prove which one reached the tool, so actionspace asks; the charge runs at most once."""
    s = shop()
    agent = agent_of(s, charges("c1", "c2"))
    thread: Any = {"configurable": {"thread_id": "t1"}}
    out = agent.invoke({"messages": [HumanMessage("Charge order 7")]}, thread)
    decisions = [{"type": "approve"}, {"type": "reject", "message": "once is enough"}]
    out = agent.invoke(Command(resume={"decisions": decisions}), thread)
    [pause] = out["__interrupt__"]
    assert "request_id" in pause.value and s.charges == []
    out = agent.invoke(Command(resume={"approved": True, "request_id": pause.value["request_id"]}), thread)
    assert s.charges == [("4242", 500)]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=12,
)
decisions = st.one_of(
    json_values,
    st.fixed_dictionaries({"type": st.sampled_from(["approve", "edit", "reject", "respond", "yes"])}),
    st.fixed_dictionaries(
        {
            "type": st.just("edit"),
            "edited_action": st.fixed_dictionaries({"name": st.just("charge"), "args": json_values}),
        }
    ),
)


@settings(max_examples=200, deadline=None)
@given(shown=st.lists(json_values, max_size=3), said=st.lists(decisions, max_size=3), resume=json_values)
def test_any_kept_question_and_answers_prove_an_approval_only_when_an_answer_approves(
    shown: list[Any], said: list[Any], resume: Any
) -> None:
    """Whatever a checkpoint keeps (the middleware's question and answers of any shape), reading it
    never raises, and proves an approval only when an answer about the call says approve or edits
    into it."""
    from types import SimpleNamespace

    from actionspace.adapters._langgraph_hitl import _per_call, _question

    action = {"name": "charge", "args": dict(CHARGE)}
    message = SimpleNamespace(tool_calls=[{"id": "c1"}])
    question = SimpleNamespace(value={"action_requests": shown, "review_configs": []})
    writes = [
        ("t", "__interrupt__", [question]),
        ("t", "__resume__", [{"decisions": said}]),
        ("t", "messages", [message]),
    ]
    verdict = _question(writes, action, "c1")
    approving = [d for d in said if isinstance(d, dict) and d.get("type") in ("approve", "edit")]
    assert verdict in (True, False) and (not verdict or approving)
    scratch = SimpleNamespace(resume=[resume])
    proven = _per_call({"__pregel_scratchpad": scratch}, action)
    assert not proven or (isinstance(resume, dict) and resume.get("type") in ("approve", "edit"))
