"""Arguments nested deeper than any call may hold reject the plan with a typed error naming the
field, at every depth a JSON parser or a caller can produce, before anything runs."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from actionspace import Runtime
from actionspace.plan import PlanResult


def _runtime(ran: list[str]) -> Runtime:
    rt = Runtime("memory://", recover_on_start=False)

    @rt.tool(effect="none")
    def take(x: list[Any]) -> int:
        """Take a list."""
        ran.append("take")
        return len(x)

    return rt


def _nested(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize("depth", [250, 600, 900])
def test_a_json_plan_nested_too_deep_is_rejected_naming_the_argument(depth: int) -> None:
    ran: list[str] = []
    rt = _runtime(ran)
    text = '{"nodes": [{"id": "a", "tool": "take", "arguments": {"x": ' + "[" * depth + "]" * depth + "}}]}"
    plan = json.loads(text)

    async def scenario() -> PlanResult:
        return await asyncio.wait_for(rt.arun_plan(plan), 10)

    result = asyncio.run(scenario())
    assert result.status == "error" and result.nodes == {} and ran == []
    assert result.error is not None and result.error.category == "invalid_arguments"
    assert any(f.path.startswith("/nodes/0/arguments/x") for f in result.error.field_errors)


@pytest.mark.parametrize("depth", [5_000])
def test_a_plan_built_in_code_nested_past_the_stack_is_rejected_not_raised(depth: int) -> None:
    ran: list[str] = []
    rt = _runtime(ran)
    plan = {
        "nodes": [
            {"id": "ok", "tool": "take", "arguments": {"x": [1]}},
            {"id": "deep", "first_of": [{"tool": "take", "arguments": {"x": _nested(depth)}}]},
        ]
    }
    result = rt.run_plan(plan)
    assert result.status == "error" and ran == []
    assert result.error is not None and result.error.category == "invalid_arguments"
    assert any(f.path.startswith("/nodes/1/first_of/0/arguments/x") for f in result.error.field_errors)


def test_a_container_holding_itself_is_rejected_not_walked_forever() -> None:
    ran: list[str] = []
    rt = _runtime(ran)
    loop: list[Any] = []
    loop.append(loop)
    result = rt.run_plan({"nodes": [{"id": "a", "tool": "take", "arguments": {"x": loop}}]})
    assert result.status == "error" and ran == []
    assert result.error is not None and result.error.category == "invalid_arguments"


def test_arguments_nested_within_the_bound_still_run() -> None:
    ran: list[str] = []
    rt = _runtime(ran)
    result = rt.run_plan({"nodes": [{"id": "a", "tool": "take", "arguments": {"x": _nested(150)}}]})
    assert result.status == "ok" and ran == ["take"]
