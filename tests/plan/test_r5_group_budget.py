"""An atomic group whose members' declared costs cannot fit the budget is refused before any of
them runs: no tool is called, nothing is charged, and the trace names every member as never run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from actionspace import Budget, Plan, Runtime
from actionspace.catalog.spec import Cost
from actionspace.plan.environments import SqliteEnvironment, SqliteTransaction
from tests.plan.settings_table import rows as _rows


def _runtime(db: Path, budget: Budget, calls: list[str], store: str = "memory://") -> Runtime:
    rt = Runtime(store, recover_on_start=False, budgets=budget)
    rt.environment("settings", SqliteEnvironment(db))

    @rt.tool(effect="write", writes=["setting:{name}"], transaction="settings", cost=Cost(per_call=1.0))
    def put(name: str, value: str, transaction: SqliteTransaction | None = None) -> str:
        """Set a setting inside the group's transaction."""
        calls.append(name)
        assert transaction is not None
        transaction.connection.execute("INSERT OR REPLACE INTO settings VALUES (?, ?)", (name, value))
        return value

    return rt


def _plan(names: str) -> Plan:
    nodes: list[dict[str, Any]] = [
        {"id": f"set_{k}", "tool": "put", "arguments": {"name": k, "value": k.upper()}} for k in names
    ]
    nodes.append(
        {"id": "after", "tool": "put", "arguments": {"name": "z", "value": "Z"}, "depends_on": ["set_a"]}
    )
    groups = [{"id": "apply", "nodes": [f"set_{k}" for k in names]}]
    return Plan.from_dict({"nodes": nodes, "groups": groups})


@pytest.mark.parametrize(
    "budget",
    [Budget(money=2.0), Budget(calls=2), Budget(money=2.5, per="principal")],
    ids=["money", "calls", "money-per-principal"],
)
def test_a_group_over_its_budget_is_refused_before_any_member_runs(
    db: Path, budget: Budget, tmp_path: Path
) -> None:
    calls: list[str] = []
    with _runtime(db, budget, calls) as rt:
        result = rt.run_plan(_plan("abc"), run_id="b1")
        assert calls == []  # not one member's tool was called
        group = result.nodes["apply"].error
        assert group is not None and group.category == "budget_exceeded", group
        assert group.details["estimate"]["calls"] == 3
        for k in "abc":
            error = result.nodes[f"set_{k}"].error
            assert error is not None and error.category == "cancelled"
            assert error.details["phase"] == "not_dispatched"
        after = result.nodes["after"].error
        assert after is not None and after.details["blocked_by"] == "apply"
        assert rt.budget(run_id="b1") == budget.limits()  # nothing was charged
        assert [e for e in rt.ledger.list() if e.node_id == "group:apply"] == []
        events = rt.trace.events("b1")
        for k in "abc":
            never = [
                e.data for e in events if e.kind == "plan_node_cancelled" and e.data.get("node") == f"set_{k}"
            ]
            assert never and never[0]["phase"] == "not_dispatched"
            assert not [e for e in events if e.kind == "dispatched" and e.call_id == f"b1:set_{k}"]
    assert _rows(db) == []


def test_a_group_that_fits_its_budget_still_runs_and_is_charged_per_member(db: Path) -> None:
    calls: list[str] = []
    with _runtime(db, Budget(money=3.0), calls) as rt:
        result = rt.run_plan(_plan("abc"), run_id="b2")
        assert result.nodes["apply"].ok, result.nodes["apply"].error
        assert calls == ["a", "b", "c"]
        assert rt.budget(run_id="b2")["money"] == pytest.approx(0.0)
        after = result.nodes["after"].error  # the fourth call no longer fits: refused on its own
        assert after is not None and after.category == "budget_exceeded"
    assert _rows(db) == [("a", "A"), ("b", "B"), ("c", "C")]


def test_a_group_refused_for_its_budget_runs_when_proposed_again_with_room(db: Path) -> None:
    calls: list[str] = []
    budget = Budget(money=2.0, per="principal")
    with _runtime(db, budget, calls) as rt:
        first = rt.run_plan(_plan("abc"), run_id="b3")
        assert first.nodes["apply"].error is not None
    with _runtime(db, Budget(money=10.0), calls) as rt:
        again = rt.run_plan(_plan("abc"), run_id="b3")
        assert again.nodes["apply"].ok, again.nodes["apply"].error
    assert calls == ["a", "b", "c", "z"]
