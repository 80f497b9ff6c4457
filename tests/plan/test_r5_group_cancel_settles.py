"""A group stopped while its members run, whose transaction was rolled back and never committed,
is settled as not committed: its ledger entry may be sent again (``accepted``), its observation
says ``cancelled``, and proposing the plan again runs it instead of answering ``unknown_commit``."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from actionspace import CancelScope, Plan, Runtime
from actionspace.plan import PlanResult
from actionspace.plan.environments import SqliteEnvironment, SqliteTransaction
from tests.plan.settings_table import RollbackRaises
from tests.plan.settings_table import rows as _rows


class _Slow:
    def __init__(self) -> None:
        self.on = True
        self.started = asyncio.Event()
        self.sent: list[str] = []


def _runtime(store: str, db: Path, slow: _Slow, environment: SqliteEnvironment | None = None) -> Runtime:
    rt = Runtime(store, recover_on_start=False)
    rt.environment("settings", environment or SqliteEnvironment(db, timeout_s=0.5))

    @rt.tool(effect="write", writes=["setting:{name}"], transaction="settings")
    async def put(name: str, value: str, transaction: SqliteTransaction | None = None) -> str:
        """Set a setting inside the group's transaction; "slow" waits while the test says so."""
        assert transaction is not None
        slow.sent.append(name)
        transaction.connection.execute("INSERT OR REPLACE INTO settings VALUES (?, ?)", (name, value))
        if value == "slow" and slow.on:
            slow.started.set()
            await asyncio.sleep(30)
        return value

    return rt


def _plan() -> Plan:
    values = {"a": "1", "b": "slow", "c": "3"}
    nodes: list[dict[str, Any]] = [
        {"id": f"set_{k}", "tool": "put", "arguments": {"name": k, "value": v}} for k, v in values.items()
    ]
    return Plan.from_dict({"nodes": nodes, "groups": [{"id": "apply", "nodes": [n["id"] for n in nodes]}]})


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return "memory://" if request.param == "memory" else f"sqlite:///{tmp_path / 'runtime.db'}"


def _group_entry(rt: Runtime) -> Any:
    (entry,) = [e for e in rt.ledger.list(limit=1000) if e.node_id == "group:apply"]
    return entry


def _proposed_again(rt: Runtime, db: Path, slow: _Slow, run_id: str, **options: Any) -> None:
    slow.on = False
    sent = len(slow.sent)
    again = rt.run_plan(_plan(), run_id=run_id, **options)
    assert again.nodes["apply"].ok, again.nodes["apply"].error
    assert slow.sent[sent:] == ["a", "b", "c"]  # it ran again, whole
    assert _group_entry(rt).state == "committed"
    assert _rows(db) == [("a", "1"), ("b", "slow"), ("c", "3")]


def test_a_group_whose_plan_was_cancelled_mid_member_is_not_left_unknown(store: str, db: Path) -> None:
    slow = _Slow()
    rt = _runtime(store, db, slow)

    async def cancel_midway() -> None:
        task = asyncio.create_task(rt.arun_plan(_plan(), run_id="gx"))
        await asyncio.wait_for(slow.started.wait(), 5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        for _ in range(5):  # the plan's node tasks end on their own turns of the loop
            await asyncio.sleep(0)

    asyncio.run(cancel_midway())
    assert _rows(db) == []
    entry = _group_entry(rt)
    assert entry.state == "accepted", entry  # not committed: it may be sent again
    assert entry.error is not None and entry.error["category"] == "cancelled"
    events = rt.trace.events("gx")
    group = [e.data for e in events if e.kind == "observation" and e.call_id == "gx:apply"]
    assert group and group[-1]["category"] == "cancelled", group
    moved = [e.data for e in events if e.kind == "ledger" and e.data.get("to") == "accepted"]
    assert moved and moved[-1]["from"] == "unknown"
    _proposed_again(rt, db, slow, "gx")
    rt.close()


def test_a_group_cancelled_by_its_scope_while_a_member_runs_is_rolled_back_and_runs_again(
    store: str, db: Path
) -> None:
    slow = _Slow()
    rt = _runtime(store, db, slow)
    scope = CancelScope()

    async def cancel_midway() -> PlanResult:
        task = asyncio.create_task(rt.arun_plan(_plan(), run_id="gs", cancel=scope))
        await asyncio.wait_for(slow.started.wait(), 5)
        scope.cancel(reason="the user changed their mind")
        return await asyncio.wait_for(task, 5)

    result = asyncio.run(cancel_midway())
    assert _rows(db) == []
    group = result.nodes["apply"].error
    assert group is not None and group.category == "cancelled", group
    a, b, c = (result.nodes[f"set_{k}"].error for k in "abc")
    assert a is not None and a.category == "cancelled" and a.details["rolled_back"] is True
    assert b is not None and b.category == "cancelled" and b.details["rolled_back"] is True
    assert c is not None and c.category == "cancelled" and c.details["phase"] == "not_dispatched"
    entry = _group_entry(rt)
    assert entry.state == "accepted", entry
    _proposed_again(rt, db, slow, "gs", retry_of=result)
    rt.close()


class _RollbackRaises(RollbackRaises):
    def committed(self, key: str) -> bool | None:
        return None


def test_a_group_whose_rollback_raised_when_cancelled_stays_unknown(store: str, db: Path) -> None:
    slow = _Slow()
    rt = _runtime(store, db, slow, _RollbackRaises(db, timeout_s=0.5))

    async def cancel_midway() -> None:
        task = asyncio.create_task(rt.arun_plan(_plan(), run_id="gr"))
        await asyncio.wait_for(slow.started.wait(), 5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        for _ in range(5):
            await asyncio.sleep(0)

    asyncio.run(cancel_midway())
    assert _group_entry(rt).state == "unknown"  # the undo did not report success: not settled
    slow.on = False
    again = rt.run_plan(_plan(), run_id="gr")
    error = again.nodes["apply"].error
    assert error is not None and error.category == "unknown_commit"
    assert slow.sent == ["a", "b"]  # never sent again blindly
    rt.close()


def test_a_group_asked_to_stop_while_a_blocking_member_runs_stops_at_its_next_member(
    store: str, db: Path
) -> None:
    import threading

    rt = Runtime(store, recover_on_start=False)
    rt.environment("settings", SqliteEnvironment(db, timeout_s=0.5))
    running, release = threading.Event(), threading.Event()
    sent: list[str] = []

    @rt.tool(effect="write", writes=["setting:{name}"], transaction="settings")
    def put(name: str, value: str, transaction: SqliteTransaction | None = None) -> str:
        """Set a setting; "slow" blocks its thread until the test releases it."""
        assert transaction is not None
        sent.append(name)
        transaction.connection.execute("INSERT OR REPLACE INTO settings VALUES (?, ?)", (name, value))
        if value == "slow" and not release.is_set():
            running.set()
            release.wait(10)
        return value

    scope = CancelScope()

    async def cancel_midway() -> PlanResult:
        task = asyncio.create_task(rt.arun_plan(_plan(), run_id="gb", cancel=scope))
        await asyncio.to_thread(running.wait, 5)
        scope.cancel()
        await asyncio.sleep(0.05)
        release.set()  # the blocking member ends; the group stops before its next member
        return await asyncio.wait_for(task, 5)

    result = asyncio.run(cancel_midway())
    assert sent == ["a", "b"]
    assert _rows(db) == []
    group = result.nodes["apply"].error
    assert group is not None and group.category == "cancelled", group
    c = result.nodes["set_c"].error
    assert c is not None and c.details["phase"] == "not_dispatched"
    assert _group_entry(rt).state == "accepted"
    again = rt.run_plan(_plan(), run_id="gb")
    assert again.nodes["apply"].ok and sent == ["a", "b", "a", "b", "c"]
    rt.close()


def test_a_plan_cancelled_while_a_blocking_member_runs_never_takes_its_answer_as_the_groups(
    store: str, db: Path
) -> None:
    import threading

    rt = Runtime(store, recover_on_start=False)
    rt.environment("settings", SqliteEnvironment(db, timeout_s=0.5))
    running, release = threading.Event(), threading.Event()

    @rt.tool(effect="write", writes=["setting:{name}"], transaction="settings")
    def put(name: str, value: str, transaction: SqliteTransaction | None = None) -> str:
        """Set a setting; "slow" blocks its thread until the test releases it."""
        if value == "slow" and not release.is_set():
            running.set()
            release.wait(10)
            return value
        assert transaction is not None
        transaction.connection.execute("INSERT OR REPLACE INTO settings VALUES (?, ?)", (name, value))
        return value

    async def cancel_midway() -> None:
        task = asyncio.create_task(rt.arun_plan(_plan(), run_id="gt"))
        await asyncio.to_thread(running.wait, 5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        deadline = time.monotonic() + 10
        while _group_entry(rt).state != "unknown":  # the cut noted; its rollback waits for the member
            assert time.monotonic() < deadline, "the group's cut was never noted"
            await asyncio.sleep(0.005)
        release.set()
        # the member's thread ends: the transaction is rolled back there, the entry settled (its
        # answer never settles the group)
        while _group_entry(rt).state == "unknown":
            assert time.monotonic() < deadline, "the group's rollback never ran"
            await asyncio.sleep(0.005)

    asyncio.run(cancel_midway())
    entry = _group_entry(rt)
    assert entry.state == "accepted", entry
    assert _rows(db) == []
    rt.close()
