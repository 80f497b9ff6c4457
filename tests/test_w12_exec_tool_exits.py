"""A tool that raises ``SystemExit`` (a library calling ``sys.exit()``) or ``KeyboardInterrupt``
under the sync facade: the exception goes on up to the caller, in the caller's own thread, as if
the tool had run there (docs/errors.md). An async tool, a streaming tool or the calls of a message
run on the executor's private event loop thread, out of which asyncio lets these two exceptions
escape: the thread must not die with it (every later call of the runtime would answer ``Event loop
is closed``). A write whose tool raised one may have run: its ledger entry is left ``unknown``
(abandoned: no caller holds it, a repeat answers ``unknown_commit`` at once) whichever way the tool
ran, never ``failed``."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from actionspace import Runtime
from actionspace.execution._portal import _run_until_stopped
from actionspace.execution.loop import new_event_loop
from tests.close_tools import WAIT_S

KINDS = ["plain", "blocking", "async", "async_at_once", "stream", "async_stream"]
CALLERS = ["call", "call_all", "run_plan"]
RAISED: dict[str, type[BaseException]] = {"exit": SystemExit, "interrupt": KeyboardInterrupt}


def _tool(kind: str, fail: Callable[[], BaseException]) -> tuple[Callable[..., Any], dict[str, Any]]:
    """A write tool of ``kind`` raising ``fail()`` the first time it runs, and how to declare it."""
    if kind in ("plain", "blocking"):

        def put(x: int) -> int:
            """Write x."""
            raise fail()

        return put, {"blocking": kind == "blocking"}
    if kind == "async":

        async def aput(x: int) -> int:
            """Write x, after a wait."""
            await asyncio.sleep(0)
            raise fail()

        return aput, {}
    if kind == "async_at_once":

        async def aput_now(x: int) -> int:
            """Write x, at once."""
            raise fail()

        return aput_now, {}
    if kind == "stream":

        def puts(x: int) -> Iterator[int]:
            """Write x, reporting on the way (a blocking generator)."""
            yield x
            raise fail()

        return puts, {"blocking": True}

    async def aputs(x: int) -> AsyncIterator[int]:
        """Write x, reporting on the way."""
        yield x
        raise fail()

    return aputs, {}


def _state(path: Path) -> list[str]:
    db = sqlite3.connect(path, timeout=WAIT_S)
    try:
        return [state for (state,) in db.execute("select state from ledger_entries")]
    finally:
        db.close()


def _propose(rt: Runtime, caller: str, name: str) -> None:
    call = {"name": name, "arguments": {"x": 1}}
    if caller == "call":
        rt.call(call, run_id="r1")
    elif caller == "call_all":  # with a read of the same message beside it, on the same loop
        rt.call_all([{**call, "id": "c1"}, {"name": "where", "arguments": {}, "id": "c2"}], run_id="r1")
    else:
        rt.run_plan({"nodes": [{"id": "n1", "tool": name, "arguments": {"x": 1}}]}, run_id="r1")


@pytest.mark.parametrize("raised", list(RAISED))
@pytest.mark.parametrize("caller", CALLERS)
@pytest.mark.parametrize("kind", KINDS)
def test_a_tool_that_exits_stops_its_sync_caller_and_the_runtime_goes_on(
    tmp_path: Path, kind: str, caller: str, raised: str
) -> None:
    path = tmp_path / "exits.db"
    rt = Runtime(f"sqlite:///{path}", recover_on_start=False)
    thrown: list[BaseException] = []

    def fail() -> BaseException:
        thrown.append(RAISED[raised](3))
        return thrown[-1]

    fn, declared = _tool(kind, fail)
    rt.tool(effect="write", writes=["w:{x}"], **declared)(fn)

    @rt.tool(effect="read", reads=["here"])
    async def where() -> int:
        """The thread async tools of sync callers run on."""
        return threading.get_ident()

    before = rt.call({"name": "where", "arguments": {}})
    assert before.error is None, before
    try:
        with pytest.raises(RAISED[raised]) as stopped:
            _propose(rt, caller, fn.__name__)
        assert len(thrown) == 1 and stopped.value is thrown[0]  # the tool's own, in this thread
        after = rt.call({"name": "where", "arguments": {}})
        assert after.error is None, after  # the runtime goes on: not "Event loop is closed"
        assert after.data == before.data  # on the same loop thread, which lived through it
        assert _state(path) == ["unknown"]  # it may have run: not failed, and no caller holds it
    finally:
        rt.close()


def test_a_stop_asked_in_the_pass_a_tool_exits_in_still_stops_the_loop() -> None:
    """asyncio forgets a stop that ran in the same pass as the exception it lets out; the loop
    thread stops all the same, and runs what was left queued before it does."""
    loop = new_event_loop()
    stopping = threading.Event()
    ran: list[str] = []

    def stop() -> None:
        stopping.set()
        loop.stop()

    def exits() -> None:
        raise SystemExit(3)

    loop.call_soon(stop)
    loop.call_soon(exits)
    loop.call_soon(ran.append, "left queued")
    runner = threading.Thread(target=_run_until_stopped, args=(loop, stopping), daemon=True)
    try:
        runner.start()
        runner.join(WAIT_S)
        assert not runner.is_alive()
        assert ran == ["left queued"]
    finally:
        if runner.is_alive():
            loop.call_soon_threadsafe(loop.stop)
            runner.join(WAIT_S)
        loop.close()
