"""Monitoring plans with atomic groups: the group's own ledger record is not a tool call."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from actionspace import Runtime, ToolError
from actionspace.evaluation.monitor import monitor
from actionspace.plan.environments import SqliteEnvironment, SqliteTransaction
from tests.plan.settings_table import CommitAnswerLost


def _runtime(db: Path, environment: SqliteEnvironment) -> Runtime:
    rt = Runtime("memory://", recover_on_start=False)
    rt.environment("settings", environment)

    @rt.tool(effect="write", writes=["setting:{name}"], transaction="settings")
    def put(name: str, value: str, transaction: SqliteTransaction | None = None) -> str:
        """Set a setting inside the group's transaction."""
        if value == "bad":
            raise ToolError("conflict", f"{name} is locked by someone else")
        assert transaction is not None
        transaction.connection.execute("INSERT OR REPLACE INTO settings VALUES (?, ?)", (name, value))
        return value

    return rt


def _plan(values: dict[str, str]) -> dict[str, Any]:
    nodes = [
        {"id": f"set_{k}", "tool": "put", "arguments": {"name": k, "value": v}} for k, v in values.items()
    ]
    return {"nodes": nodes, "groups": [{"id": "apply", "nodes": [f"set_{k}" for k in values]}]}


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "env.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE settings (name TEXT PRIMARY KEY, value TEXT NOT NULL)")
    return path


def test_a_failed_group_counts_its_members_calls_and_its_failure_once(db: Path) -> None:
    rt = _runtime(db, SqliteEnvironment(db))
    result = rt.run_plan(_plan({"a": "1", "b": "bad"}), run_id="g")
    assert result.nodes["set_b"].error is not None

    report = monitor(rt.trace)
    assert [t.tool for t in report.tools] == ["put"]
    put = report.tool("put")
    assert (report.calls, put.calls, put.selection_rate) == (2, 2, 1.0)
    assert put.failures_by_category == {"cancelled": 1, "conflict": 1}  # set_a was rolled back
    assert put.ok_results == 0


def test_an_unknown_commit_of_a_group_is_reported_for_its_members_tool(db: Path) -> None:
    rt = _runtime(db, CommitAnswerLost(db))
    result = rt.run_plan(_plan({"a": "1", "b": "2"}), run_id="g")
    group = result.nodes["apply"].error
    assert group is not None and group.category == "unknown_commit"

    report = monitor(rt.trace)
    assert [t.tool for t in report.tools] == ["put"]
    assert (report.calls, report.tool("put").unknown_commits) == (2, 2)
    assert [(a.kind, a.tool, a.count) for a in report.alerts] == [("unknown_commits", "put", 2)]
