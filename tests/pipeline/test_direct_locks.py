"""The commonest call's frame (pipeline/_direct.py) takes the flow state's and the memory store's
locks by their methods, not ``with`` (whose special-method lookups and bound methods were a tenth
of that branch's C work), and still releases each one it took, whatever the call did."""

from __future__ import annotations

import asyncio
import dis
import json
import threading
from typing import Any

from actionspace import Runtime
from actionspace.types import Observation


class CountingLock:
    """A lock that counts its acquisitions and releases (``with`` or the methods alike)."""

    def __init__(self) -> None:
        self.inner = threading.Lock()
        self.taken = 0
        self.released = 0

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        got = self.inner.acquire(blocking, timeout)
        self.taken += got
        return got

    def release(self) -> None:
        self.released += 1
        self.inner.release()

    def locked(self) -> bool:
        return self.inner.locked()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def _raw(i: int) -> str:
    arguments = json.dumps({"a": i, "b": 1})
    return json.dumps(
        {"id": f"call_{i}", "type": "function", "function": {"name": "add", "arguments": arguments}}
    )


def test_the_direct_frame_takes_no_lock_with_a_with_statement() -> None:
    rt = Runtime("memory://", recover_on_start=False)
    with rt:
        ops = {i.opname for i in dis.get_instructions(rt.engine.quick)}
    assert "BEFORE_WITH" not in ops


def test_each_lock_the_direct_frame_takes_is_released() -> None:
    rt = Runtime("memory://", recover_on_start=False)

    @rt.tool(effect="none")
    async def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    async def play() -> list[Any]:
        run = rt.new_run()
        for i in range(3):  # the name resolved, the entry built, the store's log bound
            await rt.acall(_raw(i), run_id=run)
        state = rt.engine.runs.live[run]
        flow_lock = CountingLock()
        state.flow._lock = flow_lock  # type: ignore[assignment]
        out = [await rt.acall(_raw(i), run_id=run) for i in range(3, 40)]
        assert flow_lock.taken == flow_lock.released >= len(out)
        assert not flow_lock.locked()
        return out

    with rt:
        out = asyncio.run(play())
    assert all(type(o) is Observation and o.status == "ok" for o in out)
    assert [o.data for o in out] == [i + 1 for i in range(3, 40)]
