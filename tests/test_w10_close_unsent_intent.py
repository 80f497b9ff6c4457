"""``unknown`` in the ledger means a write was sent and its outcome is not known (DESIGN §6:
timeout, crash, lost response). A write whose intent is durable (``dispatched``) but whose first
send has not begun when the runtime closes is never sent after it: ``close()`` must not note it
``unknown`` ("the write may have committed"), neither for an instant (another process reading
the ledger, or recovering it, would take a write that never left for one that may have landed)
nor for good. It stays ``dispatched`` (its intent durable, as any write's is before its send)
until its call ends it ``failed`` (``cancelled``, not sent).

The instant is held by real faults: another connection holds the file's write lock while the
intent waits on its worker thread, and the call's event loop is kept busy by a callback of the
test from before the intent is written until ``close()`` has noted what it notes."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from actionspace import Observation, Runtime
from actionspace.plan import PlanResult
from tests.close_tools import WAIT_S, Tools, in_frames, in_thread, slow_runtime, until


def _state(path: Path) -> list[str]:
    """The states of the file's ledger entries, as another process reads them now."""
    db = sqlite3.connect(path, timeout=WAIT_S)
    try:
        return [row[0] for row in db.execute("select state from ledger_entries")]
    finally:
        db.close()


_GATED = {
    "nodes": [
        {"id": "g", "tool": "gate", "arguments": {}},
        {"id": "w", "tool": "aput", "arguments": {"x": 1}, "depends_on": ["g"]},
    ]
}
"""A plan whose write begins once the test opens the gate (the plan's own first writes done)."""


async def _run(rt: Runtime, run_id: str, entry: str) -> Any:
    if entry == "acall":
        return await rt.acall({"name": "aput", "arguments": {"x": 1}}, run_id=run_id)
    return await rt.arun_plan(_GATED, run_id=run_id)


@pytest.mark.parametrize("entry", ["acall", "arun_plan"])
def test_a_write_not_yet_sent_when_the_runtime_closes_is_never_noted_unknown(
    tmp_path: Path, entry: str
) -> None:
    path = tmp_path / "w10.db"
    tools = Tools()
    rt = slow_runtime(f"sqlite:///{path}", tools)
    gate_reached, gate_open = threading.Event(), threading.Event()

    @rt.tool(effect="read", reads=["gate"])
    async def gate() -> bool:
        """Wait until the test opens the gate."""
        gate_reached.set()
        return await asyncio.to_thread(gate_open.wait, WAIT_S)

    run_id = rt.new_run()
    loops: list[asyncio.AbstractEventLoop] = []
    answered: list[Any] = []

    async def main() -> None:
        loops.append(asyncio.get_running_loop())
        answered.append(await _run(rt, run_id, entry))

    busy, free = threading.Event(), threading.Event()

    def hold_the_loop() -> None:
        busy.set()
        free.wait(WAIT_S)

    holder = sqlite3.connect(path, isolation_level=None, timeout=WAIT_S)
    if entry == "acall":
        holder.execute("BEGIN IMMEDIATE")  # the intent's transaction waits for this one
    caller, failure = in_thread(lambda: asyncio.run(main()))
    if entry == "arun_plan":  # once the plan's own first writes are done
        assert gate_reached.wait(WAIT_S)
        holder.execute("BEGIN IMMEDIATE")
    gate_open.set()
    seen: list[list[str]] = []
    try:
        until(lambda: in_frames("begin_unless_pending"), "the intent waits for the write lock")
        loops[0].call_soon_threadsafe(hold_the_loop)
        assert busy.wait(WAIT_S)
        holder.rollback()  # the intent is written now; its step's answer waits for the busy loop
        until(lambda: _state(path) == ["dispatched"], "the intent is durable")
        closer, closed = in_thread(rt.close)
        until(lambda: not closer.is_alive() or in_frames("_wait_for_plans"), "close() noted the writes")
        seen.append(_state(path))  # what another process reads of the ledger now
    finally:
        free.set()
        holder.close()
    closer.join(WAIT_S)
    caller.join(WAIT_S)
    assert not closer.is_alive() and closed == [None], closed
    assert not caller.is_alive() and failure == [None], failure
    assert seen == [["dispatched"]], seen  # never "unknown": it was not sent
    assert tools.calls == Counter()  # and it never is
    [state] = _state(path)
    assert state in ("failed", "dispatched"), state  # "dispatched": its loop took the cut too late
    if state == "failed":
        db = sqlite3.connect(path)
        [(error,)] = db.execute("select error from ledger_entries").fetchall()
        db.close()
        stored = json.loads(error)
        assert stored["category"] == "cancelled" and stored["details"]["sent"] is False, stored
    [out] = answered
    obs = out.nodes["w"] if isinstance(out, PlanResult) else out
    assert isinstance(obs, Observation)
    assert obs.error is not None and obs.error.category == "cancelled", obs
    assert obs.error.details.get("sent") is False, obs
