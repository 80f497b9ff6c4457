"""A Runtime used after ``close()``, or closed while calls run."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from actionspace import Observation, Runtime
from actionspace.errors import ConfigurationError

READ = {"name": "get", "arguments": {"x": 1}}
WRITE = {"name": "put", "arguments": {"x": 2}}
WAIT_S = 10.0


class Gate:
    """A tool that says it started, then waits until released."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()

    def hold(self, x: int) -> int:
        self.started.set()
        assert self.release.wait(WAIT_S)
        return x


def _runtime(url: str, gate: Gate) -> Runtime:
    rt = Runtime(url, recover_on_start=False)

    @rt.tool(effect="read")
    def get(x: int) -> int:
        """Read x."""
        return gate.hold(x)

    @rt.tool(effect="write")
    def put(x: int) -> int:
        """Write x."""
        return gate.hold(x)

    return rt


@pytest.fixture(params=["memory", "sqlite"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return "memory://" if request.param == "memory" else f"sqlite:///{tmp_path / 'closing.db'}"


def _rows(url: str) -> dict[str, int]:
    if not url.startswith("sqlite"):
        return {}
    with sqlite3.connect(url.removeprefix("sqlite:///")) as db:
        tables = [n for (n,) in db.execute("select name from sqlite_master where type='table'")]
        return {t: db.execute(f"select count(*) from {t}").fetchone()[0] for t in tables}


def _entry_points(rt: Runtime, run_id: str) -> Iterator[tuple[str, Callable[[], Any]]]:
    session = rt.session(run_id)
    plan = {"nodes": [{"id": "a", "tool": "get", "args": {"x": 1}}]}
    yield "call", lambda: rt.call(READ, run_id=run_id)
    yield "call on a run not open", lambda: rt.call(READ, run_id="never_opened")
    yield "write", lambda: rt.call(WRITE, run_id=run_id)
    yield "call_all", lambda: rt.call_all([READ], run_id=run_id)
    yield "acall", lambda: asyncio.run(rt.acall(READ, run_id=run_id))
    yield "acall_all", lambda: asyncio.run(rt.acall_all([READ], run_id=run_id))
    yield "offer", lambda: rt.offer(run_id=run_id)
    yield "new_run", lambda: rt.new_run()
    yield "record", lambda: rt.record(run_id, "verified", {"ok": True})
    yield "user_input", lambda: rt.user_input(run_id, "hello")
    yield "finish", lambda: rt.finish(run_id)
    yield "run_plan", lambda: rt.run_plan(plan, run_id=run_id)
    yield "arun_plan", lambda: asyncio.run(rt.arun_plan(plan, run_id=run_id))
    yield "session", lambda: rt.session()
    yield "asession", lambda: asyncio.run(rt.asession())
    yield "session.user", lambda: session.user("hello")
    yield "session.tools", lambda: session.tools()
    yield "session.handle", lambda: session.handle({"role": "assistant", "content": "done"})
    yield "session.ahandle", lambda: asyncio.run(session.ahandle({"role": "assistant", "content": "done"}))


def test_every_entry_point_after_close_raises_that_the_runtime_is_closed(url: str) -> None:
    gate = Gate()
    gate.release.set()
    rt = _runtime(url, gate)
    run_id = rt.new_run()
    entry_points = list(_entry_points(rt, run_id))
    rt.close()
    before = _rows(url)
    for name, use in entry_points:
        with pytest.raises(ConfigurationError, match="closed"):
            use()
            pytest.fail(f"{name} did not raise")
    assert _rows(url) == before  # nothing was written, nothing half-written


def test_close_is_idempotent(url: str) -> None:
    rt = _runtime(url, Gate())
    rt.new_run()
    rt.close()
    rt.close()
    with rt:
        pass
    assert rt.engine.runs.closed


def _ledger_states(url: str) -> list[tuple[str, str | None]]:
    with sqlite3.connect(url.removeprefix("sqlite:///")) as db:
        return list(db.execute("select state, error from ledger_entries"))


def _in_thread(rt: Runtime, raw: dict[str, Any], run_id: str, use_async: bool) -> Callable[[], Observation]:
    out: list[Observation | BaseException] = []

    def run() -> None:
        try:
            if use_async:
                out.append(asyncio.run(rt.acall(raw, run_id=run_id)))
            else:
                out.append(rt.call(raw, run_id=run_id))
        except BaseException as exc:
            out.append(exc)

    thread = threading.Thread(target=run)
    thread.start()

    def result() -> Observation:
        thread.join(WAIT_S)
        assert not thread.is_alive()
        [obs] = out
        assert isinstance(obs, Observation), obs
        return obs

    return result


@pytest.mark.parametrize("use_async", [False, True], ids=["call", "acall"])
def test_a_read_in_flight_when_the_runtime_closes_ends_cancelled(url: str, use_async: bool) -> None:
    gate = Gate()
    rt = _runtime(url, gate)
    run_id = rt.new_run()
    result = _in_thread(rt, READ, run_id, use_async)
    assert gate.started.wait(WAIT_S)
    rt.close()
    gate.release.set()
    obs = result()
    assert obs.error is not None
    assert obs.error.category == "cancelled"
    assert obs.call_id.startswith(run_id)


@pytest.mark.parametrize("use_async", [False, True], ids=["call", "acall"])
def test_a_write_in_flight_when_the_runtime_closes_is_unknown_commit_and_noted(
    url: str, use_async: bool
) -> None:
    gate = Gate()
    rt = _runtime(url, gate)
    run_id = rt.new_run()
    result = _in_thread(rt, WRITE, run_id, use_async)
    assert gate.started.wait(WAIT_S)
    rt.close()
    gate.release.set()
    obs = result()
    if url.startswith("sqlite"):  # its store closed under it: nothing confirms the outcome
        assert obs.error is not None
        assert obs.error.category == "unknown_commit"
        assert not obs.error.retryable
        [(state, error)] = _ledger_states(url)
        assert state == "unknown"
        assert error is not None and "closed" in error
    else:  # the memory ledger still answers: the observation says what it held when the call ended
        [entry] = rt.ledger.list()
        assert entry.state in ("unknown", "committed")
        if obs.error is None:
            assert entry.state == "committed" and obs.data == 2
        else:  # cut at close; the tool's answer, released after, may settle the entry since
            assert obs.error.category == "unknown_commit"
            if entry.state == "committed":
                moves = [e.data for e in rt.trace.events(run_id) if e.kind == "ledger"]
                assert any(m.get("by") == "late_answer" and m.get("to") == "committed" for m in moves)


def test_asyncio_tasks_racing_close_end_as_typed_observations(url: str) -> None:
    rt = Runtime(url, recover_on_start=False)
    started = asyncio.Event()

    @rt.tool(effect="read")
    async def aget(x: int) -> int:
        """Read x."""
        started.set()
        await asyncio.sleep(0.05)
        return x

    async def main() -> list[Observation]:
        run_id = rt.new_run()
        tasks = [
            asyncio.create_task(rt.acall({"name": "aget", "arguments": {"x": i}}, run_id=run_id))
            for i in range(8)
        ]
        await started.wait()
        rt.close()
        return await asyncio.gather(*tasks)

    for obs in asyncio.run(main()):
        assert obs.error is not None and obs.error.category == "cancelled"
