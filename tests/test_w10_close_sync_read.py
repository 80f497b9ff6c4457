"""A sync read (``rt.call``, ``rt.call_all``, a session's ``handle``) that another thread's
``close()`` waits for, and that ends within that wait, answers what its tool returned: reads are
safe to finish, and its events are stored before the stores close, so the answer the caller gets
is the one in the trace. One that ends after the wait, its events lost with the closed trace
store, still ends ``cancelled`` (tests/test_w9_close_sync_calls.py)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from actionspace import Observation, Runtime
from tests.close_tools import WAIT_S, in_frames, in_thread, until


def _runtime(url: str, started: threading.Event, release: threading.Event) -> Runtime:
    rt = Runtime(url, recover_on_start=False)

    def hold(x: int) -> int:
        started.set()
        assert release.wait(WAIT_S)
        return x * 10

    @rt.tool(effect="read", reads=["r:{x}"])
    def look(x: int) -> int:
        """Read x (on a worker thread the caller waits for)."""
        return hold(x)

    @rt.tool(effect="none")
    def pure(x: int) -> int:
        """Compute x (on the caller's own thread)."""
        return hold(x)

    return rt


def _answers(rt: Runtime, run_id: str, entry: str, tool: str) -> Callable[[], list[Observation]]:
    call = {"name": tool, "arguments": {"x": 4}}
    if entry == "call":
        return lambda: [rt.call(call, run_id=run_id)]
    if entry == "call_all":
        return lambda: rt.call_all(call, run_id=run_id)
    session = rt.session(run_id)
    message = {"role": "assistant", "tool_calls": [_openai(tool)]}
    return lambda: list(session.handle(message).observations)


def _openai(tool: str) -> dict[str, Any]:
    return {"id": "c1", "type": "function", "function": {"name": tool, "arguments": '{"x": 4}'}}


@pytest.mark.parametrize("tool", ["look", "pure"])
@pytest.mark.parametrize("entry", ["call", "call_all", "handle"])
def test_a_sync_read_ending_within_the_close_wait_answers_what_its_tool_returned(
    tmp_path: Path, entry: str, tool: str
) -> None:
    path = tmp_path / "w10.db"
    started, release = threading.Event(), threading.Event()
    rt = _runtime(f"sqlite:///{path}", started, release)
    run_id = rt.new_run()
    caller, answered = in_thread(_answers(rt, run_id, entry, tool))
    assert started.wait(WAIT_S)
    closer, closed = in_thread(rt.close)
    until(lambda: not closer.is_alive() or in_frames("wait_sync"), "close() waits for the call")
    release.set()
    closer.join(WAIT_S)
    caller.join(WAIT_S)
    assert not closer.is_alive() and closed == [None], closed
    assert not caller.is_alive() and len(answered) == 1, answered
    [obs] = answered[0]
    assert isinstance(obs, Observation), obs
    assert obs.status == "ok" and obs.error is None, obs
    assert obs.data == 40, obs
    with Runtime(f"sqlite:///{path}", recover_on_start=False) as again:
        stored = [(e.kind, e.data.get("status")) for e in again.trace.events(run_id)]
    assert stored.count(("observation", "ok")) == 1, stored  # the trace holds the same answer
