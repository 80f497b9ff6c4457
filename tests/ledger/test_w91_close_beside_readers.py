"""Closing a runtime while a tool that timed out writes its late outcome does not crash the process.

A tool that outlives its timeout ends on its own thread, which then reads and writes the ledger
to record the late outcome. ``close()`` closed every thread's SQLite connection from the closing
thread, so a late outcome being written just then had its connection freed under its statement:
a segmentation fault of the whole process (``Runtime.close()`` right after such a call ended). The
late writer now runs inside ``SqliteConnections.using``: ``close()`` leaves that thread's connection
to it, and the thread closes it when its write is done. The race runs many times in a child
process, since the failure is the process dying; every round ends with the runtime closed and the
entry either settled by the late outcome or still ``unknown_commit``, never lost.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

_SCRIPT = textwrap.dedent(
    """
    import sqlite3, sys, threading
    from actionspace import Runtime

    folder, rounds = sys.argv[1], int(sys.argv[2])
    states = []
    for n in range(rounds):
        path = f"{folder}/r{n}.db"
        rt = Runtime(f"sqlite:///{path}", recover_on_start=False)
        answer = threading.Event()

        @rt.tool(effect="external", idempotency="none", timeout_s=0.02)
        def pay(to: str) -> str:
            \"\"\"Pay someone; its answer comes late.\"\"\"
            answer.wait(10)
            return f"paid {to}"

        obs = rt.call({"name": "pay", "arguments": {"to": "bob"}}, run_id="r", node_id="n")
        assert obs.error is not None and obs.error.category == "unknown_commit", obs
        answer.set()  # the tool ends now, on its own thread, as the runtime closes
        rt.close()
        with sqlite3.connect(path) as db:
            states += [row[0] for row in db.execute("SELECT state FROM ledger_entries")]
        db.close()
    print(" ".join(sorted(set(states))), len(states))
    """
)


def test_closing_a_runtime_as_a_timed_out_tool_ends_does_not_crash_or_lose_its_entry(tmp_path: Path) -> None:
    rounds = 60
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT, str(tmp_path), str(rounds)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    *seen, count = done.stdout.split()
    assert int(count) == rounds  # one entry a round, none lost
    assert set(seen) <= {"committed", "unknown_commit"}
