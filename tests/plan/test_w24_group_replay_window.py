"""An atomic group the budget check lets through as a replay (its entry read ``committed``) must
not run uncharged when, before the ledger reads the entry, it stops being a replay (purged by
the ledger's retention): the ledger would then send the group afresh, so its members' estimates
together are checked first, and a group that cannot fit is refused whole before any member runs.

The interleaving is forced: the purge lands right after the budget check read the entry."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from actionspace import Budget, Plan, Runtime
from actionspace.catalog.spec import Cost
from actionspace.ledger.entries import LedgerStore
from actionspace.plan import atomic
from actionspace.plan.environments import SqliteEnvironment, SqliteTransaction
from tests.plan.settings_table import rows as _rows


def _runtime(db: Path, budget: Budget, calls: list[str], store: str) -> Runtime:
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


def _plan() -> Plan:
    nodes: list[dict[str, Any]] = [
        {"id": f"set_{k}", "tool": "put", "arguments": {"name": k, "value": k.upper()}} for k in "ab"
    ]
    return Plan.from_dict({"nodes": nodes, "groups": [{"id": "apply", "nodes": ["set_a", "set_b"]}]})


def _purge_after_the_check(monkeypatch: pytest.MonkeyPatch, rt: Runtime) -> list[bool]:
    decisions: list[bool] = []
    decide = atomic._replayed

    async def decide_then_purge(store: LedgerStore, key: str) -> bool:
        exempt = await decide(store, key)
        decisions.append(exempt)
        assert rt.ledger.purge(older_than=float("inf")) >= 1  # between the check and the ledger's read
        return exempt

    monkeypatch.setattr(atomic, "_replayed", decide_then_purge)
    return decisions


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return "memory://" if request.param == "memory" else f"sqlite:///{tmp_path / 'ledger.db'}"


def test_a_group_whose_replay_is_purged_before_the_ledger_reads_it_is_refused_whole_over_budget(
    monkeypatch: pytest.MonkeyPatch, db: Path, store: str
) -> None:
    calls: list[str] = []
    with _runtime(db, Budget(calls=3), calls, store) as rt:
        first = rt.run_plan(_plan(), run_id="g")
        assert first.nodes["apply"].ok, first.nodes["apply"].error
        assert rt.budget(run_id="g") == {"calls": 1}
        decisions = _purge_after_the_check(monkeypatch, rt)

        again = rt.run_plan(_plan(), run_id="g")

        assert decisions == [True]  # the budget check took it for a replay
        assert calls == ["a", "b"]  # no member ran again (none ran only to be rolled back)
        error = again.nodes["apply"].error
        assert error is not None and error.category == "budget_exceeded", again.nodes["apply"]
        assert error.details["group"] == "apply"
        assert rt.budget(run_id="g") == {"calls": 1}
    assert _rows(db) == [("a", "A"), ("b", "B")]


def test_a_group_whose_replay_is_purged_runs_again_and_is_charged_when_the_budget_fits(
    monkeypatch: pytest.MonkeyPatch, db: Path, store: str
) -> None:
    calls: list[str] = []
    with _runtime(db, Budget(calls=4), calls, store) as rt:
        assert rt.run_plan(_plan(), run_id="g").nodes["apply"].ok
        decisions = _purge_after_the_check(monkeypatch, rt)

        again = rt.run_plan(_plan(), run_id="g")

        assert decisions == [True]
        group = again.nodes["apply"]
        assert group.ok, group.error
        assert not group.diagnostics.get("replayed")
        assert rt.budget(run_id="g") == {"calls": 0}
    assert calls == ["a", "b", "a", "b"]
