"""A close issued from the event loop a call runs on (another task of that loop) cannot wait for
the call to end: the call's task runs only once ``close()`` returned. Its events still reach the
SQLite trace store: the stores stay open for the calls that close cut on its own loop until they
stored what they recorded, then close (plans: tests/test_w10_close_plan_same_loop.py).

Every event of such a call is in the trace once the call ended: its ``dispatched`` event and its
final observation (a read ``cancelled``, a write ``unknown_commit``)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest

from actionspace import Observation, Runtime
from tests.close_tools import Tools, slow_runtime, write_entries

WAIT_S = 10.0
Work = Callable[[Runtime, str], Coroutine[Any, Any, list[Observation]]]


def _call(x: int, name: str) -> dict[str, Any]:
    return {"name": name, "arguments": {"x": x}}


def _work(entry: str, read: str, write: str) -> tuple[Work, list[str]]:
    """How ``entry`` runs, and the category each of its calls ends with."""

    async def acall_read(rt: Runtime, run_id: str) -> list[Observation]:
        return [await rt.acall(_call(1, read), run_id=run_id)]

    async def acall_write(rt: Runtime, run_id: str) -> list[Observation]:
        return [await rt.acall(_call(1, write), run_id=run_id)]

    async def acall_all_reads(rt: Runtime, run_id: str) -> list[Observation]:
        return await rt.acall_all([_call(1, read), _call(2, read)], run_id=run_id)

    async def astream_write(rt: Runtime, run_id: str) -> list[Observation]:
        return [o async for o in rt.astream(_call(1, write), run_id=run_id) if not o.provisional]

    works: dict[str, tuple[Work, list[str]]] = {
        "acall_read": (acall_read, ["cancelled"]),
        "acall_write": (acall_write, ["unknown_commit"]),
        "acall_all_reads": (acall_all_reads, ["cancelled", "cancelled"]),
        "astream_write": (astream_write, ["unknown_commit"]),
    }
    return works[entry]


def _stored(path: Path, run_id: str) -> list[tuple[str, str]]:
    """(kind, category) of the run's events in the file (its Runtime closed)."""
    with Runtime(f"sqlite:///{path}", recover_on_start=False) as again:
        return [(e.kind, str(e.data.get("category", ""))) for e in again.trace.events(run_id)]


@pytest.mark.parametrize("kind", ["async_tools", "thread_tools"])
@pytest.mark.parametrize("entry", ["acall_read", "acall_write", "acall_all_reads", "astream_write"])
def test_every_event_of_a_call_cut_by_a_close_on_its_own_loop_is_stored(
    tmp_path: Path, entry: str, kind: str
) -> None:
    read, write = ("aget", "aput") if kind == "async_tools" else ("get", "put")
    work, expected = _work(entry, read, write)
    path = tmp_path / "w9.db"
    tools = Tools(started_after=len(expected))
    rt = slow_runtime(f"sqlite:///{path}", tools)
    run_id = rt.new_run()

    async def main() -> list[Observation]:
        call = asyncio.create_task(work(rt, run_id))
        await asyncio.to_thread(tools.started.wait, WAIT_S)
        await asyncio.sleep(0.05)
        rt.close()
        return await asyncio.wait_for(call, WAIT_S)

    started = time.monotonic()
    out = asyncio.run(main())
    assert time.monotonic() - started < WAIT_S
    assert [o.error.category if o.error else "ok" for o in out] == expected, out
    stored = _stored(path, run_id)
    observed = sorted(c for k, c in stored if k == "observation")
    assert observed == sorted(expected), stored
    assert [k for k, _c in stored].count("dispatched") == len(expected), stored
    for _node, state, error in write_entries(f"sqlite:///{path}", rt):
        assert state == "unknown" and error is not None and "closed" in error
