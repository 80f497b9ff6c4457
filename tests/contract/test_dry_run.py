"""A dry run: the stages up to the gates, then the tool's preview instead of the tool."""

from __future__ import annotations

import asyncio
from typing import Any

from actionspace import Runtime
from actionspace.policy.principal import Principal


def _booking_runtime() -> tuple[Runtime, list[dict[str, Any]]]:
    rt = Runtime()
    booked: list[dict[str, Any]] = []

    def preview_book(room: str, hours: int) -> dict[str, Any]:
        return {"would_book": room, "hours": hours, "cost": 20 * hours}

    @rt.tool(
        effect="write", risk="high", writes=["room:{room}"], preview=preview_book, requires_approval=True
    )
    def book(room: str, hours: int) -> dict[str, Any]:
        booked.append({"room": room, "hours": hours})
        return {"id": f"b{len(booked)}"}

    return rt, booked


def test_a_dry_run_returns_the_preview_and_never_runs_the_tool_or_touches_the_ledger() -> None:
    rt, booked = _booking_runtime()
    obs = rt.call({"name": "book", "arguments": {"room": "A", "hours": 2}}, dry_run=True)
    assert obs.status == "ok", obs.error
    assert obs.data == {"would_book": "A", "hours": 2, "cost": 40}
    assert obs.diagnostics["dry_run"] is True
    assert obs.effects == ()
    assert booked == []
    assert [e for e in rt.ledger.list(limit=10_000) if e.tool == "book@1"] == []
    assert rt.approvals.list() == []  # the approval gate is after the dry run stops


def test_a_dry_run_still_validates_and_authorizes() -> None:
    rt, booked = _booking_runtime()
    bad = rt.call({"name": "book", "arguments": {"room": "A", "hours": "two"}}, dry_run=True)
    assert bad.error is not None and bad.error.category == "invalid_arguments"
    nobody = Principal(id="guest", scopes=("read:*",))
    denied = rt.call({"name": "book", "arguments": {"room": "A", "hours": 1}}, dry_run=True, principal=nobody)
    assert denied.error is not None and denied.error.category == "permission_denied"
    assert booked == []


def test_a_tool_without_a_preview_is_described_on_a_dry_run() -> None:
    rt = Runtime()
    sent: list[str] = []

    @rt.tool(effect="external", writes=["mail:{to}"])
    def send(to: str, body: str) -> None:
        sent.append(to)

    obs = rt.call({"name": "send", "arguments": {"to": "a@example.com", "body": "hi"}}, dry_run=True)
    assert obs.status == "ok" and sent == []
    assert obs.data["would_call"] == "send@1"
    assert obs.data["arguments"] == {"to": "a@example.com", "body": "hi"}


def test_a_session_turn_can_be_a_dry_run_and_its_trace_says_so() -> None:
    rt, booked = _booking_runtime()
    s = rt.session(provider="openai_chat")
    output = {
        "role": "assistant",
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "book", "arguments": '{"room": "B", "hours": 1}'},
            }
        ],
    }
    turn = s.handle(output, dry_run=True)
    assert turn.observations[0].diagnostics["dry_run"] is True
    assert turn.observations[0].data["would_book"] == "B"
    assert booked == []
    kinds = [e.kind for e in rt.trace.events(s.run_id)]
    assert "dry_run" in kinds and "dispatched" not in kinds


def test_an_async_preview_is_awaited_on_both_paths() -> None:
    rt = Runtime()

    async def preview(n: int) -> dict[str, int]:
        await asyncio.sleep(0)
        return {"would_add": n}

    @rt.tool(effect="write", preview=preview)
    def add(n: int) -> int:
        raise AssertionError("never runs on a dry run")

    sync = rt.call({"name": "add", "arguments": {"n": 3}}, dry_run=True)
    asynchronous = asyncio.run(rt.acall({"name": "add", "arguments": {"n": 4}}, dry_run=True))
    assert (sync.data, asynchronous.data) == ({"would_add": 3}, {"would_add": 4})


def test_a_preview_that_fails_is_an_error_observation_marked_dry_run() -> None:
    rt = Runtime()

    def preview(n: int) -> None:
        raise PermissionError("quota service says no")

    @rt.tool(effect="write", preview=preview)
    def add(n: int) -> int:
        return n

    obs = rt.call({"name": "add", "arguments": {"n": 1}}, dry_run=True)
    assert obs.error is not None and obs.error.category == "permission_denied"
    assert obs.diagnostics["dry_run"] is True
