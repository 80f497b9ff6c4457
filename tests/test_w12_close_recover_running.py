"""``rt.recover()`` settles what a crash left ``dispatched`` or ``unknown``; it must not decide the
outcome of an action this same process is still running: a write whose tool runs now on a worker
thread (its call under way), or an atomic group cut by its caller while its blocking member still
runs on its worker thread (its rollback, and the settling of its entry, wait for that member).
Such an entry is ``skipped`` (docs/exactly-once.md) and settled by its own send when it ends.

The tools are held on events the test sets, so the windows are open for as long as the test needs."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from actionspace import Runtime
from actionspace.plan.environments import SqliteEnvironment, SqliteTransaction
from tests.close_tools import WAIT_S, in_thread, until
from tests.plan.settings_table import make_settings_db, rows


@pytest.mark.parametrize("caller", ["call", "acall"])
def test_recover_leaves_alone_a_write_whose_tool_runs_in_this_process(tmp_path: Path, caller: str) -> None:
    rt = Runtime(f"sqlite:///{tmp_path / 'w12.db'}", recover_on_start=False)
    inside, go = threading.Event(), threading.Event()
    sent: list[int] = []

    @rt.tool(effect="write", writes=["w:{x}"])
    def put(x: int) -> int:
        """A write on a worker thread, held until the test lets it commit."""
        sent.append(x)
        inside.set()
        assert go.wait(WAIT_S)
        return x

    call = {"name": "put", "arguments": {"x": 1}}
    try:
        if caller == "call":
            thread, answered = in_thread(lambda: rt.call(call))
        else:
            thread, answered = in_thread(lambda: asyncio.run(rt.acall(call)))
        assert inside.wait(WAIT_S)
        [entry] = rt.ledger.list(state="dispatched", limit=10)
        report = rt.recover()  # every age: the entry would be settled were it a crashed process's
        assert entry.key in report.skipped, report
        assert not (report.committed or report.redispatchable or report.unknown_commit), report
        again = rt.ledger.get(entry.key)
        assert again is not None and again.state == "dispatched", again
    finally:
        go.set()
    thread.join(WAIT_S)
    assert not thread.is_alive() and len(answered) == 1, answered
    [obs] = answered
    assert obs.error is None and obs.data == 1, obs  # its own answer, as it committed
    settled = rt.ledger.get(entry.key)
    assert settled is not None and settled.state == "committed", settled
    assert sent == [1]
    assert rt.recover().skipped == []  # nothing runs any more: nothing left to skip
    rt.close()


_PLAN = {
    "nodes": [
        {"id": "a", "tool": "put", "arguments": {"name": "a", "value": "1"}},
        {"id": "b", "tool": "put", "arguments": {"name": "b", "value": "2"}},
    ],
    "groups": [{"id": "apply", "nodes": ["a", "b"]}],
}


def test_recover_leaves_alone_a_cut_group_whose_member_still_runs(tmp_path: Path) -> None:
    env = make_settings_db(tmp_path / "env.db")
    rt = Runtime(f"sqlite:///{tmp_path / 'w12.db'}", recover_on_start=False)
    rt.environment("settings", SqliteEnvironment(env))
    inside, go, returned = threading.Event(), threading.Event(), threading.Event()

    @rt.tool(effect="write", writes=["setting:{name}"], transaction="settings")
    def put(name: str, value: str, transaction: SqliteTransaction | None = None) -> str:
        """Set a setting in the group's transaction, held until the test lets it return."""
        assert transaction is not None
        transaction.connection.execute("INSERT OR REPLACE INTO settings VALUES (?, ?)", (name, value))
        inside.set()
        try:
            assert go.wait(WAIT_S)
        finally:
            returned.set()
        return value

    tasks: list[asyncio.Task[object]] = []
    loop_holder: list[asyncio.AbstractEventLoop] = []

    async def run() -> object:
        loop_holder.append(asyncio.get_running_loop())
        task = asyncio.ensure_future(rt.arun_plan(_PLAN))
        tasks.append(task)
        try:
            return await task
        except asyncio.CancelledError:
            return "cancelled"

    caller, answered = in_thread(lambda: asyncio.run(run()))
    try:
        assert inside.wait(WAIT_S), "the member never ran"
        loop_holder[0].call_soon_threadsafe(tasks[0].cancel)  # its caller stops waiting
        caller.join(WAIT_S)
        assert not caller.is_alive() and answered == ["cancelled"], answered
        [group] = [e for e in rt.ledger.list(limit=100) if e.node_id.startswith("group:")]
        assert group.state in ("dispatched", "unknown"), group  # the cut left it unsettled
        report = rt.recover()
        assert group.key in report.skipped, report
        again = rt.ledger.get(group.key)
        assert again is not None and again.state == group.state, again  # not decided under the member
    finally:
        go.set()
    assert returned.wait(WAIT_S)
    # once the member returned, the rollback runs on its thread and settles the entry: not committed
    until(lambda: _state(rt, group.key) == "accepted", "the group's entry settled as not committed")
    assert rows(env) == [], rows(env)  # the rollback undid the members' writes
    assert rt.recover().skipped == []
    rt.close()


def _state(rt: Runtime, key: str) -> str | None:
    entry = rt.ledger.get(key)
    return None if entry is None else entry.state
