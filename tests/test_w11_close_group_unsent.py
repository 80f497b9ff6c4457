"""An atomic group is one write (its members committed together through one ledger entry): like a
single write, a group whose intent is durable (``dispatched``) but whose send had not begun when
the runtime closes is never sent after it, so ``close()`` must not note it ``unknown`` ("sent,
answer not known"), neither for an instant nor for good. It stays ``dispatched`` until its call
ends it ``failed`` (``cancelled``, not sent); none of its members runs.

The instant is held by real faults, as for a single write (tests/test_w10_close_unsent_intent.py):
another connection holds the file's write lock while the group's intent waits on its worker
thread, and the plan's event loop is kept busy by a callback of the test from before the intent is
written until ``close()`` has noted what it notes. A group whose send began is still noted
``unknown`` by the close (the last test)."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
from pathlib import Path
from typing import Any

from actionspace import Runtime
from actionspace.plan import PlanResult
from actionspace.plan.environments import SqliteEnvironment, SqliteTransaction
from tests.close_tools import WAIT_S, in_frames, in_thread, until
from tests.plan.settings_table import make_settings_db, rows

_PLAN = {
    "nodes": [
        {"id": "g", "tool": "gate", "arguments": {}},
        {"id": "a", "tool": "put", "arguments": {"name": "a", "value": "1"}, "depends_on": ["g"]},
        {"id": "b", "tool": "put", "arguments": {"name": "b", "value": "2"}, "depends_on": ["g"]},
    ],
    "groups": [{"id": "apply", "nodes": ["a", "b"]}],
}
"""A plan whose group begins once the test opens the gate (the plan's own first writes done)."""


def _groups(path: Path) -> list[tuple[str, str | None]]:
    """The (state, error) of the file's group entries, as another process reads them now."""
    db = sqlite3.connect(path, timeout=WAIT_S)
    try:
        query = "select state, error from ledger_entries where node_id like 'group:%'"
        return [(row[0], row[1]) for row in db.execute(query)]
    finally:
        db.close()


def _states(path: Path) -> list[str]:
    return [state for state, _ in _groups(path)]


class _World:
    """A runtime on ``path`` with a gate (a read the test opens) and a write run only inside a
    group's transaction (each of its calls counted; ``held``: the first one waits for ``go``)."""

    def __init__(self, path: Path, env: Path, *, held: bool = False) -> None:
        self.rt = rt = Runtime(f"sqlite:///{path}", recover_on_start=False)
        rt.environment("settings", SqliteEnvironment(env))
        self.gate_reached, self.gate_open = threading.Event(), threading.Event()
        self.member_running, self.go = threading.Event(), threading.Event()
        self.calls: list[str] = []

        @rt.tool(effect="read", reads=["gate"])
        async def gate() -> bool:
            """Wait until the test opens the gate."""
            self.gate_reached.set()
            return await asyncio.to_thread(self.gate_open.wait, WAIT_S)

        @rt.tool(effect="write", writes=["setting:{name}"], transaction="settings")
        async def put(name: str, value: str, transaction: SqliteTransaction | None = None) -> str:
            """Set a setting inside the group's transaction (on the plan's loop, as its rollback)."""
            self.calls.append(name)
            self.member_running.set()
            if held:
                await asyncio.to_thread(self.go.wait, WAIT_S)
            assert transaction is not None
            transaction.connection.execute("INSERT OR REPLACE INTO settings VALUES (?, ?)", (name, value))
            return value

    def run(self, run_id: str) -> tuple[threading.Thread, list[Any], list[asyncio.AbstractEventLoop]]:
        loops: list[asyncio.AbstractEventLoop] = []

        async def main() -> PlanResult:
            loops.append(asyncio.get_running_loop())
            return await self.rt.arun_plan(_PLAN, run_id=run_id)

        thread, answered = in_thread(lambda: asyncio.run(main()))
        return thread, answered, loops


def test_a_group_not_yet_sent_when_the_runtime_closes_is_never_noted_unknown(tmp_path: Path) -> None:
    path, env = tmp_path / "w11.db", make_settings_db(tmp_path / "env.db")
    world = _World(path, env)
    rt = world.rt
    run_id = rt.new_run()
    caller, answered, loops = world.run(run_id)
    busy, free = threading.Event(), threading.Event()

    def hold_the_loop() -> None:
        busy.set()
        free.wait(WAIT_S)

    assert world.gate_reached.wait(WAIT_S)  # the plan's own first writes are done
    holder = sqlite3.connect(path, isolation_level=None, timeout=WAIT_S)
    holder.execute("BEGIN IMMEDIATE")  # the group's intent waits for this transaction
    world.gate_open.set()
    seen: list[list[str]] = []
    try:
        until(lambda: in_frames("_begin"), "the group's intent waits for the write lock")
        loops[0].call_soon_threadsafe(hold_the_loop)
        assert busy.wait(WAIT_S)
        holder.rollback()  # the intent is written now; its step's answer waits for the busy loop
        until(lambda: _states(path) == ["dispatched"], "the group's intent is durable")
        closer, closed = in_thread(rt.close)
        until(lambda: not closer.is_alive() or in_frames("_wait_for_plans"), "close() noted the writes")
        seen.append(_states(path))  # what another process reads of the ledger now
    finally:
        free.set()
        holder.close()
    closer.join(WAIT_S)
    caller.join(WAIT_S)
    assert not closer.is_alive() and closed == [None], closed
    assert not caller.is_alive() and len(answered) == 1, answered
    assert seen == [["dispatched"]], seen  # never "unknown": it was not sent
    assert world.calls == [] and rows(env) == []  # and it never is
    [(state, error)] = _groups(path)
    assert state in ("failed", "dispatched"), state  # "dispatched": its loop took the cut too late
    if state == "failed":
        assert error is not None
        stored = json.loads(error)
        assert stored["category"] == "cancelled" and stored["details"]["sent"] is False, stored
    [out] = answered
    assert isinstance(out, PlanResult), out
    for node in ("apply", "a", "b"):
        obs = out.nodes[node]
        assert obs.error is not None and obs.error.category == "cancelled", (node, obs)
        assert obs.error.details.get("sent") is False or obs.error.details.get("phase") == "not_dispatched"
    assert out.nodes["apply"].error is not None and out.nodes["apply"].error.details.get("sent") is False


def test_a_group_whose_members_run_when_the_runtime_closes_is_noted_unknown(tmp_path: Path) -> None:
    """The send began (its first member runs inside the transaction): its outcome is not known to
    the closing thread, so the entry is ``unknown`` before the stores close."""
    path, env = tmp_path / "w11.db", make_settings_db(tmp_path / "env.db")
    world = _World(path, env, held=True)
    rt = world.rt
    caller, answered, loops = world.run(rt.new_run())
    busy, free = threading.Event(), threading.Event()

    def hold_the_loop() -> None:  # the plan takes the cut only once the test read the ledger
        busy.set()
        free.wait(WAIT_S)

    world.gate_open.set()
    try:
        assert world.member_running.wait(WAIT_S)
        loops[0].call_soon_threadsafe(hold_the_loop)
        assert busy.wait(WAIT_S)
        closer, closed = in_thread(rt.close)
        until(lambda: not closer.is_alive() or in_frames("_wait_for_plans"), "close() noted the writes")
        seen = _states(path)
    finally:
        free.set()
        world.go.set()
    closer.join(WAIT_S)
    caller.join(WAIT_S)
    assert not closer.is_alive() and closed == [None], closed
    assert not caller.is_alive() and len(answered) == 1, answered
    assert seen == ["unknown"], seen
    [out] = answered
    assert isinstance(out, PlanResult), out
    apply = out.nodes["apply"]
    assert apply.error is not None and apply.error.category in ("unknown_commit", "cancelled"), apply
