"""A closed runtime lets go of what it opened: the portal loop that runs async tools for sync
callers (its thread and its loop's descriptors), and the run-state store's connections to the
SQLite file. A process that makes runtimes one after another (a test suite, a worker that builds
one per job) used to keep a thread and three descriptors per runtime used from sync code, and
eight to eleven descriptors per SQLite runtime."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

from actionspace import Runtime
from tests.close_tools import WAIT_S, open_on, until


def _portals() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "actionspace-portal" and t.is_alive()]


def test_a_closed_runtime_stops_the_portal_loop_its_sync_calls_of_async_tools_ran_on() -> None:
    before = set(_portals())
    rt = Runtime("memory://", recover_on_start=False)

    @rt.tool(effect="read", reads=["r:{x}"])
    async def look(x: int) -> int:
        """An async read, awaited on the portal loop when called from sync code."""
        return x + 1

    obs = rt.call({"name": "look", "arguments": {"x": 1}})
    assert obs.ok and obs.data == 2
    started = set(_portals()) - before
    assert len(started) == 1, "a sync call of an async tool runs on a portal loop"
    rt.close()
    (thread,) = started
    thread.join(WAIT_S)
    assert not thread.is_alive(), "the portal's thread still runs after close()"


def test_a_portal_call_running_when_the_runtime_closes_still_gets_its_answer() -> None:
    """Stopping the portal waits for what runs on it: a call in flight is not left hanging."""
    before = set(_portals())
    rt = Runtime("memory://", recover_on_start=False)
    started = threading.Event()
    release = threading.Event()

    @rt.tool(effect="none")
    async def slow(x: int) -> int:
        """Waits for the test before answering."""
        import asyncio

        started.set()
        while not release.is_set():
            await asyncio.sleep(0.01)
        return x * 3

    answers: list[object] = []
    caller = threading.Thread(target=lambda: answers.append(rt.call({"name": "slow", "arguments": {"x": 2}})))
    caller.start()
    assert started.wait(WAIT_S)
    portal = set(_portals()) - before
    assert len(portal) == 1
    closer = threading.Thread(target=rt.close)
    closer.start()
    release.set()
    caller.join(WAIT_S)
    closer.join(WAIT_S)
    assert not caller.is_alive() and not closer.is_alive()
    assert len(answers) == 1
    obs = answers[0]
    assert getattr(obs, "ok", False) and getattr(obs, "data", None) == 6, obs
    until(lambda: not any(t.is_alive() for t in portal), "the portal's thread ended after the close")


def test_a_closed_sqlite_runtime_keeps_no_descriptor_on_its_file(tmp_path: Path) -> None:
    path = tmp_path / "as.db"
    rt = Runtime(f"sqlite:///{path}", recover_on_start=False)

    @rt.tool(effect="read", reads=["r:{x}"])
    def look(x: int) -> int:
        """A read: its call saves the run's state."""
        return x + 1

    assert rt.call({"name": "look", "arguments": {"x": 1}}).ok
    assert open_on(path), "the open runtime holds its file"
    rt.close()
    assert open_on(path) == [], "descriptors left on the closed runtime's file"


def test_run_state_saved_before_close_is_read_by_the_next_runtime(tmp_path: Path) -> None:
    """Closing the run-state store flushes its deferred snapshot: the next runtime knows the run."""
    url = f"sqlite:///{tmp_path / 'as.db'}"
    rt = Runtime(url, recover_on_start=False)

    @rt.tool(effect="read", reads=["r:{x}"])
    def look(x: int) -> int:
        """A read."""
        return x + 1

    obs = rt.call({"name": "look", "arguments": {"x": 1}}, run_id="run-a")
    assert obs.ok
    shown = rt.context_label("run-a")
    rt.close()
    db = sqlite3.connect(tmp_path / "as.db")  # its run-state table (ledger/run_state.py)
    try:
        stored = db.execute("SELECT state FROM run_state WHERE run_id = 'run-a'").fetchall()
    finally:
        db.close()
    assert len(stored) == 1, "no snapshot of the run in the file after close()"
    again = Runtime(url, recover_on_start=False)
    try:
        assert again.run_state("run-a").run_id == "run-a"
        assert again.context_label("run-a") == shown
    finally:
        again.close()
