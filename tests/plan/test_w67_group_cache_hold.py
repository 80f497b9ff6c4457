"""A member of an atomic group that the read cache could serve is run by the group all the same
(inside its transaction) and charged its call in full, so the group's hold counts its whole
estimate: a group never spends past a budget, whether its read was cached before or not."""

from __future__ import annotations

from pathlib import Path

import pytest

from actionspace import Cost, Plan, Principal, Runtime
from actionspace.plan.environments import SqliteEnvironment, SqliteTransaction
from actionspace.plan.group_budget import group_estimate, group_if_sent
from actionspace.policy.budget import Budget, Usage, estimate
from tests.plan.settings_table import make_settings_db, rows

ALICE = Principal(id="alice", scopes=("*",), tenant="t1")
WHO = ("alice", "t1")
BOUND = 512


def _runtime(url: str, env_db: Path, budget: Budget) -> tuple[Runtime, list[str]]:
    rt = Runtime(url, budgets=[budget], principal=ALICE, recover_on_start=False)
    rt.environment("settings", SqliteEnvironment(env_db))
    ran: list[str] = []

    @rt.tool(
        effect="read",
        reads=["setting:{name}"],
        transaction="settings",
        cache_ttl=600,
        cost=Cost(per_call=1.0),
        max_observation_bytes=BOUND,
    )
    def peek(name: str, transaction: SqliteTransaction | None = None) -> str:
        """Read a setting (inside a group, through its transaction)."""
        ran.append(f"peek {name}")
        return "seen"

    @rt.tool(
        effect="write",
        writes=["setting:{name}"],
        transaction="settings",
        cost=Cost(per_call=1.0),
        max_observation_bytes=BOUND,
    )
    def put(name: str, value: str, transaction: SqliteTransaction | None = None) -> str:
        """Set a setting inside the group's transaction."""
        assert transaction is not None
        ran.append(f"put {name}")
        transaction.connection.execute("INSERT OR REPLACE INTO settings VALUES (?, ?)", (name, value))
        return value

    return rt, ran


def _plan() -> Plan:
    nodes = [
        {"id": "r1", "tool": "peek", "arguments": {"name": "a"}},
        {"id": "w1", "tool": "put", "arguments": {"name": "a", "value": "v"}},
    ]
    return Plan.from_dict({"nodes": nodes, "groups": [{"id": "apply", "nodes": ["r1", "w1"]}]})


@pytest.fixture(params=["memory", "sqlite"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return "memory://" if request.param == "memory" else f"sqlite:///{tmp_path / 'shared.db'}"


@pytest.mark.parametrize("unit", ["calls", "money"])
def test_a_group_with_a_cached_read_is_refused_whole_rather_than_spend_past_the_budget(
    url: str, tmp_path: Path, unit: str
) -> None:
    budget = Budget(calls=2, per="principal") if unit == "calls" else Budget(money=2.0, per="principal")
    rt, ran = _runtime(url, make_settings_db(tmp_path / "env.db"), budget)
    try:
        first = rt.call({"name": "peek", "arguments": {"name": "a"}}, run_id=rt.new_run())
        assert first.ok, first.error
        assert rt.meter is not None
        assert getattr(rt.meter.used(principal=WHO), unit) == 1
        result = rt.run_plan(_plan(), run_id=rt.new_run())
        used = rt.meter.used(principal=WHO)
        assert getattr(used, unit) <= 2 + 1e-9, (used, ran)
        group = result.nodes["r1"]
        assert group.error is not None and group.error.category in ("budget_exceeded", "cancelled")
        assert ran == ["peek a"]  # none of the members ran: the group was refused before them
        assert rows(tmp_path / "env.db") == []
        assert getattr(used, unit) == 1
    finally:
        rt.close()


def test_a_group_with_a_cached_read_that_fits_is_charged_each_member_and_holds_nothing_after(
    url: str, tmp_path: Path
) -> None:
    rt, ran = _runtime(url, make_settings_db(tmp_path / "env.db"), Budget(calls=3, per="principal"))
    try:
        assert rt.call({"name": "peek", "arguments": {"name": "a"}}, run_id=rt.new_run()).ok
        result = rt.run_plan(_plan(), run_id=rt.new_run())
        assert result.status == "ok", result.nodes
        assert ran == ["peek a", "peek a", "put a"]  # the group runs its read inside the transaction
        assert rt.meter is not None
        used = rt.meter.used(principal=WHO)
        assert used.calls == 3 and used.money == pytest.approx(3.0)
        assert used.bytes <= 3 * BOUND
        assert rows(tmp_path / "env.db") == [("a", "v")]
        assert rt.budget()["calls"] == 0
    finally:
        rt.close()


def test_the_group_estimate_counts_a_cacheable_member_as_a_call_it_will_run() -> None:
    rt, _ran = _runtime("memory://", Path("/nonexistent"), Budget(calls=9))
    try:
        peek, put = rt.catalog.get("peek"), rt.catalog.get("put")
        members = [(peek, {"name": "a"}), (put, {"name": "a", "value": "v"})]
        need = group_estimate(members, {"r1", "w1"})
        assert need == estimate(peek, {"name": "a"}) + estimate(put, {"name": "a", "value": "v"})
        assert group_if_sent(members, {"r1", "w1"}) == Usage(calls=2, items=2, money=2.0)
    finally:
        rt.close()
