"""The budget reservations of an atomic group's members are settled with the group: to what each
member actually used when the group commits, released when the group rolls back or is stopped, so
a rolled-back group costs nothing and a committed one is charged its actual cost, not its estimate."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from actionspace import Budget, CancelScope, Plan, Runtime
from actionspace.catalog.spec import Cost
from actionspace.plan import PlanResult
from actionspace.plan.environments import SqliteEnvironment, SqliteTransaction
from tests.plan.settings_table import rows as _rows

PER_CALL = 1.0
PER_BYTE = 0.0001
LIMIT = 100.0


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return "memory://" if request.param == "memory" else f"sqlite:///{tmp_path / 'runtime.db'}"


class _Gate:
    def __init__(self) -> None:
        self.started = asyncio.Event()


def _runtime(store: str, db: Path, gate: _Gate | None = None) -> Runtime:
    rt = Runtime(store, recover_on_start=False, budgets=Budget(money=LIMIT))
    rt.environment("settings", SqliteEnvironment(db, timeout_s=0.5))

    @rt.tool(
        effect="write",
        writes=["setting:{name}"],
        transaction="settings",
        cost=Cost(per_call=PER_CALL, per_byte=PER_BYTE),
    )
    async def put(name: str, value: str, transaction: SqliteTransaction | None = None) -> str:
        """Set a setting inside the group's transaction; "boom" fails, "slow" waits."""
        assert transaction is not None
        if value == "boom":
            raise ValueError("refused value")
        transaction.connection.execute("INSERT OR REPLACE INTO settings VALUES (?, ?)", (name, value))
        if value == "slow" and gate is not None:
            gate.started.set()
            await asyncio.sleep(30)
        return value

    return rt


def _plan(values: dict[str, str]) -> Plan:
    nodes: list[dict[str, Any]] = [
        {"id": f"set_{k}", "tool": "put", "arguments": {"name": k, "value": v}} for k, v in values.items()
    ]
    return Plan.from_dict({"nodes": nodes, "groups": [{"id": "apply", "nodes": [n["id"] for n in nodes]}]})


def _actual(value: str) -> float:
    """What one member returning ``value`` uses: its call and the bytes of its JSON result."""
    return PER_CALL + PER_BYTE * len(f'"{value}"')


def test_a_committed_group_is_charged_what_its_members_actually_used(store: str, db: Path) -> None:
    with _runtime(store, db) as rt:
        result = rt.run_plan(_plan({"a": "one", "b": "two"}), run_id="t2-ok")
        assert result.nodes["apply"].ok, result.nodes["apply"].error
        left = rt.budget(run_id="t2-ok")["money"]
        assert left == pytest.approx(LIMIT - _actual("one") - _actual("two"))
        metered = [e for e in rt.trace.events("t2-ok") if e.kind == "metered"]
        charged = {e.call_id: e.data["charged"]["money"] for e in metered}
        assert charged == {
            "t2-ok:set_a": pytest.approx(_actual("one")),
            "t2-ok:set_b": pytest.approx(_actual("two")),
        }
    assert _rows(db) == [("a", "one"), ("b", "two")]


def test_a_rolled_back_group_leaves_the_budget_as_it_was(store: str, db: Path) -> None:
    with _runtime(store, db) as rt:
        result = rt.run_plan(_plan({"a": "one", "b": "two", "c": "boom", "d": "four"}), run_id="t2-rb")
        group = result.nodes["apply"].error
        assert group is not None
        undone = result.nodes["set_a"].error
        assert undone is not None and undone.details["rolled_back"] is True
        assert rt.budget(run_id="t2-rb") == {"money": pytest.approx(LIMIT)}
        released = [e for e in rt.trace.events("t2-rb") if e.kind == "metered"]
        assert {e.call_id for e in released} == {"t2-rb:set_a", "t2-rb:set_b", "t2-rb:set_c"}
        assert all(e.data["charged"]["money"] == 0 for e in released)
    assert _rows(db) == []


def test_a_group_stopped_while_its_members_run_leaves_the_budget_as_it_was(store: str, db: Path) -> None:
    gate = _Gate()
    scope = CancelScope()

    async def scenario(rt: Runtime) -> PlanResult:
        plan = _plan({"a": "one", "b": "slow", "c": "three"})
        task = asyncio.create_task(rt.arun_plan(plan, run_id="t2-stop", cancel=scope))
        await asyncio.wait_for(gate.started.wait(), 5)
        scope.cancel(reason="stop")
        return await asyncio.wait_for(task, 5)

    with _runtime(store, db, gate) as rt:
        result = asyncio.run(scenario(rt))
        group = result.nodes["apply"].error
        assert group is not None and group.category == "cancelled"
        assert rt.budget(run_id="t2-stop") == {"money": pytest.approx(LIMIT)}
    assert _rows(db) == []
