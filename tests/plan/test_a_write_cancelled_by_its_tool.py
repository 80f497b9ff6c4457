"""A tool with side effects whose own call raises ``CancelledError`` (nothing of the plan asked it
to stop) may have committed: its node ends ``unknown_commit``, as its ledger entry says, never
``cancelled`` as if it were a read that was stopped. A read that does so ends ``cancelled``."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from actionspace import Runtime
from actionspace.plan import PlanResult


def _runtime(effect: str, waits: bool, sent: list[int]) -> Runtime:
    rt = Runtime("memory://", recover_on_start=False)

    @rt.tool(effect="read", reads=["n:"])
    def number() -> int:
        """A number."""
        return 0

    @rt.tool(effect=effect, writes=["box:{n}"] if effect == "write" else ())
    async def put(n: int) -> int:
        """Put something somewhere."""
        sent.append(n)
        if waits:
            await asyncio.sleep(0.001)
        raise asyncio.CancelledError

    @rt.tool(effect="none")
    def after(v: int) -> int:
        """Use the result."""
        return v

    return rt


def _plan(referenced: bool) -> dict[str, Any]:
    argument: Any = {"$ref": "z.data"} if referenced else 0
    return {
        "nodes": [
            {"id": "z", "tool": "number"},
            {"id": "p", "tool": "put", "arguments": {"n": argument}, "depends_on": ["z"]},
            {"id": "q", "tool": "after", "arguments": {"v": {"$ref": "p.data"}}},
        ]
    }


def _run(rt: Runtime, plan: dict[str, Any]) -> PlanResult:
    async def scenario() -> PlanResult:
        return await asyncio.wait_for(rt.arun_plan(plan, run_id="r1"), 10)

    return asyncio.run(scenario())


@pytest.mark.parametrize("referenced", [False, True], ids=["plain", "referenced"])
@pytest.mark.parametrize("waits", [False, True], ids=["at-once", "after-a-wait"])
def test_a_write_whose_call_raised_cancelled_error_ends_unknown_commit(referenced: bool, waits: bool) -> None:
    sent: list[int] = []
    rt = _runtime("write", waits, sent)
    result = _run(rt, _plan(referenced))
    assert sent == [0]
    error = result.nodes["p"].error
    assert error is not None and error.category == "unknown_commit"
    entry = rt.engine.ledger.get_node("r1", "p")
    assert entry is not None and entry.state == "unknown"
    blocked = result.nodes["q"].error
    assert blocked is not None and blocked.details["blocked_by"] == "p"
    again = rt.run_plan(_plan(referenced), run_id="r1", retry_of=result)
    assert sent == [0]  # never sent again
    assert again.nodes["p"].error is not None


@pytest.mark.parametrize("waits", [False, True], ids=["at-once", "after-a-wait"])
def test_a_read_whose_call_raised_cancelled_error_ends_cancelled(waits: bool) -> None:
    sent: list[int] = []
    rt = _runtime("read", waits, sent)
    result = _run(rt, _plan(False))
    error = result.nodes["p"].error
    assert error is not None and error.category == "cancelled"
