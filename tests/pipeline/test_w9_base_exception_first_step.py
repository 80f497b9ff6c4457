"""An async tool that raises a ``BaseException`` of its own in its first step (before its first
await) on the precompiled path fails its call with a typed error, as on the general path:
nothing escapes ``acall``, ``call`` or a session turn, a plan does not hang, and a write's ledger
entry is settled. The precompiled path is taken from a tool's second call in a run, so each
scenario calls the tool once successfully first."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from actionspace import Plan, Runtime
from actionspace.types import Observation


class Boom(BaseException):
    """Not an Exception: what ``except Exception`` does not catch."""


async def _flaky(x: int) -> int:
    if x == 1:
        raise Boom("the tool gave up at once")
    return x


def _runtime(effect: str) -> Runtime:
    rt = Runtime("memory://", recover_on_start=False)
    rt.add_tool(
        name="t",
        input_schema={
            "type": "object",
            "properties": {"x": {"type": "integer"}},
            "required": ["x"],
            "additionalProperties": False,
        },
        fn=_flaky,
        effect=effect,
    )
    return rt


def _raw(x: int) -> dict[str, Any]:
    return {"name": "t", "arguments": {"x": x}}


def _assert_boom(obs: Observation) -> None:
    assert obs.status == "error"
    assert obs.error is not None and obs.error.category == "unclassified", obs.error
    assert obs.error.vendor_code == "Boom"


@pytest.mark.parametrize("effect", ["none", "read", "write"])
def test_acall_types_a_base_exception_raised_before_the_first_await(effect: str) -> None:
    async def scenario(rt: Runtime) -> Observation:
        assert (await rt.acall(_raw(0), run_id="r", node_id="n0")).data == 0
        return await asyncio.wait_for(rt.acall(_raw(1), run_id="r", node_id="n1"), 10)

    with _runtime(effect) as rt:
        _assert_boom(asyncio.run(scenario(rt)))
        if effect == "write":
            entry = rt.ledger.get_node("r", "n1")
            assert entry is not None and entry.state == "failed", entry


@pytest.mark.parametrize("effect", ["none", "read", "write"])
def test_call_types_a_base_exception_raised_before_the_first_await(effect: str) -> None:
    with _runtime(effect) as rt:
        assert rt.call(_raw(0), run_id="r", node_id="n0").data == 0
        _assert_boom(rt.call(_raw(1), run_id="r", node_id="n1"))
        if effect == "write":
            entry = rt.ledger.get_node("r", "n1")
            assert entry is not None and entry.state == "failed", entry


def _message(call_id: str, x: int) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": "t", "arguments": json.dumps({"x": x})}}
        ],
    }


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_session_turn_types_a_base_exception_raised_before_the_first_await(mode: str) -> None:
    with _runtime("read") as rt:
        s = rt.session()
        s.user("go")
        if mode == "sync":
            first = s.handle(_message("c0", 0))
            second = s.handle(_message("c1", 1))
        else:

            async def scenario() -> tuple[Any, Any]:
                a = await s.ahandle(_message("c0", 0))
                return a, await asyncio.wait_for(s.ahandle(_message("c1", 1)), 10)

            first, second = asyncio.run(scenario())
    assert first.observations[0].data == 0
    _assert_boom(second.observations[0])
    assert len(second.messages) == 1


@pytest.mark.parametrize("effect", ["none", "read"])
def test_a_plan_node_raising_a_base_exception_at_once_fails_alone(effect: str) -> None:
    rt = _runtime(effect)

    @rt.tool(effect="none")
    def echo(x: int) -> int:
        return x

    plan = Plan.from_dict(
        {
            "nodes": [
                {"id": "bad", "tool": "t", "arguments": {"x": 1}},
                {"id": "good", "tool": "echo", "arguments": {"x": 2}},
                {"id": "fine", "tool": "t", "arguments": {"x": 3}},
            ]
        }
    )

    async def scenario() -> Any:
        assert (await rt.acall(_raw(0), run_id="p1", node_id="warm")).data == 0
        assert (await rt.acall({"name": "echo", "arguments": {"x": 0}}, run_id="p1")).data == 0
        return await asyncio.wait_for(rt.arun_plan(plan, run_id="p1"), 10)

    with rt:
        result = asyncio.run(scenario())
    _assert_boom(result.nodes["bad"])
    assert result.nodes["good"].data == 2
    assert result.nodes["fine"].data == 3


def test_a_keyboard_interrupt_at_once_on_the_precompiled_path_still_stops_its_caller() -> None:
    async def interrupted(x: int) -> int:
        if x == 1:
            raise KeyboardInterrupt
        return x

    rt = Runtime("memory://", recover_on_start=False)
    rt.add_tool(
        name="t",
        input_schema={"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]},
        fn=interrupted,
        effect="read",
    )

    async def scenario() -> None:
        assert (await rt.acall(_raw(0), run_id="r")).data == 0
        await rt.acall(_raw(1), run_id="r")

    with rt, pytest.raises(KeyboardInterrupt):
        asyncio.run(scenario())
