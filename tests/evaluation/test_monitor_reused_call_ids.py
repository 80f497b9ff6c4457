"""Monitoring a run whose model numbers its calls ``call_1`` in every output: each proposal counts."""

from __future__ import annotations

import json

from actionspace import Runtime
from actionspace.evaluation.monitor import monitor
from actionspace.trace.events import TraceEvent
from actionspace.trace.memory import MemoryTraceStore


def _openai_call(name: str, arguments: dict[str, object], call_id: str = "call_1") -> str:
    return json.dumps(
        {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
    )


def test_each_output_reusing_a_call_id_is_a_call_of_its_own_tool() -> None:
    rt = Runtime("memory://", recover_on_start=False)

    @rt.tool(effect="none")
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @rt.tool(effect="write")
    def boom(x: int) -> int:
        """Always fails."""
        raise RuntimeError(f"broke on {x}")

    run = rt.new_run()
    assert rt.call(_openai_call("add", {"a": 1, "b": 2}), run_id=run).ok
    assert rt.call(_openai_call("boom", {"x": 2}), run_id=run).status == "error"
    rejected = rt.call(_openai_call("add", {"a": "x", "b": 2}), run_id=run)
    assert rejected.error is not None and rejected.error.category == "invalid_arguments"

    report = monitor(rt.trace)
    assert (report.runs, report.calls) == (1, 3)
    add_health, boom_health = report.tool("add"), report.tool("boom")
    assert (add_health.calls, add_health.ok_results, add_health.selection_rate) == (2, 1, 2 / 3)
    assert add_health.rejects_by_category == {"invalid_arguments": 1}
    assert add_health.rejects_by_field == {"/a": 1}
    assert (boom_health.calls, boom_health.failures_by_category) == (1, {"unclassified": 1})


def test_a_result_consumed_through_a_reused_id_is_the_latest_one_before_the_consumer() -> None:
    def ev(seq: int, kind: str, call_id: str, **data: object) -> TraceEvent:
        return TraceEvent(run_id="r", seq=seq, kind=kind, ts=100.0 + seq, call_id=call_id, data=data)

    store = MemoryTraceStore()
    store.append_many(
        [
            ev(0, "authorized", "call_1", verdict="allowed"),
            ev(1, "validated", "call_1", verdict="accepted", tool="lookup"),
            ev(2, "dispatched", "call_1", tool="lookup"),
            ev(3, "observation", "call_1", status="ok", tool="lookup"),
            ev(4, "authorized", "call_1", verdict="allowed"),
            ev(5, "validated", "call_1", verdict="accepted", tool="search"),
            ev(6, "dispatched", "call_1", tool="search"),
            ev(7, "observation", "call_1", status="ok", tool="search"),
            ev(8, "authorized", "call_2", verdict="allowed"),
            ev(
                9,
                "validated",
                "call_2",
                verdict="accepted",
                tool="send",
                provenance={"to": "tool_result:call_1"},
            ),
            ev(10, "dispatched", "call_2", tool="send"),
            ev(11, "observation", "call_2", status="ok", tool="send"),
        ]
    )
    report = monitor(store)
    assert report.calls == 3
    assert (report.tool("search").used_results, report.tool("search").consumers_ok) == (1, 1)
    assert (report.tool("lookup").ok_results, report.tool("lookup").used_results) == (1, 0)
