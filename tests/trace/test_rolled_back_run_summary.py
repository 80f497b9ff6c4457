"""A run's summary counts an atomic group's rolled-back member once: as one call that ended in error.

The rollback answers the member's call again (a second ``observation`` event, marked
``rolled_back``); a listing that counted observation events made it two calls, one of them ok.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from actionspace import Plan, Runtime, ToolError
from actionspace.plan.environments import SqliteEnvironment, SqliteTransaction
from tests.pg import STORES, store_url


@pytest.fixture(params=STORES)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    yield from store_url(request, tmp_path)


def test_a_rolled_back_member_is_one_call_that_ended_in_error(url: str, tmp_path: Path) -> None:
    db = tmp_path / "env.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE settings (name TEXT PRIMARY KEY, value TEXT NOT NULL)")
    rt = Runtime(url, recover_on_start=False)
    rt.environment("settings", SqliteEnvironment(db))

    @rt.tool(effect="write", writes=["setting:{name}"], transaction="settings")
    def put(name: str, value: str, transaction: SqliteTransaction | None = None) -> str:
        """Set a setting inside the group's transaction."""
        if value == "bad":
            raise ToolError("conflict", f"{name} is locked by someone else")
        assert transaction is not None
        transaction.connection.execute("INSERT OR REPLACE INTO settings VALUES (?, ?)", (name, value))
        return value

    nodes = [
        {"id": f"set_{k}", "tool": "put", "arguments": {"name": k, "value": v}}
        for k, v in {"a": "1", "b": "bad", "c": "3"}.items()
    ]
    plan = Plan.from_dict({"nodes": nodes, "groups": [{"id": "apply", "nodes": [n["id"] for n in nodes]}]})
    try:
        result = rt.run_plan(plan, run_id="rolled")
        assert result.nodes["set_a"].error is not None  # undone by the group's rollback
        (summary,) = [s for s in rt.trace.runs(limit=10) if s.run_id == "rolled"]
        # set_a ran (ok) then was undone (error); set_b failed; set_c never ran
        assert (summary.calls, summary.errors) == (2, 2)
    finally:
        rt.close()
