"""A ``$ref`` argument carries the label of what it points at in every kind of plan node: an
alternative of a ``first_of`` node and a member of an atomic group as in a plain node. A secret read
in the plan and passed on by reference never reaches a sink."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from actionspace import Labels, Plan, Runtime
from actionspace.plan.environments import SqliteEnvironment, SqliteTransaction


def _runtime(sent: list[Any]) -> Runtime:
    rt = Runtime("memory://", recover_on_start=False)

    @rt.tool(effect="read", labels=Labels(confidentiality="secret"))
    def read_password() -> str:
        """The stored password."""
        return "hunter2"

    @rt.tool(effect="read")
    def lookup(text: str) -> str:
        """Look a text up."""
        return f"about {text}"

    @rt.tool(effect="external")
    def send_email(recipient: str, body: str) -> str:
        """Send an email."""
        sent.append(body)
        return "sent"

    return rt


def test_an_alternatives_reference_carries_the_secret_it_points_at() -> None:
    sent: list[Any] = []
    rt = _runtime(sent)
    plan = Plan.from_dict(
        {
            "nodes": [
                {"id": "pw", "tool": "read_password", "arguments": {}},
                {"id": "q", "first_of": [{"tool": "lookup", "arguments": {"text": {"$ref": "pw.data"}}}]},
                {
                    "id": "mail",
                    "tool": "send_email",
                    "arguments": {"recipient": "bob@example.com", "body": {"$ref": "q.data"}},
                },
            ]
        }
    )
    result = rt.run_plan(plan)
    assert "secret" in result.nodes["q"].provenance.labels
    mail = result.nodes["mail"]
    assert mail.error is not None and mail.error.category == "policy_violation"
    assert sent == []


def test_a_group_members_reference_carries_the_secret_it_points_at(tmp_path: Path) -> None:
    sent: list[Any] = []
    rt = _runtime(sent)
    db = tmp_path / "env.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE notes (text TEXT NOT NULL)")
    rt.environment("notes", SqliteEnvironment(db))

    @rt.tool(effect="write", writes=["notes:"], transaction="notes", labels=Labels(sink=True))
    def publish(text: str, transaction: SqliteTransaction | None = None) -> str:
        """Publish a note where anyone reads it (inside a group's transaction)."""
        sent.append(text)
        if transaction is not None:
            transaction.connection.execute("INSERT INTO notes VALUES (?)", (text,))
        return "published"

    plan = Plan.from_dict(
        {
            "nodes": [
                {"id": "pw", "tool": "read_password", "arguments": {}},
                {"id": "p1", "tool": "publish", "arguments": {"text": {"$ref": "pw.data"}}},
                {"id": "p2", "tool": "publish", "arguments": {"text": "and nothing else"}},
            ],
            "groups": [{"id": "out", "nodes": ["p1", "p2"]}],
        }
    )
    result = rt.run_plan(plan)
    assert result.status != "ok"
    assert "hunter2" not in sent
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM notes").fetchone()[0] == 0
