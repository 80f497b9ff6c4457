"""A plan closed from its own event loop (``rt.close()`` from a task beside ``rt.arun_plan`` or
from a node's own tool) ends after ``close()`` returned, since its loop runs only then. Every
event of the plan still reaches the SQLite stores: the nodes' observations and ``plan_finished``
are in the trace, and a write cut while it ran ends ``unknown_commit`` with its ledger entry
``unknown`` (never an ``internal`` error of a store closed under it)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from actionspace import Runtime
from actionspace.plan import PlanResult
from tests.close_tools import WAIT_S, Tools, slow_runtime, write_entries


def _stored(path: Path, run_id: str) -> list[tuple[str, dict[str, Any]]]:
    """(kind, data) of the run's events in the file (its Runtime closed)."""
    with Runtime(f"sqlite:///{path}", recover_on_start=False) as again:
        return [(e.kind, dict(e.data)) for e in again.trace.events(run_id)]


def _categories(result: PlanResult) -> dict[str, str]:
    return {k: obs.error.category if obs.error else "ok" for k, obs in result.nodes.items()}


def _observed(events: list[tuple[str, dict[str, Any]]]) -> list[str]:
    return sorted(str(data.get("category", "ok")) for kind, data in events if kind == "observation")


@pytest.mark.parametrize(("read", "write"), [("aget", "aput"), ("get", "put")], ids=["async", "threads"])
def test_a_plan_closed_by_a_task_of_its_own_loop_stores_its_end_and_its_writes_stay_unknown(
    tmp_path: Path, read: str, write: str
) -> None:
    path = tmp_path / "w10.db"
    tools = Tools(started_after=2)
    rt = slow_runtime(f"sqlite:///{path}", tools)
    run_id = rt.new_run()
    plan = {
        "nodes": [
            {"id": "r", "tool": read, "arguments": {"x": 1}},
            {"id": "w", "tool": write, "arguments": {"x": 2}},
            {"id": "after", "tool": read, "arguments": {"x": 3}, "depends_on": ["r"]},
        ]
    }

    async def main() -> PlanResult:
        running = asyncio.create_task(rt.arun_plan(plan, run_id=run_id))
        await asyncio.to_thread(tools.started.wait, WAIT_S)
        rt.close()
        return await asyncio.wait_for(running, WAIT_S)

    started = time.monotonic()
    result = asyncio.run(main())
    assert time.monotonic() - started < WAIT_S
    assert _categories(result) == {"r": "cancelled", "w": "unknown_commit", "after": "cancelled"}, result
    [(node, state, error)] = write_entries(f"sqlite:///{path}", rt)
    assert (node, state) == ("w", "unknown") and error is not None and "closed" in error
    events = _stored(path, run_id)
    kinds = [kind for kind, _data in events]
    assert kinds.count("plan_finished") == 1, kinds
    assert _observed(events) == ["cancelled", "unknown_commit"], events  # "after" never ran
    assert ("plan_node_blocked", {"node": "after", "blocked_by": "r"}) in events, events


def test_a_plan_closed_by_one_of_its_own_tools_stores_its_end(tmp_path: Path) -> None:
    path = tmp_path / "w10.db"
    rt = Runtime(f"sqlite:///{path}", recover_on_start=False)

    @rt.tool(effect="read", reads=["c:{x}"])
    async def closes(x: int) -> int:
        """Close the runtime from inside the plan, then answer."""
        rt.close()
        return x

    run_id = rt.new_run()
    plan = {
        "nodes": [
            {"id": "c", "tool": "closes", "arguments": {"x": 1}},
            {"id": "next", "tool": "closes", "arguments": {"x": 2}, "depends_on": ["c"]},
        ]
    }
    result = asyncio.run(asyncio.wait_for(rt.arun_plan(plan, run_id=run_id), WAIT_S))
    assert result.nodes["c"].status == "ok" and result.nodes["c"].data == 1, result  # a read that finished
    after = result.nodes["next"]
    assert after.error is not None and after.error.category == "cancelled", after
    assert after.error.details.get("sent") is False, after
    events = _stored(path, run_id)
    kinds = [kind for kind, _data in events]
    assert kinds.count("plan_started") == 1 and kinds.count("plan_finished") == 1, kinds
    assert _observed(events) == ["ok"], events
    cancelled = [data for kind, data in events if kind == "plan_node_cancelled"]
    assert [(d["node"], d["phase"]) for d in cancelled] == [("next", "not_dispatched")], events
