"""Monitoring a run whose model reuses a call id across a message that did not parse: the parse
error answered under that id is no call of any tool, and neither ends nor starts a tool's call."""

from __future__ import annotations

import json
from typing import Any

import pytest

from actionspace import Runtime
from actionspace.evaluation.monitor import monitor


def _message(arguments: str, call_id: str = "call_1") -> dict[str, Any]:
    entry = {"id": call_id, "type": "function", "function": {"name": "add", "arguments": arguments}}
    return {"role": "assistant", "content": None, "tool_calls": [entry]}


WHOLE = json.dumps({"a": 1, "b": 2})
CUT = WHOLE[:7]


def _runtime() -> Runtime:
    rt = Runtime("memory://", recover_on_start=False)

    @rt.tool(effect="none")
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    return rt


@pytest.mark.parametrize("order", [("whole", "cut"), ("cut", "whole"), ("cut", "whole", "cut", "whole")])
def test_a_parse_error_under_a_reused_call_id_is_no_call_of_the_tool(order: tuple[str, ...]) -> None:
    rt = _runtime()
    run = rt.new_run()
    for which in order:
        (obs,) = rt.call_all(_message(WHOLE if which == "whole" else CUT), run_id=run)
        assert obs.call_id == "call_1" and obs.ok == (which == "whole")
    answered = [e for e in rt.trace.events(run) if e.kind == "observation"]
    assert [e.call_id for e in answered] == ["call_1"] * len(order)  # every answer, under its id

    report = monitor(rt.trace)
    rt.close()
    wholes = order.count("whole")
    health = report.tool("add")
    assert (report.calls, health.calls, health.ok_results) == (wholes, wholes, wholes)
    assert (health.rejects, health.failures, health.undecided) == (0, 0, 0)
