"""Monitoring counts each action's outcome once: a replay is no second success, and an unknown
commit settled later (by hand, in another process) is no longer reported as unknown."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

from actionspace import Runtime
from actionspace.evaluation.monitor import monitor
from actionspace.ledger.status import Committed, NotCommitted, StatusAnswer
from actionspace.trace.events import TraceEvent
from actionspace.trace.memory import MemoryTraceStore

SCHEMA = {"type": "object", "properties": {"room": {"type": "string"}}, "required": ["room"]}
BOOK = json.dumps({"name": "book", "arguments": {"room": "A"}})


def test_a_re_proposal_after_a_timeout_is_replayed_and_counted_as_one_success(tmp_path: Path) -> None:
    booked: dict[str, dict[str, Any]] = {}
    answered = threading.Event()

    def book(room: str, idempotency_key: str) -> dict[str, Any]:
        booked[idempotency_key] = {"room": room}
        answered.wait(5)  # the booking is made, its answer is lost to the timeout
        return {"room": room}

    def status(*, key: str, arguments: dict[str, Any]) -> StatusAnswer:
        return Committed(booked[key], remote_id="r1") if key in booked else NotCommitted()

    rt = Runtime(f"sqlite:///{tmp_path / 'a.db'}")
    rt.add_tool(
        name="book", input_schema=SCHEMA, fn=book, effect="write", idempotency="query",
        status_query=status, timeout_s=0.1,
    )  # fmt: skip
    run = rt.new_run()
    try:
        first = rt.call(BOOK, run_id=run)
        again = rt.call(BOOK, run_id=run)
        answered.set()
        assert first.ok and again.ok and again.diagnostics.get("replayed") is True
        assert len(booked) == 1
        health = monitor(rt.trace).tool("book")
    finally:
        rt.close(wait=True)
    assert (health.calls, health.ok_results, health.replays, health.failures) == (2, 1, 1, 0)
    assert health.utilization == 0.0


def test_a_replayed_result_consumed_later_counts_as_use_of_the_original() -> None:
    rt = Runtime("memory://")

    @rt.tool(effect="write")
    def book(room: str) -> dict[str, str]:
        """Book a room."""
        return {"room": room, "ref": "B-17"}

    session = rt.session(run_id="conv", provider="openai_chat")
    session.user("Book room A")
    session.handle(_message("c1", "book", {"room": "A"}))
    (replay,) = session.handle(_message("c2", "book", {"room": "A"})).observations
    events = list(rt.trace.events("conv"))
    rt.close()
    assert replay.diagnostics.get("replayed") is True
    last = events[-1].seq
    store = MemoryTraceStore()  # the real trace, then a call that consumed the replay's answer
    store.append_many(
        [
            *events,
            _event(
                last + 1,
                "validated",
                "c3",
                verdict="accepted",
                tool="show",
                provenance={"ref": "tool_result:c2"},
            ),
            _event(last + 2, "dispatched", "c3", tool="show"),
            _event(last + 3, "observation", "c3", status="ok", tool="show"),
        ]
    )
    book_health = monitor(store).tool("book")
    assert (book_health.ok_results, book_health.replays) == (1, 1)
    assert (book_health.used_results, book_health.consumers, book_health.utilization) == (1, 1, 1.0)


def _message(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    function = {"name": name, "arguments": json.dumps(arguments)}
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": call_id, "type": "function", "function": function}],
    }


def _event(seq: int, kind: str, call_id: str, **data: object) -> TraceEvent:
    return TraceEvent(run_id="conv", seq=seq, kind=kind, ts=10.0**9 + seq, call_id=call_id, data=data)


FIRST_PROCESS = textwrap.dedent(
    """
    import json, sys, threading
    from actionspace import Runtime
    from actionspace.ledger.status import StillUnknown
    hang = threading.Event()
    def book(room, idempotency_key):
        hang.wait(2)
        return {"room": room}
    rt = Runtime(sys.argv[1], recover_on_start=False)
    rt.add_tool(name="book", input_schema=json.loads(sys.argv[2]), fn=book, effect="write",
                idempotency="query", status_query=lambda **_: StillUnknown("down"), timeout_s=0.1)
    obs = rt.call(sys.argv[3], run_id="r1")
    print(obs.error.category)
    rt.close()
    """
)


def test_an_unknown_commit_settled_in_a_second_process_is_no_longer_reported(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'a.db'}"
    done = subprocess.run(
        [sys.executable, "-c", FIRST_PROCESS, url, json.dumps(SCHEMA), BOOK],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert done.stdout.split() == ["unknown_commit"]
    rt = Runtime(url, recover_on_start=False)
    try:
        before = monitor(rt.trace)
        (entry,) = rt.ledger.list(state="unknown_commit")
        rt.resolve(entry.key, outcome="committed", by="ops", reason="seen on the bank statement")
        after = monitor(rt.trace)
    finally:
        rt.close()
    assert before.tool("book").unknown_commits == 1
    assert [a.kind for a in before.alerts] == ["unknown_commits"]
    assert after.tool("book").unknown_commits == 0
    assert after.alerts == ()
