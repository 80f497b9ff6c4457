"""A message refused only for ``Session.max_calls`` is recorded as a malformed message is.

A malformed message leaves its ``model_output``, its ``parsed`` event (the calls it names and the
error) and the ``parse_error`` observation in the trace. A message over the bound ran none of its
calls either, and the model read one ``budget_exceeded`` per call id; the trace must say so: the
raw output, the calls it named with the error naming the bound, and one observation per call,
under the call's own id and tool. Then what is computed from the trace counts that turn: the run
summary's calls and errors, and the monitor's rejections of the tool.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace import Runtime
from actionspace.evaluation.monitor import monitor
from actionspace.trace.events import summarize
from tests.session.w47_world import answered_ids, chat


def _world(store: str) -> Runtime:
    rt = Runtime(store, recover_on_start=False)

    @rt.tool(effect="write", writes=["counter:{name}"])
    def set_counter(name: str, value: int) -> dict[str, Any]:
        """Set a counter."""
        return {"name": name, "value": value}

    return rt


def _message(n: int, prefix: str = "w") -> dict[str, Any]:
    return chat(
        *((f"{prefix}{i}", "set_counter", json.dumps({"name": f"k{i}", "value": i})) for i in range(n))
    )


def _handled(s: Any, message: Any, is_async: bool) -> Any:
    return asyncio.run(s.ahandle(message)) if is_async else s.handle(message)


@pytest.mark.parametrize("is_async", [False, True])
def test_a_message_over_the_bound_leaves_its_output_its_parse_and_each_calls_refusal_in_the_trace(
    tmp_path: Path, is_async: bool
) -> None:
    rt = _world(f"sqlite:///{tmp_path / 'a.db'}")
    try:
        s = rt.session(run_id="conv-over", provider="openai_chat")
        s.max_calls = 3
        s.user("set four counters")
        turn = _handled(s, _message(4), is_async)
        ids = [f"w{i}" for i in range(4)]
        assert [o.error.category for o in turn.observations if o.error] == ["budget_exceeded"] * 4
        assert answered_ids("openai_chat", turn.messages) == ids
        events = rt.trace.events("conv-over")
        kinds = [e.kind for e in events]
        assert kinds.count("model_output") == 1 and kinds.count("parsed") == 1
        [parsed] = [e for e in events if e.kind == "parsed"]
        assert [c["id"] for c in parsed.data["calls"]] == ids
        assert "at most 3" in parsed.data["error"]
        refusals = [e for e in events if e.kind == "observation"]
        assert [e.call_id for e in refusals] == ids
        assert {(e.data["status"], e.data["category"], e.data["tool"]) for e in refusals} == {
            ("error", "budget_exceeded", "set_counter")
        }
        assert kinds.index("model_output") < kinds.index("parsed") < kinds.index("observation")
    finally:
        rt.close()


def test_the_run_summary_and_the_monitor_count_the_refused_turn(tmp_path: Path) -> None:
    rt = _world(f"sqlite:///{tmp_path / 'b.db'}")
    try:
        s = rt.session(run_id="conv-count", provider="openai_chat")
        s.max_calls = 2
        s.user("set counters")
        s.handle(_message(3))  # refused: none runs
        s.handle(_message(2, "v"))  # at the bound: both run
        summary = summarize("conv-count", rt.trace.events("conv-count"))
        assert summary is not None and (summary.calls, summary.errors) == (5, 3)
        report = monitor(rt.trace, run_ids=["conv-count"])
        [health] = [t for t in report.tools if t.tool == "set_counter"]
        assert health.calls == 5 and dict(health.rejects_by_category) == {"budget_exceeded": 3}
        assert health.ok_results == 2
    finally:
        rt.close()


@settings(max_examples=25, deadline=None)
@given(
    bound=st.integers(1, 6), over=st.integers(1, 6), provider=st.sampled_from(["openai_chat", "anthropic"])
)
def test_every_call_id_of_a_refused_message_has_one_recorded_refusal(
    bound: int, over: int, provider: str
) -> None:
    rt = _world("memory://")
    try:
        s = rt.session(run_id="conv-any", provider="openai_chat")
        s.max_calls = bound
        s.user("set them")
        n = bound + over
        if provider == "anthropic":
            content = [
                {"type": "tool_use", "id": f"t{i}", "name": "set_counter", "input": {"name": "a", "value": i}}
                for i in range(n)
            ]
            message: Any = {"role": "assistant", "content": content}
            ids = [f"t{i}" for i in range(n)]
        else:
            message, ids = _message(n), [f"w{i}" for i in range(n)]
        turn = s.handle(message)
        assert [o.call_id for o in turn.observations] == ids
        events = rt.trace.events("conv-any")
        refused = [e.call_id for e in events if e.kind == "observation"]
        assert refused == ids
        [parsed] = [e for e in events if e.kind == "parsed"]
        assert len(parsed.data["calls"]) == n and f"at most {bound}" in parsed.data["error"]
    finally:
        rt.close()
