"""Calls of a message, plan nodes, streams and atomic groups running when their Runtime closes end
typed as single calls do: a read ``cancelled``, a write ``unknown_commit`` with its ledger entry
settled honestly, and a new Runtime's recovery agreeing with what was reported."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from actionspace import Observation, Runtime
from actionspace.ledger.late import still_running
from actionspace.plan import PlanResult
from actionspace.plan.environments import SqliteEnvironment, SqliteTransaction

WAIT_S = 10.0
T = TypeVar("T")


class Gate:
    """Tools that say they started, then wait until released."""

    def __init__(self, expected: int) -> None:
        self.count = 0
        self.lock = threading.Lock()
        self.all_started = threading.Event()
        self.expected = expected
        self.release = threading.Event()

    def started(self) -> None:
        with self.lock:
            self.count += 1
            if self.count >= self.expected:
                self.all_started.set()

    def hold(self, x: int) -> int:
        self.started()
        assert self.release.wait(WAIT_S)
        return x

    async def ahold(self, x: int) -> int:
        self.started()
        await asyncio.to_thread(self.release.wait, WAIT_S)
        return x


def _runtime(url: str, gate: Gate) -> Runtime:
    rt = Runtime(url, recover_on_start=False)

    @rt.tool(effect="read", reads=["r:{x}"])
    def get(x: int) -> int:
        """Read x."""
        return gate.hold(x)

    @rt.tool(effect="write", writes=["w:{x}"])
    def put(x: int) -> int:
        """Write x."""
        return gate.hold(x)

    @rt.tool(effect="read", reads=["ar:{x}"])
    async def aget(x: int) -> int:
        """Read x."""
        return await gate.ahold(x)

    @rt.tool(effect="write", writes=["aw:{x}"])
    async def aput(x: int) -> int:
        """Write x."""
        return await gate.ahold(x)

    return rt


def _db(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'closing.db'}"


def _in_thread(work: Callable[[], T]) -> Callable[[], T]:
    out: list[Any] = []

    def run() -> None:
        try:
            out.append(work())
        except BaseException as exc:
            out.append(exc)

    thread = threading.Thread(target=run)
    thread.start()

    def result() -> T:
        thread.join(WAIT_S)
        assert not thread.is_alive()
        [value] = out
        assert not isinstance(value, BaseException), repr(value)
        return value  # type: ignore[no-any-return]

    return result


def _rows(url: str, query: str) -> list[tuple[Any, ...]]:
    with sqlite3.connect(url.removeprefix("sqlite:///")) as db:
        return list(db.execute(query))


def _ledger(url: str) -> list[tuple[str, str, str | None]]:
    return _rows(url, "select node_id, state, error from ledger_entries order by node_id")


def _close_midway(rt: Runtime, gate: Gate, work: Callable[[], T]) -> T:
    result = _in_thread(work)
    assert gate.all_started.wait(WAIT_S)
    rt.close()
    gate.release.set()
    return result()


def _assert_ended(obs: Observation, category: str) -> None:
    assert obs.error is not None, obs
    assert obs.error.category == category, obs.error
    assert not obs.error.retryable


def _recovered_states(url: str, env_db: Path | None = None) -> list[tuple[str, str]]:
    """What a new Runtime over the same file finds after recovery, once the closed Runtime's tool
    threads have ended: recovery in the same process leaves a send that still runs here alone."""
    keys = [key for (key,) in _rows(url, "select key from ledger_entries")]
    deadline = time.monotonic() + WAIT_S
    while any(still_running(key) for key in keys):
        assert time.monotonic() < deadline, "a closed Runtime's tool thread did not end"
        time.sleep(0.005)
    with Runtime(url, recover_on_start=False) as again:
        if env_db is not None:
            again.environment("settings", SqliteEnvironment(env_db, timeout_s=0.5))
        again.recover()
        return sorted((e.node_id, e.state) for e in again.ledger.list(limit=100))


def _assert_unknown_and_noted(url: str) -> None:
    rows = _ledger(url)
    assert rows
    for _node, state, error in rows:
        assert state == "unknown", rows
        assert error is not None and "closed" in error
    # no status query: recovery cannot establish the outcome either, and says so
    assert all(state == "unknown_commit" for _n, state in _recovered_states(url))


def _assert_not_sent(obs: Observation) -> None:
    _assert_ended(obs, "cancelled")
    assert obs.error is not None and obs.error.details.get("sent") is False


@pytest.mark.parametrize("use_async", [False, True], ids=["call_all", "acall_all"])
@pytest.mark.parametrize("sync_tools", [True, False], ids=["sync_tools", "async_tools"])
@pytest.mark.parametrize("first_writes", [False, True], ids=["read_first", "write_first"])
def test_a_message_of_several_calls_running_when_the_runtime_closes_ends_typed(
    tmp_path: Path, use_async: bool, sync_tools: bool, first_writes: bool
) -> None:
    url = _db(tmp_path)
    read, write = ("get", "put") if sync_tools else ("aget", "aput")
    gate = Gate(expected=1)
    rt = _runtime(url, gate)
    run_id = rt.new_run()
    names = [write, read] if first_writes else [read, write]
    raw = [{"name": name, "arguments": {"x": i}} for i, name in enumerate(names)]

    def work() -> list[Observation]:
        if use_async:
            return asyncio.run(rt.acall_all(raw, run_id=run_id))
        return rt.call_all(raw, run_id=run_id)

    out = _close_midway(rt, gate, work)
    assert [o.tool for o in out] == names
    categories = {read: "cancelled", write: "unknown_commit"}
    _assert_ended(out[0], categories[names[0]])
    if gate.count == 1:  # the second call had not begun: it was never sent
        _assert_not_sent(out[1])
    else:
        _assert_ended(out[1], categories[names[1]])
    if first_writes or gate.count == 2:
        _assert_unknown_and_noted(url)
    else:
        assert _ledger(url) == []


def test_a_message_call_refused_before_it_ran_keeps_its_answer_after_a_close(tmp_path: Path) -> None:
    url = _db(tmp_path)
    gate = Gate(expected=1)
    rt = _runtime(url, gate)
    run_id = rt.new_run()
    raw = [{"name": "nope", "arguments": {}}, {"name": "get", "arguments": {"x": 1}}]
    out = _close_midway(rt, gate, lambda: rt.call_all(raw, run_id=run_id))
    _assert_ended(out[0], "unknown_tool")
    _assert_ended(out[1], "cancelled")


def _plan(*nodes: tuple[str, str, int]) -> dict[str, Any]:
    return {"nodes": [{"id": i, "tool": t, "arguments": {"x": x}} for i, t, x in nodes]}


@pytest.mark.parametrize("use_async", [False, True], ids=["run_plan", "arun_plan"])
@pytest.mark.parametrize("tools", [("get", "put"), ("aget", "aput")], ids=["sync_tools", "async_tools"])
def test_plan_nodes_running_when_the_runtime_closes_end_typed(
    tmp_path: Path, use_async: bool, tools: tuple[str, str]
) -> None:
    url = _db(tmp_path)
    read, write = tools
    gate = Gate(expected=2)
    rt = _runtime(url, gate)
    run_id = rt.new_run()
    plan = _plan(("r", read, 1), ("w", write, 2))

    def work() -> PlanResult:
        if use_async:
            return asyncio.run(rt.arun_plan(plan, run_id=run_id))
        return rt.run_plan(plan, run_id=run_id)

    result = _close_midway(rt, gate, work)
    _assert_ended(result.nodes["r"], "cancelled")
    _assert_ended(result.nodes["w"], "unknown_commit")
    assert result.status != "ok"
    _assert_unknown_and_noted(url)


def test_a_plan_node_not_begun_when_the_runtime_closes_never_runs(tmp_path: Path) -> None:
    url = _db(tmp_path)
    gate = Gate(expected=1)
    rt = _runtime(url, gate)
    run_id = rt.new_run()
    plan = {
        "nodes": [
            {"id": "r", "tool": "get", "arguments": {"x": 1}},
            {"id": "w", "tool": "put", "arguments": {"x": 2}, "depends_on": ["r"]},
        ]
    }
    result = _close_midway(rt, gate, lambda: rt.run_plan(plan, run_id=run_id))
    _assert_ended(result.nodes["r"], "cancelled")
    _assert_not_sent(result.nodes["w"])
    assert gate.count == 1  # the write was never sent
    assert [state for _n, state, _e in _ledger(url)] in ([], ["accepted"])


def _streaming_runtime(url: str, gate: Gate) -> Runtime:
    rt = Runtime(url, recover_on_start=False)

    @rt.tool(effect="read")
    async def tail(x: int) -> AsyncIterator[str]:
        """Stream lines."""
        yield "first line\n"
        await gate.ahold(x)
        yield "second line\n"

    @rt.tool(effect="write", writes=["log:{x}"])
    async def append(x: int) -> AsyncIterator[str]:
        """Stream what was appended."""
        yield "appending\n"
        await gate.ahold(x)
        yield "appended\n"

    @rt.tool(effect="write", writes=["slog:{x}"])
    def sappend(x: int) -> Iterator[str]:
        """Stream what was appended (sync)."""
        yield "appending\n"
        gate.hold(x)
        yield "appended\n"

    return rt


@pytest.mark.parametrize(
    ("name", "category"),
    [("tail", "cancelled"), ("append", "unknown_commit"), ("sappend", "unknown_commit")],
)
def test_a_stream_running_when_the_runtime_closes_ends_typed(
    tmp_path: Path, name: str, category: str
) -> None:
    url = _db(tmp_path)
    gate = Gate(expected=1)
    rt = _streaming_runtime(url, gate)
    run_id = rt.new_run()

    async def consume() -> list[Observation]:
        return [o async for o in rt.astream({"name": name, "arguments": {"x": 1}}, run_id=run_id)]

    seen = _close_midway(rt, gate, lambda: asyncio.run(consume()))
    final = [o for o in seen if not o.provisional]
    assert len(final) == 1, seen
    _assert_ended(final[0], category)
    if category == "unknown_commit":
        _assert_unknown_and_noted(url)


@pytest.mark.parametrize(("name", "category"), [("tail", "cancelled"), ("append", "unknown_commit")])
def test_a_streaming_tool_called_plainly_when_the_runtime_closes_ends_typed(
    tmp_path: Path, name: str, category: str
) -> None:
    url = _db(tmp_path)
    gate = Gate(expected=1)
    rt = _streaming_runtime(url, gate)
    run_id = rt.new_run()
    raw = {"name": name, "arguments": {"x": 1}}
    obs = _close_midway(rt, gate, lambda: asyncio.run(rt.acall(raw, run_id=run_id)))
    _assert_ended(obs, category)


def _settings(path: Path) -> Path:
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE settings (name TEXT PRIMARY KEY, value TEXT NOT NULL)")
    return path


def _settings_rows(path: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(path) as conn:
        return sorted(conn.execute("SELECT name, value FROM settings").fetchall())


def _group_runtime(url: str, env_db: Path, gate: Gate) -> Runtime:
    rt = Runtime(url, recover_on_start=False)
    rt.environment("settings", SqliteEnvironment(env_db, timeout_s=0.5))

    @rt.tool(effect="write", writes=["setting:{name}"], transaction="settings")
    async def setting(name: str, value: str, transaction: SqliteTransaction | None = None) -> str:
        """Set a setting inside the group's transaction; "slow" waits for the gate."""
        assert transaction is not None
        transaction.connection.execute("INSERT OR REPLACE INTO settings VALUES (?, ?)", (name, value))
        if value == "slow":
            await gate.ahold(0)
        return value

    return rt


def _group_plan() -> dict[str, Any]:
    values = {"a": "1", "b": "slow", "c": "3"}
    nodes = [
        {"id": f"set_{k}", "tool": "setting", "arguments": {"name": k, "value": v}} for k, v in values.items()
    ]
    return {"nodes": nodes, "groups": [{"id": "apply", "nodes": [n["id"] for n in nodes]}]}


@pytest.mark.parametrize("use_async", [False, True], ids=["run_plan", "arun_plan"])
def test_an_atomic_group_running_when_the_runtime_closes_is_never_half_written(
    tmp_path: Path, use_async: bool
) -> None:
    url = _db(tmp_path)
    env_db = _settings(tmp_path / "env.db")
    gate = Gate(expected=1)
    rt = _group_runtime(url, env_db, gate)
    run_id = rt.new_run()

    def work() -> PlanResult:
        if use_async:
            return asyncio.run(rt.arun_plan(_group_plan(), run_id=run_id))
        return rt.run_plan(_group_plan(), run_id=run_id)

    result = _close_midway(rt, gate, work)
    group = result.nodes["apply"]
    written = _settings_rows(env_db)
    assert written in ([], [("a", "1"), ("b", "slow"), ("c", "3")])  # never a partial write
    rows = _ledger(url)
    assert [s for _n, s, _e in rows] != ["dispatched"], rows
    again = dict(_recovered_states(url, env_db))
    if group.ok:  # said committed: the ledger and the environment hold it
        assert written and [s for _n, s, _e in rows] == ["committed"]
        assert again == {"group:apply": "committed"}
    else:
        assert group.error is not None
        assert group.error.category in ("unknown_commit", "cancelled"), group.error
        if group.error.category == "cancelled":  # said not committed: nothing was written
            assert written == []
            assert again.get("group:apply") != "committed"
        else:  # unknown: the status query settles it as the environment holds it
            assert again == {"group:apply": "committed" if written else "accepted"}, (again, written)
