"""An atomic group proposed again after it committed replays its recorded outcome from the ledger
without spending budget: the replay is allowed when the budget left could not pay for the group,
its members' tools are not called again, and nothing more is charged."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from actionspace import Budget, Plan, Runtime
from actionspace.catalog.spec import Cost
from actionspace.plan.environments import SqliteEnvironment, SqliteTransaction
from tests.plan.settings_table import rows as _rows


def _runtime(db: Path, budget: Budget, calls: list[str]) -> Runtime:
    rt = Runtime("memory://", recover_on_start=False, budgets=budget)
    rt.environment("settings", SqliteEnvironment(db))

    @rt.tool(effect="write", writes=["setting:{name}"], transaction="settings", cost=Cost(per_call=1.0))
    def put(name: str, value: str, transaction: SqliteTransaction | None = None) -> str:
        """Set a setting inside the group's transaction."""
        calls.append(name)
        assert transaction is not None
        transaction.connection.execute("INSERT OR REPLACE INTO settings VALUES (?, ?)", (name, value))
        return value

    return rt


def _plan() -> Plan:
    nodes: list[dict[str, Any]] = [
        {"id": f"set_{k}", "tool": "put", "arguments": {"name": k, "value": k.upper()}} for k in "ab"
    ]
    return Plan.from_dict({"nodes": nodes, "groups": [{"id": "apply", "nodes": ["set_a", "set_b"]}]})


def test_a_committed_group_proposed_again_is_replayed_with_the_budget_spent(db: Path) -> None:
    calls: list[str] = []
    budget = Budget(calls=2)
    with _runtime(db, budget, calls) as rt:
        first = rt.run_plan(_plan(), run_id="g1")
        assert first.nodes["apply"].ok, first.nodes["apply"].error
        assert rt.budget(run_id="g1") == {"calls": 0}
        again = rt.run_plan(_plan(), run_id="g1")
        group = again.nodes["apply"]
        assert group.ok, group.error
        assert group.diagnostics.get("replayed") is True
        assert again.nodes["set_a"].ok and again.nodes["set_b"].ok
        assert rt.budget(run_id="g1") == {"calls": 0}
    assert calls == ["a", "b"]  # each member's tool was called once
    assert _rows(db) == [("a", "A"), ("b", "B")]


def test_a_group_that_never_ran_is_still_refused_when_the_budget_cannot_pay(db: Path) -> None:
    calls: list[str] = []
    with _runtime(db, Budget(calls=1), calls) as rt:
        result = rt.run_plan(_plan(), run_id="g2")
        error = result.nodes["apply"].error
        assert error is not None and error.category == "budget_exceeded"
    assert calls == []
