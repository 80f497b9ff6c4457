"""A close that cuts a write while one of its SQLite ledger steps runs on a worker thread ends
the write's entry before ``close()`` returns, as on the memory store: ``failed`` (``cancelled``,
not sent) when the tool cannot have run, never ``dispatched`` for recovery to settle later.

The step is held by a real fault: another connection holds the file's write lock, so the
intent's ``BEGIN IMMEDIATE`` waits on its worker thread until the test lets go of the lock (once
the close took the cut)."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections import Counter
from pathlib import Path

import pytest

from actionspace import Observation, Runtime
from tests.close_tools import WAIT_S, Tools, in_frames, in_thread, slow_runtime, until, write_entries


async def _run(rt: Runtime, run_id: str, entry: str, tool: str) -> list[Observation]:
    call = {"name": tool, "arguments": {"x": 1}}
    if entry == "acall":
        return [await rt.acall(call, run_id=run_id)]
    if entry == "acall_all":  # the read after the write waits its turn: never begun
        return await rt.acall_all([call, {"name": "get", "arguments": {"x": 2}}], run_id=run_id)
    return [o async for o in rt.astream(call, run_id=run_id) if not o.provisional]


def _cut_during_the_intent(
    tmp_path: Path, entry: str, tool: str
) -> tuple[Runtime, str, list[Observation], Tools]:
    """Run ``tool`` (a write) with ``acall`` while the file's write lock is held elsewhere; close
    the runtime from another thread while the intent waits for the lock; let go once the cut is
    taken. Returns the closed runtime, its URL, the call's observation and the tools' counts."""
    url = f"sqlite:///{tmp_path / 'w9.db'}"
    tools = Tools()
    rt = slow_runtime(url, tools)
    run_id = rt.new_run()
    holder = sqlite3.connect(tmp_path / "w9.db", isolation_level=None, timeout=WAIT_S)
    holder.execute("BEGIN IMMEDIATE")  # the intent's transaction waits for this one
    answered: list[list[Observation]] = []

    async def call() -> None:
        answered.append(await _run(rt, run_id, entry, tool))

    caller, failure = in_thread(lambda: asyncio.run(call()))
    try:
        until(lambda: in_frames("begin_unless_pending"), "the intent waits for the write lock")
        closer, closed = in_thread(rt.close)
        in_flight = rt.engine.messages.in_flight
        until(lambda: bool(in_flight.cuts), "close() cut the call")
        assert all(cut.seen.wait(WAIT_S) for cut, _loop in in_flight.cuts)
    finally:
        holder.rollback()  # the intent may be written now
        holder.close()
    closer.join(WAIT_S)
    assert not closer.is_alive() and closed == [None], closed
    caller.join(WAIT_S)
    assert not caller.is_alive() and failure == [None], failure
    return rt, url, answered[0], tools


@pytest.mark.parametrize(
    ("entry", "tool"),
    [("acall", "aput"), ("acall", "put"), ("acall_all", "aput"), ("astream", "aput"), ("astream", "put")],
)
def test_a_write_cut_while_its_intent_is_written_on_a_worker_thread_ends_failed_and_not_sent(
    tmp_path: Path, entry: str, tool: str
) -> None:
    rt, url, out, tools = _cut_during_the_intent(tmp_path, entry, tool)
    rows = write_entries(url, rt)
    assert [(node, state) for node, state, _error in rows] in ([], [(rows[0][0], "failed")]), rows
    for _node, _state, error in rows:
        assert error is not None
        stored = json.loads(error)
        assert stored["category"] == "cancelled" and stored["details"]["sent"] is False, stored
    assert tools.calls == Counter()  # the tool was never sent
    for obs in out:  # the write, and a read of the message that never began
        assert obs.error is not None and obs.error.category == "cancelled", obs
        assert obs.error.details.get("sent") is False, obs
