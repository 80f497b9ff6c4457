"""A process that crashed mid-send and was restarted at once left its entry ``dispatched`` and too
young for the recovery at the new process's start (a live process may still hold a young entry).
Once no holder can be alive, the next proposal of that action settles it as recovery does — a
``none`` tool's is ``unknown_commit``, a ``query`` tool's is asked — and nothing is sent twice;
before, every later proposal waited on the gone holder and answered ``transient``, forever."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

import actionspace.ledger.commit as commit
import actionspace.ledger.recover as recover
from actionspace import Runtime, ToolCall
from actionspace.ledger.status import Committed, NotCommitted, StatusAnswer

TIMEOUT_S = 0.1
AGE_S = 3600.0
"""The recovery age: an entry this old (and past its tool's attempt) has no holder. The entry
reaches it when :class:`_LedgerClock` is moved past it, never by how slowly the test runs."""


class _LedgerClock:
    """The wall clock as the commit protocol reads it, moved forward by hand."""

    def __init__(self) -> None:
        self.ahead_s = 0.0

    def time(self) -> float:
        return time.time() + self.ahead_s

    def monotonic(self) -> float:
        return time.monotonic()


def _tools(rt: Runtime, sent: Path, *, crash: bool) -> None:
    def note(kind: str, amount: int) -> dict[str, Any]:
        with sent.open("a") as f:
            f.write(f"{kind} {amount}\n")
        if crash:  # the send landed; the process dies before it can record the outcome
            os.kill(os.getpid(), signal.SIGKILL)
        return {"paid": amount}

    def paid(*, key: str, arguments: dict[str, Any]) -> StatusAnswer:
        done = sent.exists() and f"query {arguments['amount']}" in sent.read_text().split("\n")
        return Committed({"paid": arguments["amount"]}) if done else NotCommitted()

    rt.add_tool(
        name="pay_none",
        fn=lambda amount: note("none", amount),
        input_schema={"type": "object", "properties": {"amount": {"type": "integer"}}},
        effect="external",
        idempotency="none",
        timeout_s=TIMEOUT_S,
        description="Pay; cannot be asked whether it did.",
    )
    rt.add_tool(
        name="pay_query",
        fn=lambda amount: note("query", amount),
        input_schema={"type": "object", "properties": {"amount": {"type": "integer"}}},
        effect="external",
        idempotency="query",
        status_query=paid,
        timeout_s=TIMEOUT_S,
        description="Pay; its status can be asked.",
    )


def _crashing(url: str, sent: str, tool: str) -> None:
    rt = Runtime(url)
    _tools(rt, Path(sent), crash=True)
    rt.call(ToolCall(name=tool, arguments={"amount": 5}, id="c1"), run_id="r1", node_id="pay")


@pytest.mark.parametrize("tool", ["pay_none", "pay_query"])
def test_a_crashed_send_found_young_at_start_is_settled_by_a_later_proposal(
    tool: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, sent = f"sqlite:///{tmp_path / 'as.db'}", tmp_path / "sent.txt"
    child = mp.get_context("spawn").Process(target=_crashing, args=(url, str(sent), tool))
    child.start()
    child.join(60)
    assert child.exitcode == -signal.SIGKILL and sent.read_text().count("\n") == 1

    monkeypatch.setattr(commit, "RECOVERY_AGE_S", AGE_S)
    monkeypatch.setattr(commit, "MAX_WAIT_S", 0.2)
    clock = _LedgerClock()
    monkeypatch.setattr(commit, "time", clock)
    monkeypatch.setattr(commit, "alone", lambda store, key: False)  # as with another process beside
    monkeypatch.setattr(recover, "others_alive", lambda store, **_: True)  # at its start too
    rt = Runtime(url)  # its start-up recovery leaves the entry: younger than the recovery age
    _tools(rt, sent, crash=False)
    call = ToolCall(name=tool, arguments={"amount": 5}, id="c2")
    (entry,) = rt.ledger.list()
    first = rt.call(call, run_id="r1", node_id="pay")  # its holder may still be alive: it waits
    assert first.error is not None and first.error.category == "unknown_commit"
    clock.ahead_s = AGE_S + 1.0  # the entry is now older than any holder could be

    later = rt.call(call, run_id="r1", node_id="pay")
    settled = rt.ledger.get(entry.key)
    assert settled is not None
    if tool == "pay_none":  # cannot be asked: for a person, never sent again
        assert later.error is not None and later.error.category == "unknown_commit"
        assert settled.state == "unknown_commit"
    else:  # asked: it landed, so its result is the answer
        assert later.status == "ok" and later.data == {"paid": 5}
        assert settled.state == "committed"
    assert sent.read_text().count("\n") == 1
    kinds = [e.data.get("by") for e in rt.trace.events("r1") if e.kind == "ledger"]
    assert "recover" in kinds
    rt.close()
