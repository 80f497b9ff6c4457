"""Realistic trace events, shaped like the ones the runtime writes."""

from __future__ import annotations

from typing import Any

from actionspace.trace.events import TraceEvent

LONG_MODEL_OUTPUT = (
    "I will create the meeting on the team calendar for Tuesday at 10:00 and then list the week "
    "to check for conflicts.\n" + '{"name": "create_event", "arguments": {"title": "sync"}}' * 20
)


def calendar_run(run_id: str, *, start: float = 1_700_000_000.0, finished: bool = True) -> list[TraceEvent]:
    """A run with one rejected call, one retried then successful call, and one trimmed read."""
    payloads: list[tuple[str, str | None, dict[str, Any]]] = [
        ("run_started", None, {"principal": "alice"}),
        (
            "candidates_offered",
            None,
            {
                "offered": [
                    {"name": "create_event", "version": "2", "schema_hash": "3f2a9c1b7d4e5f60"},
                    {"name": "list_events", "version": "1", "schema_hash": "aa11bb22cc33dd44"},
                ],
                "left_out": [{"name": "delete_calendar", "reason": "risk above principal limit"}],
            },
        ),
        ("model_output", None, {"raw": LONG_MODEL_OUTPUT}),
        ("parsed", None, {"format": "openai", "calls": [{"name": "create_event", "id": "c1"}]}),
        ("resolved", "c1", {"tool": "create_event", "version": "2", "schema_hash": "3f2a9c1b7d4e5f60"}),
        (
            "validated",
            "c1",
            {
                "verdict": "rejected",
                "category": "invalid_arguments",
                "field_errors": [
                    {"path": "/start", "message": "not an ISO 8601 time"},
                    {"path": "/attendees/0", "message": "unknown user"},
                ],
            },
        ),
        (
            "observation",
            "c1",
            {"status": "error", "category": "invalid_arguments", "recovery": ["change_arguments"]},
        ),
        ("parsed", None, {"format": "openai", "calls": [{"name": "create_event", "id": "c2"}]}),
        ("resolved", "c2", {"tool": "create_event", "version": "2", "schema_hash": "3f2a9c1b7d4e5f60"}),
        ("validated", "c2", {"verdict": "accepted"}),
        ("authorized", "c2", {"verdict": "allowed"}),
        ("dispatched", "c2", {"tool": "create_event", "version": "2", "attempt": 1, "node_id": "n1"}),
        ("attempt", "c2", {"attempt": 1, "category": "transient", "delay_s": 0.25}),
        ("dispatched", "c2", {"tool": "create_event", "version": "2", "attempt": 2, "node_id": "n1"}),
        ("observation", "c2", {"status": "ok", "content_hash": "sha256:0011"}),
        ("parsed", None, {"format": "openai", "calls": [{"name": "list_events", "id": "c3"}]}),
        ("resolved", "c3", {"tool": "list_events", "version": "1", "schema_hash": "aa11bb22cc33dd44"}),
        ("validated", "c3", {"verdict": "accepted"}),
        ("authorized", "c3", {"verdict": "allowed"}),
        ("dispatched", "c3", {"tool": "list_events", "version": "1", "attempt": 1, "node_id": "n2"}),
        (
            "observation",
            "c3",
            {
                "status": "ok",
                "trimming": {
                    "rule": "rows",
                    "rule_version": "3",
                    "original_bytes": 48213,
                    "kept_bytes": 4096,
                },
                "artifact_ref": "artifact://run/c3/full.json",
                "content_hash": "sha256:aabb",
            },
        ),
    ]
    if finished:
        payloads.append(("run_finished", None, {"status": "completed"}))
    return [
        TraceEvent(run_id=run_id, seq=seq, kind=kind, ts=start + seq * 0.0125, call_id=call_id, data=data)
        for seq, (kind, call_id, data) in enumerate(payloads)
    ]


def batch(run_id: str, first_seq: int, size: int, *, ts: float = 1_700_000_000.0) -> list[TraceEvent]:
    """``size`` consecutive events of one call, starting at ``first_seq``."""
    return [
        TraceEvent(
            run_id=run_id,
            seq=first_seq + i,
            kind="observation" if i == size - 1 else "dispatched",
            ts=ts + (first_seq + i) * 0.001,
            call_id=f"call-{first_seq // size}",
            data={"status": "ok", "payload": "x" * 200} if i == size - 1 else {"tool": "t", "attempt": 1},
        )
        for i in range(size)
    ]
