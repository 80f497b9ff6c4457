"""A wide parallel plan against a small calls budget: exactly as many nodes run as the budget
allows, every other one ends ``budget_exceeded`` with a recovery, atomic groups racing for the last
calls never run half their members, and the budget the runtime shows is what its store holds."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actionspace import Budget, Plan, Runtime
from actionspace.catalog.spec import Cost
from actionspace.plan.environments import SqliteEnvironment, SqliteTransaction
from tests.pg import fresh_schema
from tests.plan.settings_table import make_settings_db, rows

LIMIT = 10


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "memory":
        yield "memory://"
    elif request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'runtime.db'}"
    else:
        yield from fresh_schema(request.getfixturevalue("pg_url"))


def test_a_hundred_parallel_nodes_against_ten_calls_run_exactly_ten(store: str) -> None:
    ran: list[int] = []
    lock = threading.Lock()
    with Runtime(store, recover_on_start=False, budgets=Budget(calls=LIMIT)) as rt:

        @rt.tool(effect="read", cost=Cost(per_call=1.0))
        async def probe(n: int) -> int:
            """Probe one vendor."""
            with lock:
                ran.append(n)
            return n

        nodes = [{"id": f"n{i}", "tool": "probe", "arguments": {"n": i}} for i in range(100)]
        result = rt.run_plan(Plan.from_dict({"nodes": nodes}), run_id="wide")
        statuses = [result.nodes[f"n{i}"] for i in range(100)]
        assert len(ran) == LIMIT and len(set(ran)) == LIMIT
        assert sum(1 for o in statuses if o.ok) == LIMIT
        refused = [o.error for o in statuses if not o.ok]
        assert len(refused) == 100 - LIMIT
        for error in refused:
            assert error is not None and error.category == "budget_exceeded"
            assert error.recovery
        assert rt.meter is not None and rt.meter.used(run_id="wide").calls == LIMIT
        assert rt.budget(run_id="wide") == {"calls": 0}


def _grouped_runtime(store: str, tmp_path: Path, groups: int, calls: dict[int, list[str]]) -> Runtime:
    rt = Runtime(store, recover_on_start=False, budgets=Budget(calls=LIMIT))
    for g in range(groups):
        db = make_settings_db(tmp_path / f"env{g}.db")
        rt.environment(f"env{g}", SqliteEnvironment(db))
        calls[g] = []

        def put(name: str, value: str, transaction: SqliteTransaction | None = None, _g: int = g) -> str:
            assert transaction is not None
            calls[_g].append(name)
            transaction.connection.execute("INSERT OR REPLACE INTO settings VALUES (?, ?)", (name, value))
            return value

        rt.add_tool(
            name=f"put{g}",
            description="Set a setting inside the group's transaction.",
            input_schema={
                "type": "object",
                "properties": {"name": {"type": "string"}, "value": {"type": "string"}},
                "required": ["name", "value"],
            },
            fn=put,
            effect="write",
            writes=[f"setting{g}:{{name}}"],
            transaction=f"env{g}",
        )
    return rt


@pytest.mark.parametrize("groups", [4, 6])
def test_atomic_groups_racing_for_the_last_calls_never_run_half_their_members(
    store: str, tmp_path: Path, groups: int
) -> None:
    calls: dict[int, list[str]] = {}
    rt = _grouped_runtime(store, tmp_path, groups, calls)
    try:
        nodes: list[dict[str, Any]] = []
        spec: list[dict[str, Any]] = []
        for g in range(groups):
            members = [f"g{g}m{m}" for m in range(3)]
            for m in members:
                nodes.append({"id": m, "tool": f"put{g}", "arguments": {"name": m, "value": "v"}})
            spec.append({"id": f"group{g}", "nodes": members})
        result = rt.run_plan(Plan.from_dict({"nodes": nodes, "groups": spec}), run_id="groups")
        whole = [g for g in range(groups) if result.nodes[f"group{g}"].ok]
        assert len(whole) == LIMIT // 3
        for g in range(groups):
            env_rows = rows(tmp_path / f"env{g}.db")
            if g in whole:
                assert len(calls[g]) == 3 and len(env_rows) == 3
            else:
                error = result.nodes[f"group{g}"].error
                assert error is not None and error.category == "budget_exceeded", error
                assert calls[g] == [] and env_rows == []  # no member of a refused group ran
        assert rt.meter is not None and rt.meter.used(run_id="groups").calls == 3 * len(whole)
        assert rt.budget(run_id="groups") == {"calls": LIMIT - 3 * len(whole)}
    finally:
        rt.close()
