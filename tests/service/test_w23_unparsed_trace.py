"""A background run's output none of whose calls runs is traced as the engine traces it: one
``observation`` event under each call id it is answered under (an id given twice once, output
without ids under ``<run id>:parse``), carrying the error's message, and the run's call count
equal to those events."""

from __future__ import annotations

from typing import Any

from actionspace.service import BackgroundRuns, RunnerConfig
from tests.service.apptools import World, build_runtime

TWICE = {
    "role": "assistant",
    "content": None,
    "tool_calls": [
        {"id": "call_A", "type": "function", "function": {"name": "lookup", "arguments": '{"city": "Oslo"}'}},
        {"id": "call_A", "type": "function", "function": {"name": "lookup", "arguments": '{"city": "Rome"}'}},
    ],
}


def _run(calls: list[Any], run_id: str) -> list[Any]:
    rt, _ = build_runtime(World())
    runner = BackgroundRuns(rt, RunnerConfig())
    try:
        rt.new_run(run_id)
        runner.start_calls(calls, run_id=run_id, principal=rt.principal)
        runner.wait(run_id, timeout=20)
        return rt.trace.events(run_id)
    finally:
        runner.close()
        rt.close()


def test_output_without_call_ids_is_traced_under_the_id_its_run_reports() -> None:
    events = _run(["I would rather not call a tool."], "no-ids")
    (observed,) = [e for e in events if e.kind == "observation"]
    (finished,) = [e.data for e in events if e.kind == "run_finished"]
    assert observed.call_id == "no-ids:parse" and list(finished["failed"]) == [observed.call_id]
    assert observed.data["category"] == "parse_error" and observed.data["message"]


def test_an_id_given_to_two_calls_is_answered_and_traced_once() -> None:
    events = _run([TWICE], "twice")
    observed = [e.call_id for e in events if e.kind == "observation"]
    (finished,) = [e.data for e in events if e.kind == "run_finished"]
    assert observed == ["call_A"]
    assert finished["calls"] == len(observed) and finished["failed"] == {"call_A": "parse_error"}
