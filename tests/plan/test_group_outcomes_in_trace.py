"""What happened to each member of an atomic group is in the trace: undone, never run, or unknown."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from actionspace import CancelScope, Plan, Runtime, ToolError
from actionspace.evaluation.monitor import monitor
from actionspace.plan.environments import SqliteEnvironment, SqliteTransaction
from actionspace.trace.events import TraceEvent
from tests.plan.settings_table import CommitAnswerLost, RollbackRaises
from tests.plan.settings_table import rows as _rows


@pytest.fixture(params=["memory", "sqlite"])
def rt(request: pytest.FixtureRequest, db: Path, tmp_path: Path) -> Runtime:
    store = "memory://" if request.param == "memory" else f"sqlite:///{tmp_path / 'runtime.db'}"
    runtime = Runtime(store, recover_on_start=False)
    runtime.environment("settings", SqliteEnvironment(db))

    @runtime.tool(effect="write", writes=["setting:{name}"], transaction="settings")
    def put(name: str, value: str, transaction: SqliteTransaction | None = None) -> str:
        """Set a setting inside the group's transaction."""
        if value == "bad":
            raise ToolError("conflict", f"{name} is locked by someone else")
        assert transaction is not None
        transaction.connection.execute("INSERT OR REPLACE INTO settings VALUES (?, ?)", (name, value))
        return value

    return runtime


def _plan(values: dict[str, str]) -> Plan:
    nodes = [
        {"id": f"set_{k}", "tool": "put", "arguments": {"name": k, "value": v}} for k, v in values.items()
    ]
    return Plan.from_dict({"nodes": nodes, "groups": [{"id": "apply", "nodes": [n["id"] for n in nodes]}]})


def _of(events: list[TraceEvent], kind: str, node: str) -> list[dict[str, Any]]:
    return [
        dict(e.data)
        for e in events
        if e.kind == kind and (e.data.get("node") == node or e.call_id == f"{e.run_id}:{node}")
    ]


def _last_observation(events: list[TraceEvent], run_id: str, node: str) -> dict[str, Any]:
    return [dict(e.data) for e in events if e.kind == "observation" and e.call_id == f"{run_id}:{node}"][-1]


def test_a_rolled_back_member_and_the_members_that_never_ran_are_in_the_stored_trace(
    rt: Runtime, db: Path
) -> None:
    result = rt.run_plan(_plan({"a": "1", "b": "bad", "c": "3"}), run_id="rb1")
    assert _rows(db) == []
    events = rt.trace.events("rb1")
    undone = _last_observation(events, "rb1", "set_a")
    assert undone["status"] == "error" and undone["category"] == "cancelled"
    assert undone["rolled_back"] is True and undone["group"] == "apply"
    (cancel,) = _of(events, "plan_node_cancelled", "set_a")
    assert cancel == {"node": "set_a", "phase": "rolled_back", "group": "apply", "compensated": True}
    (never,) = _of(events, "plan_node_cancelled", "set_c")
    assert never["phase"] == "not_dispatched" and never["group"] == "apply"
    assert not _of(events, "plan_node_cancelled", "set_b")  # its own error stands
    assert _last_observation(events, "rb1", "set_b")["category"] == "conflict"
    health = monitor(rt.trace, run_ids=["rb1"]).tool("put")
    assert health.ok_results == 0  # nothing of the group stands
    assert health.failures_by_category == {"cancelled": 1, "conflict": 1}
    a = result.nodes["set_a"].error
    assert a is not None and a.category == "cancelled" and a.details["rolled_back"] is True


def test_a_rollback_that_raised_is_recorded_as_not_compensated(rt: Runtime, db: Path) -> None:
    rt.environment("settings", RollbackRaises(db))
    result = rt.run_plan(_plan({"a": "1", "b": "bad"}), run_id="rb2")
    assert _rows(db) == []
    events = rt.trace.events("rb2")
    (cancel,) = _of(events, "plan_node_cancelled", "set_a")
    assert cancel["phase"] == "rolled_back" and cancel["compensated"] is False
    assert "OSError" in cancel["rollback_error"]
    a = result.nodes["set_a"].error
    assert a is not None and a.category == "cancelled"
    assert a.details["rolled_back"] is False and a.details["committed"] is False


def test_members_of_a_group_whose_commit_is_unknown_are_unknown_commit_never_rolled_back(
    rt: Runtime, db: Path
) -> None:
    rt.environment("settings", CommitAnswerLost(db))
    plan = _plan({"a": "1", "b": "2"})
    result = rt.run_plan(plan, run_id="uc1")
    assert _rows(db) == [("a", "1"), ("b", "2")]  # the writes may stand: nobody may say they were undone
    group = result.nodes["apply"].error
    assert group is not None and group.category == "unknown_commit"
    for k in ("set_a", "set_b"):
        error = result.nodes[k].error
        assert error is not None and error.category == "unknown_commit", error
        assert not error.details.get("rolled_back")
    events = rt.trace.events("uc1")
    assert _last_observation(events, "uc1", "set_a")["category"] == "unknown_commit"
    assert not [e for e in events if e.kind == "plan_node_cancelled"]
    health = monitor(rt.trace, run_ids=["uc1"]).tool("put")
    assert health.ok_results == 0 and health.unknown_commits == 2
    again = rt.run_plan(plan, run_id="uc1")  # proposed again: still unknown, never "did not run"
    for k in ("set_a", "set_b"):
        error = again.nodes[k].error
        assert error is not None and error.category == "unknown_commit", error


def test_a_group_cancelled_while_a_member_runs_rolls_its_transaction_back(db: Path) -> None:
    runtime = Runtime("memory://", recover_on_start=False)
    runtime.environment("settings", SqliteEnvironment(db, timeout_s=0.2))
    started = asyncio.Event()

    @runtime.tool(effect="write", writes=["setting:{name}"], transaction="settings")
    async def put(name: str, value: str, transaction: SqliteTransaction | None = None) -> str:
        """Set a setting inside the group's transaction; "slow" waits."""
        assert transaction is not None
        transaction.connection.execute("INSERT OR REPLACE INTO settings VALUES (?, ?)", (name, value))
        if value == "slow":
            started.set()
            await asyncio.sleep(30)
        return value

    async def cancel_midway() -> None:
        task = asyncio.create_task(runtime.arun_plan(_plan({"a": "1", "b": "slow", "c": "3"}), run_id="cx"))
        await asyncio.wait_for(started.wait(), 5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        for _ in range(5):  # the plan's node tasks end on their own turns of the loop
            await asyncio.sleep(0)

    asyncio.run(cancel_midway())
    with sqlite3.connect(db, timeout=0.2) as conn:  # no transaction was left open holding the lock
        conn.execute("INSERT INTO settings VALUES ('z', 'z')")
    assert _rows(db) == [("z", "z")]
    events = runtime.trace.events("cx")
    for node in ("set_a", "set_b"):
        (undone,) = _of(events, "plan_node_cancelled", node)
        assert undone["phase"] == "rolled_back" and undone["compensated"] is True
        assert _last_observation(events, "cx", node)["category"] == "cancelled"
    (never,) = _of(events, "plan_node_cancelled", "set_c")
    assert never["phase"] == "not_dispatched"


def test_members_of_a_group_blocked_by_a_failed_predecessor_are_named_in_the_trace(
    rt: Runtime, db: Path
) -> None:
    plan = {
        "nodes": [
            {"id": "first", "tool": "put", "arguments": {"name": "x", "value": "bad"}},
            {"id": "set_a", "tool": "put", "arguments": {"name": "a", "value": "1"}, "depends_on": ["first"]},
            {"id": "set_b", "tool": "put", "arguments": {"name": "b", "value": "2"}, "depends_on": ["first"]},
        ],
        "groups": [{"id": "apply", "nodes": ["set_a", "set_b"]}],
    }
    result = rt.run_plan(plan, run_id="bl1")
    assert result.failed["first"].category == "conflict"
    events = rt.trace.events("bl1")
    for node in ("set_a", "set_b"):
        (blocked,) = _of(events, "plan_node_blocked", node)
        assert blocked == {"node": node, "blocked_by": "first", "group": "apply"}
        error = result.nodes[node].error
        assert error is not None and error.category == "cancelled"
    assert _rows(db) == []


def test_members_of_a_group_cancelled_before_it_began_are_named_in_the_trace(rt: Runtime, db: Path) -> None:
    scope = CancelScope()
    scope.cancel(reason="stopped before the start")
    result = rt.run_plan(_plan({"a": "1", "b": "2"}), run_id="cb1", cancel=scope)
    events = rt.trace.events("cb1")
    for node in ("set_a", "set_b"):
        (cancelled,) = _of(events, "plan_node_cancelled", node)
        assert cancelled == {"node": node, "phase": "not_dispatched", "group": "apply"}
        error = result.nodes[node].error
        assert error is not None and error.category == "cancelled"
    assert _rows(db) == []
