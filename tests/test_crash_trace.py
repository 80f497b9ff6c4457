"""A process killed mid-call leaves the trace store readable and every recorded call whole."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import sqlite3
import time
from multiprocessing.connection import Connection
from pathlib import Path

from actionspace import Runtime, ToolCall
from actionspace.ledger.sqlite_writer import LINGER_S
from actionspace.trace.store import open_trace_store


def _worker(url: str, run_id: str, conn: Connection) -> None:
    rt = Runtime(url)

    @rt.tool(effect="write")
    def put(key: str, value: int) -> dict[str, int]:
        return {key: value}

    i = 0
    while True:
        rt.call(ToolCall(name="put", arguments={"key": f"k{i}", "value": i}, id=f"c{i}"), run_id=run_id)
        i += 1
        if i == 25:
            conn.send("ready")


def test_sigkill_during_calls_leaves_only_whole_calls(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'trace.db'}"
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_worker, args=(url, "run-crash", child), daemon=True)
    proc.start()
    assert parent.poll(60), "worker never reached 25 calls"
    assert parent.recv() == "ready"
    assert proc.pid is not None
    # A call's events are deferred to the file's next transaction or its flusher (within
    # LINGER_S): the calls made well before the kill are all stored, the latest may not be.
    time.sleep(50 * LINGER_S)
    os.kill(proc.pid, signal.SIGKILL)
    proc.join(10)

    db = sqlite3.connect(tmp_path / "trace.db")
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    db.close()
    events = open_trace_store(url).events("run-crash")
    by_call: dict[str, list[str]] = {}
    for e in events:
        if e.call_id is not None:
            by_call.setdefault(e.call_id, []).append(e.kind)
    assert len(by_call) >= 25
    whole = [
        "authorized",
        "validated",
        "flow_checked",
        "ledger",
        "ledger",
        "dispatched",
        "observation",
        "ledger",
    ]
    for kinds in by_call.values():
        assert kinds == whole
    assert [e.seq for e in events] == list(range(len(events)))
