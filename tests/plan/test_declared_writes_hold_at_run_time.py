"""A node's own ``writes`` narrows its tool's write templates; when the templates' values come from
references, the narrowed set is checked again once the references are resolved, so two writers of
one resource never run at once on the strength of a claim the check could not verify."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

from actionspace import Runtime
from actionspace.plan.environments import SqliteEnvironment, SqliteTransaction


def _runtime(active: dict[str, int], overlaps: list[str], written: list[str]) -> Runtime:
    rt = Runtime("memory://", recover_on_start=False)

    @rt.tool(effect="read", reads=["cfg:"])
    def target(path: str) -> dict[str, str]:
        """Which file to write."""
        return {"path": path}

    @rt.tool(effect="write", writes=["file:{path}"])
    async def write_file(path: str, text: str) -> str:
        """Write a file."""
        active[path] = active.get(path, 0) + 1
        if active[path] > 1:
            overlaps.append(path)
        await asyncio.sleep(0.02)
        active[path] -= 1
        written.append(path)
        return text

    return rt


def _plan(resolved: str, declared: list[str]) -> dict[str, Any]:
    return {
        "nodes": [
            {"id": "t", "tool": "target", "arguments": {"path": resolved}},
            {
                "id": "w1",
                "tool": "write_file",
                "arguments": {"path": {"$ref": "t.data.path"}, "text": "1"},
                "writes": declared,
            },
            {"id": "w2", "tool": "write_file", "arguments": {"path": "b", "text": "2"}, "depends_on": ["t"]},
        ]
    }


def test_a_write_set_narrowed_past_what_a_reference_resolves_to_fails_the_node_before_its_tool() -> None:
    active: dict[str, int] = {}
    overlaps: list[str] = []
    written: list[str] = []
    rt = _runtime(active, overlaps, written)
    result = rt.run_plan(_plan("b", ["file:a"]))
    assert overlaps == []
    assert written == ["b"]  # only w2 wrote
    failed = result.nodes["w1"]
    assert failed.error is not None and failed.error.category == "invalid_arguments"
    assert "/nodes/1/writes" in [f.path for f in failed.error.field_errors]
    assert result.nodes["w2"].ok and result.nodes["t"].ok


def test_a_write_set_that_covers_what_the_reference_resolves_to_runs() -> None:
    active: dict[str, int] = {}
    overlaps: list[str] = []
    written: list[str] = []
    rt = _runtime(active, overlaps, written)
    result = rt.run_plan(_plan("c", ["file:c"]))
    assert result.status == "ok"
    assert sorted(written) == ["b", "c"]
    assert overlaps == []


def test_a_group_member_narrowed_past_its_resolved_write_rolls_the_group_back(tmp_path: Path) -> None:
    db = tmp_path / "env.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE settings (name TEXT PRIMARY KEY, value TEXT NOT NULL)")
    rt = Runtime("memory://", recover_on_start=False)
    rt.environment("settings", SqliteEnvironment(db))
    called: list[str] = []

    @rt.tool(effect="read", reads=["cfg:"])
    def which() -> str:
        """Which setting to change."""
        return "b"

    @rt.tool(effect="write", writes=["setting:{name}"], transaction="settings")
    def put(name: str, value: str, transaction: SqliteTransaction | None = None) -> str:
        """Set a setting inside the group's transaction."""
        called.append(name)
        assert transaction is not None
        transaction.connection.execute("INSERT OR REPLACE INTO settings VALUES (?, ?)", (name, value))
        return value

    plan = {
        "nodes": [
            {"id": "w", "tool": "which"},
            {"id": "set_a", "tool": "put", "arguments": {"name": "a", "value": "1"}},
            {
                "id": "set_x",
                "tool": "put",
                "arguments": {"name": {"$ref": "w.data"}, "value": "2"},
                "writes": ["setting:a"],
            },
        ],
        "groups": [{"id": "apply", "nodes": ["set_a", "set_x"]}],
    }
    result = rt.run_plan(plan)
    assert called == ["a"]  # set_x never reached its tool
    error = result.nodes["set_x"].error
    assert error is not None and error.category == "invalid_arguments"
    assert "/nodes/2/writes" in [f.path for f in error.field_errors]
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT name, value FROM settings").fetchall() == []  # rolled back
