"""A member's result is taken from its group's observation by its exact call id: member ids that
contain ':' (one id the tail of another after a ':') are never mixed up."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from actionspace import Budget, Plan, Runtime
from actionspace.plan.environments import SqliteEnvironment, SqliteTransaction


def _runtime(db: Path, sent: list[str], budget: Budget | None = None) -> Runtime:
    rt = Runtime("memory://", recover_on_start=False, budgets=budget)
    rt.environment("settings", SqliteEnvironment(db))

    @rt.tool(effect="write", writes=["setting:{name}"], transaction="settings")
    def put(name: str, value: str, transaction: SqliteTransaction | None = None) -> str:
        """Set a setting inside the group's transaction."""
        assert transaction is not None
        sent.append(name)
        transaction.connection.execute("INSERT OR REPLACE INTO settings VALUES (?, ?)", (name, value))
        return value

    return rt


def _plan(order: list[str], group: str = "apply") -> Plan:
    nodes: list[dict[str, Any]] = [
        {"id": k, "tool": "put", "arguments": {"name": k, "value": f"value of {k}"}} for k in order
    ]
    return Plan.from_dict({"nodes": nodes, "groups": [{"id": group, "nodes": order}]})


@pytest.mark.parametrize("order", [["x:a", "a"], ["a", "x:a"], ["y:x:a", "x:a", "a"]])
def test_members_whose_ids_end_alike_keep_their_own_results_when_replayed(db: Path, order: list[str]) -> None:
    sent: list[str] = []
    with _runtime(db, sent) as rt:
        first = rt.run_plan(_plan(order), run_id="t2-ids")
        assert first.nodes["apply"].ok, first.nodes["apply"].error
        again = rt.run_plan(_plan(order), run_id="t2-ids")  # the group is replayed from the ledger
        assert again.nodes["apply"].ok, again.nodes["apply"].error
        assert sent == order  # sent once
        for k in order:
            assert first.nodes[k].data == f"value of {k}"
            assert again.nodes[k].data == f"value of {k}", k
            assert again.nodes[k].call_id == f"t2-ids:{k}"


def test_members_of_a_group_whose_id_holds_a_colon_are_named_by_the_run(db: Path) -> None:
    sent: list[str] = []
    with _runtime(db, sent, Budget(calls=1)) as rt:  # two members cannot fit: refused whole
        result = rt.run_plan(_plan(["a", "b"], group="g:1"), run_id="t2-g")
        group = result.nodes["g:1"].error
        assert group is not None and group.category == "budget_exceeded"
        assert sent == []
        for k in ("a", "b"):
            obs = result.nodes[k]
            assert obs.call_id == f"t2-g:{k}"
            assert obs.error is not None and obs.error.details["phase"] == "not_dispatched"
