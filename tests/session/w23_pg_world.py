"""A world over PostgreSQL for sessions continued by other processes: tools whose side effects a
table of their own (``world_sent``, in the test's schema) counts, whatever the runtimes believe.

Imported by the tests and by their child processes (which put the project root on ``sys.path``).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from typing import Any

import psycopg

from actionspace import Runtime
from actionspace._crash import point

__all__ = ["WRITES", "chat_message", "make_world", "world_sends"]

WRITES = (("send_sms", "sms", "to"), ("set_counter", "counter", "name"))
"""The writes of the three-call message: (tool, kind of its side effect, argument naming it)."""


def _write(url: str, kind: str, a: str, b: str) -> None:
    with psycopg.connect(url, autocommit=True) as pg:
        pg.execute(
            "CREATE TABLE IF NOT EXISTS world_sent (n serial PRIMARY KEY, kind text, a text, b text, pid int)"
        )
        pg.execute(
            "INSERT INTO world_sent (kind, a, b, pid) VALUES (%s, %s, %s, %s)", (kind, a, b, os.getpid())
        )


def world_sends(url: str) -> Counter[tuple[str, str, str]]:
    """Each side effect the world received, with how often."""
    with psycopg.connect(url, autocommit=True) as pg:
        pg.execute(
            "CREATE TABLE IF NOT EXISTS world_sent (n serial PRIMARY KEY, kind text, a text, b text, pid int)"
        )
        rows = pg.execute("SELECT kind, a, b FROM world_sent").fetchall()
    return Counter((k, a, b) for k, a, b in rows)


def make_world(url: str, *, during: Any = None) -> Runtime:
    """A runtime on ``url`` with ``send_sms`` (external, no idempotency), ``set_counter`` (a write
    with no status query) and ``read_counter`` (a read). ``during(tool)``, when given, runs inside
    each write after its side effect (a connection cut, say)."""
    rt = Runtime(url, recover_on_start=False)

    @rt.tool(effect="external", idempotency="none", writes=["sms:{to}"])
    def send_sms(to: str, text: str) -> dict[str, Any]:
        """Send a text message."""
        _write(url, "sms", to, text)
        point("tool_committed")
        if during is not None:
            during("send_sms")
        return {"sent": True, "to": to}

    @rt.tool(effect="write", idempotency="none", writes=["counter:{name}"])
    def set_counter(name: str, value: int) -> dict[str, Any]:
        """Set a counter."""
        _write(url, "counter", name, str(value))
        point("tool_committed")
        if during is not None:
            during("set_counter")
        return {"name": name, "value": value}

    @rt.tool(effect="read", reads=["counter:{name}"])
    def read_counter(name: str) -> dict[str, Any]:
        """Read a counter."""
        return {"name": name}

    return rt


def chat_message(ids: list[str | None], *, reordered: bool = False) -> dict[str, Any]:
    """The model's message of three calls (OpenAI chat): a text, a counter set, a counter read;
    ``reordered``: each call's keys in another order and ``2`` written ``2.0``."""
    sms = {"to": "+15550100", "text": "running late"}
    counter: dict[str, Any] = {"name": "a", "value": 2}
    if reordered:
        sms = {"text": "running late", "to": "+15550100"}
        counter = {"value": 2.0, "name": "a"}
    calls = [("send_sms", sms), ("set_counter", counter), ("read_counter", {"name": "a"})]
    entries = [
        {"type": "function", "function": {"name": n, "arguments": json.dumps(a)}, **({"id": i} if i else {})}
        for i, (n, a) in zip(ids, calls, strict=True)
    ]
    return {"role": "assistant", "content": None, "tool_calls": entries}
