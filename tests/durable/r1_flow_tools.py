"""Tools of the durable information-flow tests: a secret read, a step a person approves, a sink.

``send_note`` stores every note it sends in ``r1_sent`` of the store's database, so a test sees
whether a secret left, whichever process ran the sink (``actionspace worker --tools
tests.durable.r1_flow_tools:register``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import psycopg

from actionspace import Labels

if TYPE_CHECKING:
    from actionspace import Runtime

__all__ = ["SECRET", "plan", "prepare", "register", "sent"]

SECRET = "hunter2"


def prepare(url: str) -> None:
    """Create the table of sent notes (empty it if it exists)."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS r1_sent (run_id text NOT NULL, body text NOT NULL)")
        conn.execute("TRUNCATE r1_sent")


def sent(url: str) -> list[str]:
    """Every note body sent so far."""
    with psycopg.connect(url) as conn:
        return [str(r[0]) for r in conn.execute("SELECT body FROM r1_sent").fetchall()]


def register(rt: Runtime) -> None:
    """``read_secret`` (a secret read), ``summarize`` (needs approval), ``send_note`` (external)."""
    url = rt.store_url

    @rt.tool(effect="read", labels=Labels(confidentiality="secret"))
    def read_secret() -> str:
        """The stored password."""
        return SECRET

    @rt.tool(effect="read", requires_approval=True)
    def summarize(text: str) -> str:
        """A summary of a text; a person approves each one."""
        return f"summary: {text}"

    @rt.tool(effect="external")
    def send_note(recipient: str, body: str) -> str:
        """Send a note outside."""
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("INSERT INTO r1_sent (run_id, body) VALUES (%s, %s)", (recipient, body))
        return "sent"


def plan() -> dict[str, object]:
    """Read the secret, summarize it (approved by a person), send the summary outside."""
    return {
        "nodes": [
            {"id": "s", "tool": "read_secret", "arguments": {}},
            {"id": "t", "tool": "summarize", "arguments": {"text": {"$ref": "s.data"}}},
            {
                "id": "out",
                "tool": "send_note",
                "arguments": {"recipient": "bob@example.com", "body": {"$ref": "t.data"}},
            },
        ]
    }
