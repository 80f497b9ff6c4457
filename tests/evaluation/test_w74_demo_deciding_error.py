"""The demo runner judges a step of several calls by the same deciding error as the other runners:
an execution failure decides the step even when a call held for approval is listed before it."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

import pytest

from actionspace.demo.calendar import CalendarService
from actionspace.demo.scenario import build_runtime
from actionspace.evaluation import _runner_demo
from actionspace.evaluation._runner_demo import evaluate_demo
from actionspace.evaluation.policies import ScriptedPolicy
from actionspace.evaluation.suite import Task, demo_suite
from actionspace.runtime import Runtime

HOLD_ROOM: dict[str, Any] = {
    "name": "hold_room",
    "description": "Look up a room, held for a person's approval.",
    "parameters": {
        "type": "object",
        "properties": {"room": {"type": "string"}},
        "required": ["room"],
        "additionalProperties": False,
    },
}


def _with_held_tool(service: CalendarService, store: str) -> Runtime:
    """The demo's runtime plus one tool every call of which waits for approval."""
    rt = build_runtime(service, store)

    @rt.tool(effect="read", requires_approval=True)
    def hold_room(room: str) -> dict[str, Any]:
        """Look up a room, held for a person's approval.

        Args:
            room: Room name.
        """
        return {"room": room}

    return rt


def _call(call_id: str, name: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


def _task() -> Task:
    review = demo_suite().task("demo_calendar_review")
    return dataclasses.replace(review, id="w74_held_then_failed", tools=(*review.tools, HOLD_ROOM))


def _message(*calls: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": list(calls)}


def test_a_held_call_listed_before_a_failing_call_does_not_make_the_demo_step_pending(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_runner_demo, "build_runtime", _with_held_tool)
    task = _task()
    message = _message(
        _call("c1", "hold_room", {"room": "Fjord"}), _call("c2", "get_event", {"event_id": "no-such-event"})
    )
    policy = ScriptedPolicy({task.id: [message]})

    outcome = evaluate_demo("demo", task, policy)

    step = outcome.steps[0]
    assert (step.select_ok, step.args_ok, step.exec_ok) == (True, True, False)
    assert step.error_category == "permanent"
    assert step.exec_state == "failed"
    assert step.failed and step.erred
    assert outcome.exec_state == "failed"
    assert outcome.layer("exec") is False


def test_a_held_call_alone_still_leaves_the_demo_step_pending(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_runner_demo, "build_runtime", _with_held_tool)
    task = _task()
    message = _message(_call("c1", "get_user_profile", {}), _call("c2", "hold_room", {"room": "Fjord"}))
    policy = ScriptedPolicy({task.id: [message]})

    outcome = evaluate_demo("demo", task, policy)

    step = outcome.steps[0]
    assert (step.exec_ok, step.error_category, step.exec_state) == (False, "needs_approval", "pending")
    assert not step.failed and not step.erred
