"""A small world for scripted agent loops: tools over SQLite whose side effects are counted in a
table of their own, and builders of the provider messages a model sends."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from actionspace import Runtime


def sends(outbox: Path) -> list[tuple[str, str]]:
    """Every (to, text) the outbox really holds, in the order the tool wrote them."""
    if not outbox.exists():
        return []
    with sqlite3.connect(outbox) as db:
        return [(str(r[0]), str(r[1])) for r in db.execute("SELECT recipient, body FROM sent ORDER BY n")]


def _write(outbox: Path, to: str, text: str) -> None:
    with sqlite3.connect(outbox) as db:
        db.execute("CREATE TABLE IF NOT EXISTS sent (n INTEGER PRIMARY KEY, recipient TEXT, body TEXT)")
        db.execute("INSERT INTO sent (recipient, body) VALUES (?, ?)", (to, text))


def world(store: str, outbox: Path, *, lose_answer: bool = False) -> Runtime:
    """A runtime over ``store`` with ``send_sms`` (external, no idempotency: a lost answer is
    ``unknown_commit``), ``set_counter`` (a write) and ``read_counter`` (a read of what it wrote)."""
    rt = Runtime(store, recover_on_start=False)

    @rt.tool(effect="external", idempotency="none", writes=["sms:{to}"])
    def send_sms(to: str, text: str, copies: int = 1) -> dict[str, Any]:
        """Send a text message."""
        _write(outbox, to, text)
        if lose_answer:
            raise TimeoutError("the carrier did not answer")
        return {"sent": True, "copies": copies}

    @rt.tool(effect="write", writes=["counter:{name}"])
    def set_counter(name: str, value: int) -> dict[str, Any]:
        """Set a counter."""
        _write(outbox, f"counter:{name}", str(value))
        return {"name": name, "value": value}

    @rt.tool(effect="read", reads=["counter:{name}"])
    def read_counter(name: str) -> dict[str, Any]:
        """Read a counter: the last value set."""
        values = [int(b) for r, b in sends(outbox) if r == f"counter:{name}"]
        return {"name": name, "value": values[-1] if values else None}

    return rt


def chat(*calls: tuple[str, str, str]) -> dict[str, Any]:
    """An OpenAI chat assistant message of (call id, tool, arguments JSON text)."""
    entries = [
        {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}
        for cid, name, args in calls
    ]
    return {"role": "assistant", "content": None, "tool_calls": entries}


def anthropic(*calls: tuple[str, str, dict[str, Any]]) -> dict[str, Any]:
    """An Anthropic assistant message of (tool_use id, tool, input)."""
    blocks = [{"type": "tool_use", "id": cid, "name": name, "input": args} for cid, name, args in calls]
    return {"role": "assistant", "content": blocks}


def responses(*calls: tuple[str, str, str]) -> list[dict[str, Any]]:
    """Responses output items of (call id, tool, arguments JSON text)."""
    return [
        {"type": "function_call", "id": f"fc_{cid}", "call_id": cid, "name": name, "arguments": args}
        for cid, name, args in calls
    ]


def hermes(name: str, args: dict[str, Any]) -> str:
    """The raw text of one Hermes/Qwen call."""
    return "<tool_call>" + json.dumps({"name": name, "arguments": args}) + "</tool_call>"


def answered_ids(provider: str, messages: list[dict[str, Any]]) -> list[str]:
    """The call ids the rendered tool messages answer, in order, with repeats."""
    if provider == "anthropic":
        return [b["tool_use_id"] for m in messages for b in m["content"] if b.get("type") == "tool_result"]
    if provider == "openai_responses":
        return [m["call_id"] for m in messages]
    if provider == "gemini":  # functionResponse parts; a call without an id of its own is answered by order
        answers = [p["functionResponse"] for m in messages for p in m["parts"] if "functionResponse" in p]
        return [a["id"] for a in answers if "id" in a]
    return [m["tool_call_id"] for m in messages]


def taken_ids(run: str) -> list[str]:
    """Every id the runtime could mint for the first call of ``run``'s message (``run:n1``…)."""
    return [f"{run}:n{k}" for k in range(1, 41)]


def crowded_message(run: str, output: str) -> Any:
    """A message of ``set_counter`` calls holding every id of :func:`taken_ids` and one call
    without an id: first or last (``openai_first`` / ``openai_last``), or in Mistral's text."""
    taken = taken_ids(run)
    if output == "mistral":
        calls: list[dict[str, Any]] = [{"name": "set_counter", "arguments": {"name": "x", "value": 99}}]
        calls += [
            {"name": "set_counter", "arguments": {"name": f"k{i}", "value": i}, "id": cid}
            for i, cid in enumerate(taken)
        ]
        return "[TOOL_CALLS]" + json.dumps(calls)
    entries: list[dict[str, Any]] = [
        {"id": cid, "type": "function", "function": {"name": "set_counter", "arguments": json.dumps(args)}}
        for cid, args in ((cid, {"name": f"k{i}", "value": i}) for i, cid in enumerate(taken))
    ]
    bare = {
        "type": "function",
        "function": {"name": "set_counter", "arguments": json.dumps({"name": "x", "value": 99})},
    }
    entries.insert(0 if output == "openai_first" else len(entries), bare)
    return {"role": "assistant", "content": None, "tool_calls": entries}
