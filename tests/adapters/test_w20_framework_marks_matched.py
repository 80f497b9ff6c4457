"""A mark rebuilt from the trace goes to the request its own framework run held the call on.

Two framework runs (Pydantic AI conversations here) of one actionspace run may give a call the
same id. When both lost their marks (the approval store failed as they were written), the trace
shows the call id held on each one's request, and nothing says which framework run held which:
the first to resume used to mark every unmarked request held under that id, and its person's
"no" denied the other conversation's request too. On one request (an identical call) the first
to resume used to keep the second from getting its mark back. Fault injection: an approval store
whose mark writes fail; the resume runs on a runtime opened anew (nothing kept in memory).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pydantic_ai")

from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from actionspace.adapters._bridge import Bridge
from actionspace.adapters._marks import from_trace, marks
from actionspace.adapters._pydantic_denials import DEFERRED
from actionspace.adapters.pydantic_ai import GovernedToolset
from tests.adapters.test_w17_pydantic_ai_denials import shop
from tests.adapters.test_w19_framework_marks_other_process import failing_marks

RUN = "order-7"


def _model(cents: int) -> FunctionModel:
    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if any(isinstance(p, ToolReturnPart) for m in messages for p in m.parts):
            return ModelResponse(parts=[TextPart("Done.")])
        return ModelResponse(
            parts=[ToolCallPart("charge", {"card": "4242", "cents": cents}, tool_call_id="c1")]
        )

    return FunctionModel(model)


def _held(url: str, *cents: int) -> list[Any]:
    """One conversation per amount, each holding its call ``c1`` in run RUN with its mark lost."""
    rt, _ = shop(url)
    failed = failing_marks(rt.approvals.store, DEFERRED)
    results = []
    for amount in cents:
        governed = GovernedToolset(rt, run_id=RUN)
        agent = Agent(_model(amount), toolsets=[governed.toolset], output_type=[str, DeferredToolRequests])
        results.append(agent.run_sync(f"charge {amount}"))
    assert failed[0] >= len(cents)
    assert all(DEFERRED not in r.details for r in rt.approvals.list(status=None))  # every mark lost
    rt.close()
    return results


def test_a_denial_resumed_after_both_marks_were_lost_denies_no_other_conversations_request(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'as.db'}"
    first, _second = _held(url, 500, 900)
    rt, charged = shop(url)
    try:
        governed = GovernedToolset(rt, run_id=RUN)
        agent = Agent(_model(500), toolsets=[governed.toolset], output_type=[str, DeferredToolRequests])
        done = agent.run_sync(
            message_history=first.all_messages(),
            deferred_tool_results=DeferredToolResults(approvals={"c1": False}),
        )
        assert done.output == "Done." and charged == []
        by_amount = {r.arguments["cents"]: r for r in rt.approvals.list(status=None)}
        # the trace cannot tell which request was this conversation's: neither is decided on a guess
        assert by_amount[900].status == "pending", by_amount[900]
        assert by_amount[500].status == "pending"
    finally:
        rt.close()


def test_both_conversations_of_one_shared_request_get_their_marks_back(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'as.db'}"
    _held(url, 500, 500)  # identical calls: one request, held by both under c1
    rt, _ = shop(url)
    try:
        bridge = Bridge(rt, run_id=RUN)
        [request] = rt.approvals.list()
        assert from_trace(bridge, [request], DEFERRED, "conv-a", ["c1"])
        [request] = rt.approvals.list()
        assert from_trace(bridge, [request], DEFERRED, "conv-b", ["c1"])  # the second is not shut out
        [request] = rt.approvals.list()
        assert marks(request, DEFERRED) == ["conv-a:c1", "conv-b:c1"]
        # two holds, two marks: a third conversation that never held it gets none
        assert not from_trace(bridge, [request], DEFERRED, "conv-c", ["c1"])
        assert marks(rt.approvals.list()[0], DEFERRED) == ["conv-a:c1", "conv-b:c1"]
    finally:
        rt.close()


def test_a_lost_mark_beside_another_conversations_kept_one_is_rebuilt_on_its_own_request(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'as.db'}"
    _held(url, 500, 900)
    rt, _ = shop(url)
    try:
        bridge = Bridge(rt, run_id=RUN)
        by_amount = {r.arguments["cents"]: r for r in rt.approvals.list()}
        # the other conversation's mark is on its request: this one's is the request left over
        rt.approvals.store.update(
            by_amount[500].id,
            ["pending"],
            by_amount[500].evolve(details={**by_amount[500].details, DEFERRED: ["conv-a:c1"]}),
        )
        assert from_trace(bridge, rt.approvals.list(), DEFERRED, "conv-b", ["c1"])
        by_amount = {r.arguments["cents"]: r for r in rt.approvals.list()}
        assert marks(by_amount[900], DEFERRED) == ["conv-b:c1"]
        assert marks(by_amount[500], DEFERRED) == ["conv-a:c1"]
    finally:
        rt.close()
