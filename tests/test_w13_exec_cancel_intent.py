"""An async caller's write (``await rt.acall``) whose task its caller cancels while the intent step
(``accepted`` → ``dispatched``) is being written on a worker thread, the runtime left open. The
step is written whole (a cancel never leaves it half-taken), but nothing was sent: the tool is
never called, so the entry must end ``failed`` (``cancelled``, ``details["sent"]`` False), as a
write withdrawn while it waited for a worker thread does, never stay ``dispatched`` (which a later
proposal reads as "it may have been sent"). Proposed again, the write is sent, once.

The window is held by a real fault: the ledger's intent write waits on an event the test sets
once the caller's cancel was delivered.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
from pathlib import Path
from typing import Any

from actionspace import Observation, Runtime
from tests.close_tools import WAIT_S, in_thread


def _entries(path: Path) -> list[tuple[str, dict[str, Any] | None]]:
    db = sqlite3.connect(path, timeout=WAIT_S)
    try:
        rows = db.execute("select state, error from ledger_entries").fetchall()
    finally:
        db.close()
    return [(state, None if error is None else json.loads(error)) for state, error in rows]


def test_a_write_cancelled_while_its_intent_is_written_is_withdrawn(tmp_path: Path) -> None:
    path = tmp_path / "intent.db"
    rt = Runtime(f"sqlite:///{path}", recover_on_start=False)
    sent: list[int] = []

    @rt.tool(effect="write", writes=["w:{x}"])
    async def put(x: int) -> int:
        """Write x."""
        sent.append(x)
        return x

    entered, release = threading.Event(), threading.Event()
    held = {"armed": True}
    for name in ("begin", "begin_unless_pending"):
        original = getattr(rt.ledger, name, None)
        if original is None:
            continue

        def waiting(*args: Any, _original: Any = original, **kwargs: Any) -> Any:
            if held["armed"]:
                held["armed"] = False
                entered.set()
                release.wait(WAIT_S)
            return _original(*args, **kwargs)

        setattr(rt.ledger, name, waiting)

    loop_ready = threading.Event()
    box: dict[str, Any] = {}

    async def main() -> Observation:
        box["loop"] = asyncio.get_running_loop()
        box["task"] = task = asyncio.create_task(
            rt.acall({"name": "put", "arguments": {"x": 1}}, run_id="r1")
        )
        loop_ready.set()
        return await task

    caller, out = in_thread(lambda: asyncio.run(main()))
    try:
        assert loop_ready.wait(WAIT_S)
        assert entered.wait(WAIT_S), "the intent write began"
        box["loop"].call_soon_threadsafe(box["task"].cancel)
        # the cancel is delivered while the step runs on its thread (the caller awaits it shielded)
        cancelled = threading.Event()
        box["loop"].call_soon_threadsafe(lambda: cancelled.set() if box["task"].cancelling() else None)
        assert cancelled.wait(WAIT_S)
    finally:
        release.set()
    caller.join(WAIT_S)
    assert not caller.is_alive()
    try:
        [raised] = out
        assert isinstance(raised, asyncio.CancelledError), raised
        assert sent == []  # nothing was sent
        [(state, error)] = _entries(path)
        assert state == "failed", (state, error)
        assert error is not None and error["category"] == "cancelled" and error["details"]["sent"] is False
        again = rt.call({"name": "put", "arguments": {"x": 1}}, run_id="r1")
        assert again.error is None and again.data == 1, again
        assert sent == [1]
    finally:
        rt.close()
