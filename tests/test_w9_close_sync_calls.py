"""A sync call (``rt.call``) whose tool runs on the caller's thread, or on a worker thread the
caller waits for, cannot be cut by ``close()`` from another thread (Python cannot stop a
thread). ``close()`` waits for it, bounded (``SYNC_CALL_WAIT_S``), before the stores close: one
that ends within the wait settles its ledger entry, stores its events and answers what it
answered (tests/test_w10_close_sync_read.py); one that runs on ends
typed when its tool returns (a read ``cancelled``, a write ``unknown_commit``), its entry noted
``unknown`` by the close, never ``dispatched``."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from actionspace import Observation, Runtime
from actionspace._closing import SYNC_CALL_WAIT_S
from tests.close_tools import WAIT_S, in_frames, in_thread, until, write_entries


class Held:
    """Tools that say they started, then wait until released."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()
        self.calls = 0

    def hold(self, x: int) -> int:
        self.calls += 1
        self.started.set()
        assert self.release.wait(WAIT_S)
        return x


def _runtime(url: str, held: Held) -> Runtime:
    rt = Runtime(url, recover_on_start=False)

    @rt.tool(effect="write", writes=["w:{x}"])
    def put(x: int) -> int:
        """Write x (on a worker thread the caller waits for)."""
        return held.hold(x)

    @rt.tool(effect="none")
    def pure(x: int) -> int:
        """Compute x (on the caller's own thread)."""
        return held.hold(x)

    return rt


def _events(path: Path, run_id: str) -> list[tuple[str, str]]:
    """The (kind, category) of every event of ``run_id`` in the file's trace (its Runtime closed)."""
    with Runtime(f"sqlite:///{path}", recover_on_start=False) as again:
        return [(e.kind, str(e.data.get("category", ""))) for e in again.trace.events(run_id)]


def _close_while_called(
    tmp_path: Path, tool: str, *, release_within_the_wait: bool
) -> tuple[Runtime, str, Any]:
    path = tmp_path / "w9.db"
    held = Held()
    rt = _runtime(f"sqlite:///{path}", held)
    run_id = rt.new_run()
    caller, answered = in_thread(lambda: rt.call({"name": tool, "arguments": {"x": 1}}, run_id=run_id))
    assert held.started.wait(WAIT_S)
    closer, closed = in_thread(rt.close)
    if release_within_the_wait:  # once close() waits for the call (or, without that wait, returned)
        until(lambda: not closer.is_alive() or in_frames("wait_sync"), "close() waits for the call")
    else:
        closer.join(SYNC_CALL_WAIT_S + WAIT_S)
    held.release.set()
    closer.join(WAIT_S)
    caller.join(WAIT_S)
    assert not closer.is_alive() and closed == [None], closed
    assert not caller.is_alive() and len(answered) == 1, answered
    return rt, run_id, answered[0]


@pytest.mark.parametrize("tool", ["put", "pure"])
def test_a_sync_call_ending_within_the_close_wait_settles_its_entry_and_stores_its_events(
    tmp_path: Path, tool: str
) -> None:
    rt, run_id, obs = _close_while_called(tmp_path, tool, release_within_the_wait=True)
    assert isinstance(obs, Observation), obs
    rows = write_entries(f"sqlite:///{tmp_path / 'w9.db'}", rt)
    events = _events(tmp_path / "w9.db", run_id)
    if tool == "put":
        assert [state for _node, state, _error in rows] == ["committed"], rows
        assert obs.status == "ok", obs  # the ledger holds its outcome: it is not rewritten
        assert ("observation", "") in events, events
    else:
        assert rows == []
        assert obs.status == "ok" and obs.data == 1, obs  # a read that finished: its own answer
        assert ("observation", "") in events, events  # what it answered before close() returned
    assert [kind for kind, _c in events].count("observation") == 1, events


def test_a_sync_write_outliving_the_close_wait_ends_unknown_commit_and_its_entry_unknown(
    tmp_path: Path,
) -> None:
    rt, _run_id, obs = _close_while_called(tmp_path, "put", release_within_the_wait=False)
    assert isinstance(obs, Observation), obs
    assert obs.error is not None and obs.error.category == "unknown_commit", obs
    assert "closed" in obs.error.message and not obs.error.retryable
    rows = write_entries(f"sqlite:///{tmp_path / 'w9.db'}", rt)
    assert [state for _node, state, _error in rows] == ["unknown"], rows
    error = rows[0][2]
    assert error is not None and "closed" in json.loads(error)["message"]


def test_a_sync_read_outliving_the_close_wait_ends_cancelled(tmp_path: Path) -> None:
    _rt, _run_id, obs = _close_while_called(tmp_path, "pure", release_within_the_wait=False)
    assert isinstance(obs, Observation), obs
    assert obs.error is not None and obs.error.category == "cancelled", obs


def test_close_from_the_thread_of_a_sync_call_does_not_wait_for_it(tmp_path: Path) -> None:
    rt = Runtime(f"sqlite:///{tmp_path / 'w9.db'}", recover_on_start=False)
    took: list[float] = []

    @rt.tool(effect="none")
    def closes(x: int) -> int:
        """Close the runtime from inside the call."""
        started = time.monotonic()
        rt.close()
        took.append(time.monotonic() - started)
        return x

    obs = rt.call({"name": "closes", "arguments": {"x": 1}}, run_id=rt.new_run())
    assert obs.error is not None and obs.error.category == "cancelled", obs
    assert took and took[0] < SYNC_CALL_WAIT_S, took
    with sqlite3.connect(tmp_path / "w9.db") as db:
        assert db.execute("select count(*) from ledger_entries").fetchone() == (0,)
