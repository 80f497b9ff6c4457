"""``call_all`` answers an id given twice once, as the trace and the rendered answer do.

A message that gives one call id to two calls runs none of them; each distinct id is answered
``parse_error`` once, and the trace holds one ``observation`` event under each id. Before,
``rt.call_all`` / ``rt.acall_all`` returned one observation per call, the repeated id twice: a
caller feeding them back to its model sent two results under one id (which providers refuse),
and they did not join the trace's observations one to one. Now they return one observation per
distinct id, in the order the ids first appear, each the one the trace holds.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from actionspace import Runtime, ToolCall
from actionspace.session import PROVIDERS, Provider
from actionspace.types import Observation


def _runtime(url: str) -> tuple[Runtime, list[str]]:
    rt = Runtime(url, recover_on_start=False)
    sent: list[str] = []

    @rt.tool(effect="external", idempotency="none", writes=["mail:{to}"])
    def send(to: str, body: str) -> str:
        """Send a note."""
        sent.append(to)
        return "sent"

    return rt, sent


def _message(provider: Provider, ids: list[str]) -> Any:
    calls = [(i, {"to": f"p{n}", "body": "x"}) for n, i in enumerate(ids)]
    if provider == "openai_chat":
        entries = [
            {"id": i, "type": "function", "function": {"name": "send", "arguments": json.dumps(a)}}
            for i, a in calls
        ]
        return {"role": "assistant", "content": None, "tool_calls": entries}
    if provider == "openai_responses":
        return [
            {"type": "function_call", "call_id": i, "name": "send", "arguments": json.dumps(a)}
            for i, a in calls
        ]
    if provider == "gemini":
        return {
            "role": "model",
            "parts": [{"functionCall": {"id": i, "name": "send", "args": a}} for i, a in calls],
        }
    return {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": i, "name": "send", "input": a} for i, a in calls],
    }


def _joined(rt: Runtime, run_id: str, out: list[Observation]) -> None:
    """``out`` answers each distinct id once, as the trace's observation events do, one to one."""
    ids = [o.call_id for o in out]
    assert len(ids) == len(set(ids)), ids
    traced = [(e.call_id, e.data.get("category")) for e in rt.trace.events(run_id) if e.kind == "observation"]
    assert traced == [(o.call_id, o.error.category if o.error else None) for o in out]


@pytest.mark.parametrize("store", ["memory", "sqlite"])
@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("ids", [["c1", "c1"], ["c1", "c2", "c1"], ["c2", "c1", "c1", "c2", "c3"]])
def test_call_all_answers_an_id_given_twice_once(
    tmp_path: Path, store: str, mode: str, provider: Provider, ids: list[str]
) -> None:
    rt, sent = _runtime("memory://" if store == "memory" else f"sqlite:///{tmp_path / 'a.db'}")
    try:
        run_id = rt.new_run("dup")
        raw = _message(provider, ids)
        out = (
            rt.call_all(raw, run_id=run_id)
            if mode == "sync"
            else asyncio.run(rt.acall_all(raw, run_id=run_id))
        )
        assert [o.call_id for o in out] == list(dict.fromkeys(ids))
        assert all(o.error is not None and o.error.details["reason"] == "duplicate_call_id" for o in out)
        _joined(rt, run_id, out)
        assert sent == []
    finally:
        rt.close()


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_tool_calls_sharing_an_id_are_answered_once(mode: str) -> None:
    rt, sent = _runtime("memory://")
    try:
        run_id = rt.new_run("dup")
        raw = [ToolCall(name="send", arguments={"to": "a", "body": "x"}, id="k")] * 2
        out = (
            rt.call_all(raw, run_id=run_id)
            if mode == "sync"
            else asyncio.run(rt.acall_all(raw, run_id=run_id))
        )
        assert [o.call_id for o in out] == ["k"]
        _joined(rt, run_id, out)
        assert sent == []
    finally:
        rt.close()
