"""The ledger driver reads ``Executor.closed`` before a write's first send, and the close notes
``unknown`` only the writes whose send began (``LedgerDriver.sending``). If the send were noted
only after that read, a close landing between the two would neither withdraw the write (the read
said "open") nor see it as sent (not noted yet): the tool would run after the close began and its
entry would be left as the close never looked at it.

Here the close lands exactly there: the driver's view of the executor closes the runtime (on the
call's own loop, as a ``close()`` called there does) the first time ``closed`` is read once the
write's intent is durable, and answers what it read before the close. Whatever the tool (async,
sync run inline, blocking on a worker thread), the write must be withdrawn: its tool never called,
its entry ``failed`` (``cancelled``, not sent), its call ``cancelled`` with ``details["sent"]``
False, never ``unknown_commit``."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from actionspace import Observation, Runtime
from actionspace.execution.executor import Executor
from tests.close_tools import WAIT_S


class _ClosesOnRead:
    """The driver's view of the executor: the first read of ``closed`` after the intent is durable
    closes the runtime, then answers the value read before."""

    def __init__(self, rt: Runtime, real: Executor) -> None:
        self.rt, self.real = rt, real
        self.fired = False
        self.close_raised: list[BaseException] = []

    @property
    def closed(self) -> bool:
        shut = self.real.closed
        if not shut and not self.fired and self.rt.ledger.list(state="dispatched", limit=10):
            self.fired = True
            try:
                self.rt.close()
            except BaseException as exc:
                self.close_raised.append(exc)
        return shut


def _entries(path: Path) -> list[tuple[str, dict[str, Any] | None]]:
    db = sqlite3.connect(path, timeout=WAIT_S)
    try:
        rows = db.execute("select state, error from ledger_entries").fetchall()
    finally:
        db.close()
    return [(state, None if error is None else json.loads(error)) for state, error in rows]


@pytest.mark.parametrize("kind", ["async", "inline", "blocking"])
def test_a_close_between_the_closed_check_and_the_send_withdraws_the_write(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "w12.db"
    rt = Runtime(f"sqlite:///{path}", recover_on_start=False)
    sent: list[int] = []

    if kind == "async":

        async def aput(x: int) -> int:
            """An async write; it counts its sends."""
            sent.append(x)
            return x

        rt.tool(aput, name="put", effect="write", writes=["w:{x}"])
    else:

        def put(x: int) -> int:
            """A sync write, inline or on a worker thread; it counts its sends."""
            sent.append(x)
            return x

        rt.tool(put, effect="write", writes=["w:{x}"], blocking=kind == "blocking")

    view = _ClosesOnRead(rt, rt.engine.executor)
    rt.engine.driver.executor = view  # type: ignore[assignment]

    async def write() -> Observation:
        return await rt.acall({"name": "put", "arguments": {"x": 1}})

    obs = asyncio.run(write())
    assert view.fired and view.close_raised == [], view.close_raised
    assert sent == [], obs  # never sent after the close began
    [(state, error)] = _entries(path)
    assert state == "failed", (state, error)
    assert error is not None and error["category"] == "cancelled", error
    assert error["details"]["sent"] is False, error
    assert obs.error is not None and obs.error.category == "cancelled", obs
    assert obs.error.details.get("sent") is False, obs
