"""Every event kind the runtime records is a declared ``EventKind`` (readers switch on them)."""

from __future__ import annotations

from typing import Any

from actionspace import Runtime
from actionspace.trace import EVENT_KINDS


def test_the_kinds_recorded_by_calls_flows_and_descriptions_are_all_declared() -> None:
    rt = Runtime("memory://", recover_on_start=False)
    sent: list[dict[str, Any]] = []

    @rt.tool(effect="external")
    def send_message(to: str, body: str) -> dict[str, Any]:
        """Send a message."""
        sent.append({"to": to, "body": body})
        return {"sent": True}

    @rt.tool(effect="read")
    def lookup(key: str) -> dict[str, Any]:
        """Look a key up."""
        return {"key": key}

    run_id = rt.new_run()
    try:
        rt.user_input(run_id, "send hello to bob@example.com")
        rt.offer(run_id=run_id)
        rt.describe("lookup", run_id=run_id)
        rt.call({"name": "lookup", "arguments": {"key": "a"}}, run_id=run_id)
        rt.call({"name": "send_message", "arguments": {"to": "bob@example.com", "body": "hi"}}, run_id=run_id)
        rt.call({"name": "no_such_tool", "arguments": {}}, run_id=run_id)
        kinds = {e.kind for e in rt.trace.events(run_id)}
    finally:
        rt.close()
    assert {"user_input", "described", "flow_checked", "observation"} <= kinds
    assert kinds <= set(EVENT_KINDS), f"undeclared: {sorted(kinds - set(EVENT_KINDS))}"
