"""Atomic groups: all members' writes become visible together or not at all, committed once."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from actionspace import Plan, Runtime, ToolError
from actionspace.plan.environments import SqliteEnvironment, SqliteTransaction
from tests.plan.settings_table import rows as _rows


@pytest.fixture
def rt(db: Path) -> Runtime:
    runtime = Runtime("memory://", recover_on_start=False)
    runtime.environment("settings", SqliteEnvironment(db))

    @runtime.tool(effect="write", writes=["setting:{name}"], transaction="settings")
    def put(name: str, value: str, transaction: SqliteTransaction | None = None) -> str:
        """Set a setting (inside a group's transaction when there is one)."""
        if value == "bad":
            raise ToolError("conflict", f"{name} is locked by someone else")
        if transaction is not None:
            transaction.connection.execute("INSERT OR REPLACE INTO settings VALUES (?, ?)", (name, value))
        else:
            with sqlite3.connect(db) as conn:
                conn.execute("INSERT OR REPLACE INTO settings VALUES (?, ?)", (name, value))
        return value

    @runtime.tool(effect="external", writes=["mail:{to}"])
    def notify(to: str, text: str) -> str:
        """Tell someone."""
        return "sent"

    @runtime.tool(effect="read", reads=["setting:"])
    def check(name: str) -> str:
        """Read back a setting."""
        with sqlite3.connect(db) as conn:
            row = conn.execute("SELECT value FROM settings WHERE name = ?", (name,)).fetchone()
        return row[0] if row else ""

    return runtime


def _plan(values: dict[str, str], **extra: Any) -> dict[str, Any]:
    nodes: list[dict[str, Any]] = [
        {"id": f"set_{k}", "tool": "put", "arguments": {"name": k, "value": v}} for k, v in values.items()
    ]
    nodes.append({"id": "verify", "tool": "check", "arguments": {"name": "a"}, "depends_on": ["set_a"]})
    return {"nodes": nodes, "groups": [{"id": "apply", "nodes": [f"set_{k}" for k in values], **extra}]}


def test_a_group_commits_all_members_together_and_only_once(rt: Runtime, db: Path) -> None:
    plan = Plan.from_dict(_plan({"a": "1", "b": "2", "c": "3"}))
    result = rt.run_plan(plan, run_id="g1")
    assert result.status == "ok", result.failed
    assert _rows(db) == [("a", "1"), ("b", "2"), ("c", "3")]
    assert result.nodes["verify"].data == "1"
    assert [i.call_id for i in result.nodes["apply"].items] == ["g1:set_a", "g1:set_b", "g1:set_c"]
    entries = [e for e in rt.ledger.list() if e.node_id == "group:apply"]
    assert len(entries) == 1 and entries[0].state == "committed"
    with sqlite3.connect(db) as conn:
        conn.execute("DELETE FROM settings")
    again = rt.run_plan(plan, run_id="g1")  # the same group again: replayed, not re-applied
    assert again.nodes["apply"].diagnostics.get("replayed") is True
    assert again.nodes["set_b"].data == "2"
    assert _rows(db) == []


def test_one_failing_member_rolls_back_every_write_of_the_group(rt: Runtime, db: Path) -> None:
    result = rt.run_plan(_plan({"a": "1", "b": "bad", "c": "3"}), run_id="g2")
    assert _rows(db) == []
    a, b, c = (result.nodes[f"set_{k}"] for k in "abc")
    assert b.error is not None and b.error.category == "conflict"
    assert a.error is not None and a.error.category == "cancelled" and a.error.details["rolled_back"] is True
    assert c.error is not None and c.error.category == "cancelled"  # never ran
    assert c.error.details == {"phase": "not_dispatched", "group": "apply"}
    verify = result.nodes["verify"].error
    assert verify is not None and verify.details["blocked_by"] == "apply"


def test_a_lost_commit_is_settled_by_the_environment_status_query(rt: Runtime, db: Path) -> None:
    class LosesAnswer(SqliteEnvironment):
        def begin(self, key: str) -> SqliteTransaction:
            tx = super().begin(key)
            real = tx.commit

            def commit() -> None:
                real()
                raise ConnectionError("reply lost after commit")

            tx.commit = commit  # type: ignore[method-assign]
            return tx

    rt.environment("settings", LosesAnswer(db))
    result = rt.run_plan(_plan({"a": "1", "b": "2"}), run_id="g3")
    assert result.nodes["apply"].ok
    assert result.nodes["apply"].diagnostics["resolved_by"] == "status_query"
    assert result.nodes["set_a"].data == "1"  # it ran here: its own observation is known
    assert _rows(db) == [("a", "1"), ("b", "2")]


@pytest.mark.parametrize(
    ("plan", "fragment"),
    [
        (
            {
                "nodes": [{"id": "x", "tool": "check", "arguments": {"name": "a"}}],
                "groups": [{"id": "g", "nodes": ["x"]}],
            },
            "declares no transactional environment",
        ),
        (
            {
                "nodes": [{"id": "x", "tool": "notify", "arguments": {"to": "a", "text": "b"}}],
                "groups": [{"id": "g", "nodes": ["x"]}],
            },
            "cannot be rolled back",
        ),
        (
            {
                "nodes": [{"id": "x", "tool": "put", "arguments": {"name": "a", "value": "1"}}],
                "groups": [{"id": "g", "nodes": ["x"], "mode": "switch"}],
            },
            "offers 'transaction'",
        ),
        (
            {
                "nodes": [{"id": "x", "tool": "put", "arguments": {"name": "a", "value": "1"}}],
                "groups": [{"id": "g", "nodes": ["x", "ghost"]}],
            },
            "no node 'ghost'",
        ),
        (
            {
                "nodes": [{"id": "x", "tool": "put", "arguments": {"name": "a", "value": "1"}}],
                "groups": [{"id": "x", "nodes": ["x"]}],
            },
            "already a node",
        ),
    ],
)
def test_an_unusable_group_rejects_the_plan(rt: Runtime, plan: dict[str, Any], fragment: str) -> None:
    result = rt.run_plan(plan)
    assert result.error is not None and result.error.category == "invalid_arguments"
    assert fragment in result.error.message


def test_a_group_split_by_an_outside_node_is_rejected(rt: Runtime, db: Path) -> None:
    result = rt.run_plan(
        {
            "nodes": [
                {"id": "p1", "tool": "put", "arguments": {"name": "a", "value": "1"}},
                {"id": "mid", "tool": "check", "arguments": {"name": "a"}, "depends_on": ["p1"]},
                {"id": "p2", "tool": "put", "arguments": {"name": "b", "value": "2"}, "depends_on": ["mid"]},
            ],
            "groups": [{"id": "g", "nodes": ["p1", "p2"]}],
        }
    )
    assert result.error is not None and "split" in result.error.field_errors[0].message
    assert _rows(db) == []


def test_a_group_interrupted_by_a_crash_is_settled_by_recover_through_the_environment(
    rt: Runtime, db: Path
) -> None:
    plan = Plan.from_dict(_plan({"a": "1", "b": "2"}))
    first = rt.run_plan(plan, run_id="g4")
    assert first.status == "ok"
    (entry,) = [e for e in rt.ledger.list() if e.node_id == "group:apply"]
    # what a crash between the environment's commit and the ledger's leaves behind
    restarted = Runtime("memory://", recover_on_start=False)
    restarted.environment("settings", SqliteEnvironment(db))
    for name in ("put", "check"):
        restarted.register(rt.catalog.get(name))
    restarted.ledger.begin(entry.evolve(state="dispatched", observation=None))
    report = restarted.recover()
    assert report.committed == [entry.key]
    with sqlite3.connect(db) as conn:
        conn.execute("DELETE FROM settings")
    again = restarted.run_plan(plan, run_id="g4")
    assert again.status == "ok"
    assert again.nodes["set_a"].diagnostics["group_committed"] is True
    assert _rows(db) == []  # recovered as committed: nothing applied twice
