"""A single call (``acall``), a message (``acall_all``) or a stream (``astream``) waiting for its tool
when the Runtime closes ends promptly, whoever closes it (another thread, another task of its loop,
with or without ``wait``): a read ``cancelled``, a write ``unknown_commit`` with its ledger entry
noted ``unknown`` by the close, the call's observation stored before the trace store closes (when
the close runs on another thread), the tool never called again, and the caller's task left with no
cancel pending."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest

from actionspace import Observation, Runtime
from tests.close_tools import SLOW_S, Tools, slow_runtime, write_entries

ENDS_WITHIN_S = 3.0
"""How long a call may take to end once ``close()`` was called (the tools would take 5 s)."""
WAIT_S = 10.0


def _runtime(url: str, tools: Tools) -> Runtime:
    rt = slow_runtime(url, tools)

    @rt.tool(effect="read")
    async def tail(x: int) -> AsyncIterator[str]:
        """Stream lines, the second after 5 s."""
        tools.begin("tail")
        yield "first line\n"
        await asyncio.sleep(SLOW_S)
        yield "second line\n"

    return rt


def _url(tmp_path: Path, store: str) -> str:
    return "memory://" if store == "memory" else f"sqlite:///{tmp_path / 'w83.db'}"


def _call(x: int, name: str) -> dict[str, Any]:
    return {"name": name, "arguments": {"x": x}}


UNSENT = "cancelled, not sent"
Work = Callable[[Runtime, str], Coroutine[Any, Any, list[Observation]]]


async def _acall(rt: Runtime, run_id: str, name: str) -> list[Observation]:
    return [await rt.acall(_call(1, name), run_id=run_id)]


async def _astream(rt: Runtime, run_id: str, name: str) -> list[Observation]:
    return [o async for o in rt.astream(_call(1, name), run_id=run_id) if not o.provisional]


def _entries(read: str, write: str) -> dict[str, tuple[Work, list[tuple[str, str]]]]:
    """Each entry point: how it runs, and the (tool, category) each call must end with."""

    async def read_call(rt: Runtime, run_id: str) -> list[Observation]:
        return await _acall(rt, run_id, read)

    async def write_call(rt: Runtime, run_id: str) -> list[Observation]:
        return await _acall(rt, run_id, write)

    async def reads(rt: Runtime, run_id: str) -> list[Observation]:  # they run together
        return await rt.acall_all([_call(1, read), _call(2, read)], run_id=run_id)

    async def write_first(rt: Runtime, run_id: str) -> list[Observation]:  # the read waits its turn
        return await rt.acall_all([_call(1, write), _call(2, read)], run_id=run_id)

    async def stream_write(rt: Runtime, run_id: str) -> list[Observation]:
        return await _astream(rt, run_id, write)

    async def stream_tail(rt: Runtime, run_id: str) -> list[Observation]:
        return await _astream(rt, run_id, "tail")

    return {
        "acall_read": (read_call, [(read, "cancelled")]),
        "acall_write": (write_call, [(write, "unknown_commit")]),
        "acall_all_reads": (reads, [(read, "cancelled"), (read, "cancelled")]),
        "acall_all_write_first": (write_first, [(write, "unknown_commit"), (read, UNSENT)]),
        "astream_write": (stream_write, [(write, "unknown_commit")]),
        "astream_tail": (stream_tail, [("tail", "cancelled")]),
    }


def _observed(url: str, rt: Runtime, run_id: str) -> list[str]:
    """The categories of the error observations stored in the run's trace."""
    if url.startswith("sqlite"):
        with Runtime(url, recover_on_start=False) as again:
            events = list(again.trace.events(run_id))
    else:
        events = list(rt.trace.events(run_id))
    return [e.data.get("category", "") for e in events if e.kind == "observation" and e.data.get("category")]


def _sent(expected: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return [(tool, category) for tool, category in expected if category != UNSENT]


def _assert_ended(out: list[Observation], expected: list[tuple[str, str]]) -> None:
    def shown(obs: Observation) -> str:
        if obs.error is None:
            return "ok"
        return UNSENT if obs.error.details.get("sent") is False else obs.error.category

    assert [(o.tool, shown(o)) for o in out] == expected, out
    for obs in out:
        assert obs.error is not None and not obs.error.retryable
        if obs.error.category == "unknown_commit":
            assert "closed" in obs.error.message
            assert obs.error.details.get("idempotency_key")


def _assert_writes_noted(url: str, rt: Runtime, expected: list[tuple[str, str]], thread_write: bool) -> None:
    writes = [e for e in write_entries(url, rt)]
    assert len(writes) == sum(1 for _t, c in expected if c == "unknown_commit")
    for _node, state, error in writes:
        if thread_write and state == "committed":  # close(wait=True) let its worker thread answer
            continue
        assert state == "unknown", writes
        assert error is not None and "closed" in error


def _in_thread(work: Callable[[], list[Observation]]) -> tuple[threading.Thread, list[Any]]:
    out: list[Any] = []

    def run() -> None:
        try:
            out.append(work())
        except BaseException as exc:
            out.append(exc)
        out.append(time.monotonic())

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


ENTRIES = [
    "acall_read",
    "acall_write",
    "acall_all_reads",
    "acall_all_write_first",
    "astream_write",
    "astream_tail",
]
TOOLS = {"async_tools": ("aget", "aput"), "thread_tools": ("get", "put")}


def _cases() -> list[Any]:
    cases = []
    for entry in ENTRIES:
        for kind in TOOLS:
            if entry == "astream_tail" and kind == "thread_tools":
                continue
            for wait in (False, True):
                if wait and kind == "thread_tools" and entry != "acall_write":
                    continue  # close(wait=True) waits 5 s for the worker thread: one entry shows it
                cases.append(
                    pytest.param(entry, kind, wait, id=f"{entry}-{kind}-{'wait' if wait else 'nowait'}")
                )
    return cases


@pytest.mark.parametrize("store", ["memory", "sqlite"])
@pytest.mark.parametrize(("entry", "kind", "wait"), _cases())
def test_a_call_waiting_for_its_tool_ends_promptly_when_another_thread_closes_the_runtime(
    tmp_path: Path, store: str, entry: str, kind: str, wait: bool
) -> None:
    read, write = TOOLS[kind]
    work, expected = _entries(read, write)[entry]
    url = _url(tmp_path, store)
    tools = Tools(started_after=len(_sent(expected)))
    rt = _runtime(url, tools)
    run_id = rt.new_run()

    async def call() -> list[Observation]:
        out = await work(rt, run_id)
        task = asyncio.current_task()
        assert task is not None and task.cancelling() == 0  # no cancel of the close left pending
        await asyncio.sleep(0)
        return out

    thread, result = _in_thread(lambda: asyncio.run(call()))
    assert tools.started.wait(WAIT_S)
    time.sleep(0.1)
    closed_at = time.monotonic()
    rt.close(wait=wait)
    thread.join(WAIT_S)
    assert not thread.is_alive()
    out, ended_at = result
    assert isinstance(out, list), out
    assert ended_at - closed_at < ENDS_WITHIN_S, ended_at - closed_at
    if not (wait and kind == "thread_tools"):  # close(wait=True) itself waits for the worker threads
        assert time.monotonic() - closed_at < ENDS_WITHIN_S
    _assert_ended(out, expected)
    _assert_writes_noted(url, rt, expected, thread_write=wait and kind == "thread_tools")
    stored = _observed(url, rt, run_id)  # stored before the trace store closed
    for _tool, category in _sent(expected):
        assert category in stored, stored
    time.sleep(0.2)
    assert tools.calls == Counter(tool for tool, _c in _sent(expected)), tools.calls  # nothing sent again


@pytest.mark.parametrize("store", ["memory", "sqlite"])
@pytest.mark.parametrize("wait", [False, True], ids=["close", "close_wait"])
@pytest.mark.parametrize("entry", ENTRIES)
@pytest.mark.parametrize("kind", list(TOOLS))
def test_a_call_waiting_for_its_tool_ends_promptly_when_another_task_of_its_loop_closes_the_runtime(
    tmp_path: Path, store: str, wait: bool, entry: str, kind: str
) -> None:
    if kind == "thread_tools" and (wait or entry == "astream_tail"):
        pytest.skip("close(wait=True) holds the loop until the worker thread ends; tail is async")
    read, write = TOOLS[kind]
    work, expected = _entries(read, write)[entry]
    url = _url(tmp_path, store)
    tools = Tools(started_after=len(_sent(expected)))
    rt = _runtime(url, tools)
    run_id = rt.new_run()

    async def main() -> tuple[list[Observation], float]:
        call = asyncio.create_task(work(rt, run_id))
        await asyncio.to_thread(tools.started.wait, WAIT_S)
        await asyncio.sleep(0.1)
        closed_at = time.monotonic()
        rt.close(wait=wait)
        out = await asyncio.wait_for(call, WAIT_S)
        return out, time.monotonic() - closed_at

    out, took = asyncio.run(main())
    assert took < ENDS_WITHIN_S, took
    _assert_ended(out, expected)
    # the ledger entries were noted before the stores closed (the events come after: its loop
    # could not run the call's end before close() returned)
    _assert_writes_noted(url, rt, expected, thread_write=False)
    time.sleep(0.2)
    assert tools.calls == Counter(tool for tool, _c in _sent(expected)), tools.calls


def test_a_call_on_a_loop_of_another_thread_ends_when_the_runtime_closes() -> None:
    tools = Tools()
    rt = _runtime("memory://", tools)
    run_id = rt.new_run()
    loop = asyncio.new_event_loop()
    runner = threading.Thread(target=loop.run_forever, daemon=True)
    runner.start()
    try:
        future = asyncio.run_coroutine_threadsafe(rt.acall(_call(1, "aput"), run_id=run_id), loop)
        assert tools.started.wait(WAIT_S)
        closed_at = time.monotonic()
        rt.close()
        obs = future.result(WAIT_S)
        assert time.monotonic() - closed_at < ENDS_WITHIN_S
    finally:
        loop.call_soon_threadsafe(loop.stop)
        runner.join(WAIT_S)
        loop.close()
    _assert_ended([obs], [("aput", "unknown_commit")])
    assert "unknown_commit" in _observed("memory://", rt, run_id)


def test_a_caller_cancelling_its_call_still_gets_its_cancel_and_nothing_stays_registered() -> None:
    tools = Tools()
    rt = _runtime("memory://", tools)
    run_id = rt.new_run()

    async def main() -> None:
        call = asyncio.create_task(rt.acall(_call(1, "aget"), run_id=run_id))
        await asyncio.to_thread(tools.started.wait, WAIT_S)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        assert rt.engine.messages.in_flight.tasks == {}
        message = asyncio.create_task(rt.acall_all([_call(2, "aget"), _call(3, "aput")], run_id=run_id))
        await asyncio.sleep(0.05)
        message.cancel()
        with pytest.raises(asyncio.CancelledError):
            await message
        assert rt.engine.messages.in_flight.tasks == {}

    asyncio.run(main())
    rt.close()


def test_calls_that_answered_leave_nothing_registered_and_a_later_close_waits_for_none() -> None:
    rt = Runtime("memory://", recover_on_start=False)

    @rt.tool(effect="read")
    async def nap(x: int) -> int:
        """Wait a moment, then answer."""
        await asyncio.sleep(0.01)
        return x

    @rt.tool(effect="write", writes=["k:{x}"])
    async def note(x: int) -> int:
        """Write after a moment."""
        await asyncio.sleep(0.01)
        return x

    run_id = rt.new_run()

    async def main() -> list[Observation]:
        out = [await rt.acall(_call(1, "nap"), run_id=run_id)]
        out += await rt.acall_all([_call(2, "nap"), _call(3, "note")], run_id=run_id)
        out += [o async for o in rt.astream(_call(4, "note"), run_id=run_id)]
        return out

    out = asyncio.run(main())
    assert [o.status for o in out] == ["ok"] * 4
    assert rt.engine.messages.in_flight.tasks == {}
    started = time.monotonic()
    rt.close()
    assert time.monotonic() - started < 0.5
    assert rt.engine.messages.in_flight.cuts == []
