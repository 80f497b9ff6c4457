"""Identical calls of one model message are counted by the adapters as the validate stage counts
them: after entity binding. Two calls naming one person in two ways (``"bob"`` and his id) are
two occurrences of one action in a session, so both are sent; an adapter that counted them on
the arguments before binding made each the first of its own, and the second was answered
``replayed`` with the first's result, never sent.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

pytest.importorskip("langgraph")
pytest.importorskip("pydantic_ai")

from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from actionspace import Runtime
from actionspace.adapters._identical import occurrences
from actionspace.adapters.pydantic_ai import GovernedToolset
from actionspace.validation.validator import ValidationContext
from tests.adapters.test_w12_occurrence_frameworks import graph, lc_answers, lc_call, replayed, returns

PEOPLE = {"bob": "u-bob", "bob@example.org": "u-bob", "u-bob": "u-bob", "ann": "u-ann", "u-ann": "u-ann"}


def find_person(ctx: ValidationContext, value: Any) -> Sequence[Mapping[str, Any]]:
    rid = PEOPLE.get(str(value))
    return [] if rid is None else [{"id": rid, "label": rid}]


def postal(approval: bool = False) -> tuple[Runtime, list[str]]:
    """``send`` binds ``to`` to a person's id; ``approval``: every send needs a person's decision."""
    rt = Runtime("memory://")
    mailed: list[str] = []

    @rt.tool(effect="write", writes=["mail:{to}"], bindings={"to": find_person}, requires_approval=approval)
    def send(to: str, text: str) -> dict[str, Any]:
        """Send a message."""
        mailed.append(to)
        return {"sent": to}

    @rt.tool(effect="write", writes=["note:{text}"], requires_approval=True)
    def note(text: str) -> dict[str, Any]:
        """Write a note (always held for a decision)."""
        return {"noted": text}

    return rt, mailed


BOB = {"to": "bob", "text": "hi"}
BOB_BY_ID = {"to": "u-bob", "text": "hi"}
BOB_BY_MAIL = {"to": "bob@example.org", "text": "hi"}


def test_a_session_sends_two_calls_naming_one_person_in_two_ways_twice() -> None:
    """What the adapters must match: the message path counts after binding."""
    rt, mailed = postal()
    s = rt.session(run_id="conv", provider="openai_chat")
    s.user("tell bob hi, twice")
    calls = [
        {"id": f"c{i}", "type": "function", "function": {"name": "send", "arguments": json.dumps(a)}}
        for i, a in enumerate([BOB, BOB_BY_ID])
    ]
    turn = s.handle({"role": "assistant", "content": None, "tool_calls": calls})
    assert [o.status for o in turn.observations] == ["ok", "ok"]
    assert mailed == ["u-bob", "u-bob"]


def test_occurrences_count_calls_after_binding() -> None:
    rt, _ = postal()
    s = rt.session(run_id="conv")
    counted = occurrences(
        rt,
        [("send", BOB), ("send", {"to": "ann", "text": "hi"}), ("send", BOB_BY_MAIL), ("send", BOB_BY_ID)],
        run_id=s.run_id,
    )
    assert [o.count for o in counted] == [0, 0, 1, 2]
    assert counted[1].action is None
    assert counted[0].action == counted[2].action == counted[3].action is not None


def test_a_call_the_binding_refuses_counts_for_none() -> None:
    """As in the stage: ``nobody`` matches no one, so it is no occurrence of anything."""
    rt, _ = postal()
    s = rt.session(run_id="conv")
    counted = occurrences(rt, [("send", {"to": "nobody", "text": "hi"}), ("send", BOB)], run_id=s.run_id)
    assert [(o.count, o.action) for o in counted] == [(0, None), (0, None)]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_langgraph_two_calls_naming_one_person_are_both_sent_and_both_replayed_when_run_again(
    mode: str,
) -> None:
    rt, mailed = postal()
    message = [lc_call("m1", "send", BOB), lc_call("m2", "send", BOB_BY_MAIL)]
    app = graph(rt, message, InMemorySaver())
    config: Any = {"configurable": {"thread_id": "t"}}

    def invoke(given: Any, at: Any) -> Any:
        return app.invoke(given, at) if mode == "sync" else asyncio.run(app.ainvoke(given, at))

    out = invoke({"messages": [HumanMessage("tell bob hi, twice")]}, config)
    assert mailed == ["u-bob", "u-bob"]
    assert replayed(lc_answers(out)) == [False, False]
    # the tools node run again from the checkpoint before it: the same message, in its turn
    [before] = [st for st in app.get_state_history(config) if st.next == ("tools",)]
    again = invoke(None, before.config)
    assert mailed == ["u-bob", "u-bob"]
    assert replayed(lc_answers(again)) == [True, True]
    assert len([e for e in rt.ledger.list() if e.tool.startswith("send@")]) == 2


def test_pydantic_ai_two_calls_naming_one_person_are_both_sent() -> None:
    rt, mailed = postal()

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if returns(messages):
            return ModelResponse(parts=[TextPart("done")])
        return ModelResponse(
            parts=[ToolCallPart("send", a, tool_call_id=f"p{n}") for n, a in enumerate([BOB_BY_ID, BOB])]
        )

    result = Agent(FunctionModel(model), toolsets=[GovernedToolset(rt).toolset]).run_sync("hi bob, twice")
    assert mailed == ["u-bob", "u-bob"]
    assert replayed([p.content for p in returns(result.all_messages())]) == [False, False]
