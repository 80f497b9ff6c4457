"""Speculation meets cancellation: an alternative whose own call raised ``CancelledError`` loses
(it is one cancelled alternative, not a cancel of the node), and a cancel of the plan while the
alternatives run stops them all and blocks the node's successors."""

from __future__ import annotations

import asyncio
from typing import Any

from actionspace import CancelScope, Runtime
from actionspace.plan import PlanResult


def _runtime(log: list[str], gate: asyncio.Event | None = None) -> Runtime:
    rt = Runtime("memory://", recover_on_start=False)

    @rt.tool(effect="read", reads=["r:{name}"])
    async def quits(name: str) -> str:
        """A read whose own call raises CancelledError (nothing asked it to stop)."""
        log.append(f"quits {name}")
        await asyncio.sleep(0.001)
        raise asyncio.CancelledError

    @rt.tool(effect="read", reads=["r:{name}"])
    async def fine(name: str) -> str:
        """A read that answers after its gate opens (or a moment)."""
        if gate is not None:
            await gate.wait()
        else:
            await asyncio.sleep(0.02)
        log.append(f"fine {name}")
        return name

    @rt.tool(effect="none")
    def after(x: str) -> str:
        """Uses the winner's result."""
        log.append(f"after {x}")
        return x

    return rt


def _plan(first: str, second: str) -> dict[str, Any]:
    return {
        "nodes": [
            {
                "id": "s",
                "first_of": [
                    {"tool": first, "arguments": {"name": "a"}},
                    {"tool": second, "arguments": {"name": "b"}},
                ],
            },
            {"id": "n", "tool": "after", "arguments": {"x": {"$ref": "s.data"}}},
        ]
    }


def _run(rt: Runtime, plan: dict[str, Any], **options: Any) -> PlanResult:
    async def scenario() -> PlanResult:
        return await asyncio.wait_for(rt.arun_plan(plan, run_id="sp", **options), 5)

    return asyncio.run(scenario())


def test_an_alternative_whose_call_raised_cancelled_error_loses_and_another_wins() -> None:
    log: list[str] = []
    rt = _runtime(log)
    result = _run(rt, _plan("quits", "fine"))
    s = result.nodes["s"]
    assert s.ok and s.data == "b", s.error
    assert s.diagnostics["speculation"]["winner"] == 1
    assert result.nodes["n"].data == "b"
    assert log == ["quits a", "fine b", "after b"]
    (lost,) = result.speculative["s"]
    assert lost.error is not None and lost.error.category == "cancelled"
    assert lost.diagnostics["authoritative"] is False


def test_every_alternative_cancelled_by_its_own_call_leaves_the_node_cancelled_not_aborted() -> None:
    log: list[str] = []
    rt = _runtime(log)
    result = _run(rt, _plan("quits", "quits"))
    s = result.nodes["s"].error
    assert s is not None and s.category == "cancelled"
    assert "abort requested" not in s.message  # nobody asked the plan to stop
    blocked = result.nodes["n"].error
    assert blocked is not None and blocked.details["blocked_by"] == "s"


def test_cancelling_the_plan_while_alternatives_run_stops_them_and_blocks_the_successor() -> None:
    log: list[str] = []
    gate = asyncio.Event()
    scope = CancelScope()

    async def scenario() -> PlanResult:
        rt = _runtime(log, gate)
        task = asyncio.create_task(rt.arun_plan(_plan("fine", "fine"), run_id="sc", cancel=scope))
        for _ in range(20):
            await asyncio.sleep(0)
        scope.cancel(reason="stop")
        result = await asyncio.wait_for(task, 5)
        gate.set()
        for _ in range(10):
            await asyncio.sleep(0)
        return result

    result = asyncio.run(scenario())
    s = result.nodes["s"].error
    assert s is not None and s.category == "cancelled" and s.details["phase"] == "running"
    n = result.nodes["n"].error
    assert n is not None and n.category == "cancelled"
    assert log == []  # neither alternative answered, and the successor never ran
