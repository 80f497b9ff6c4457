"""A process killed (SIGKILL) between reserving a call's estimate and settling it: its reservation
stays counted in the shared store (the call may have run), so no later call, in any process,
spends past the limit; the budget shown afterwards is what the store holds."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.pg import fresh_schema


@pytest.fixture(params=["sqlite", "postgres"])
def shared_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'shared.db'}"
    else:
        yield from fresh_schema(request.getfixturevalue("pg_url"))


def _runtime(url: str, sent: Path) -> Any:
    from actionspace import Budget, Cost, Principal, Runtime

    alice = Principal(id="alice", scopes=("*",), tenant="t1")
    rt = Runtime(
        url,
        budgets=[Budget(calls=2, per="principal"), Budget(money=2.0, per="principal")],
        principal=alice,
        recover_on_start=False,
    )

    @rt.tool(effect="write", writes=["note:{q}"], cost=Cost(per_call=1.0))
    def note(q: str) -> str:
        """Write a note; "hang" never returns."""
        with open(sent, "a") as f:
            f.write(q + "\n")
        if q == "hang":
            time.sleep(600)
        return q

    return rt


def _hanging_worker(url: str, sent: str) -> None:
    rt = _runtime(url, Path(sent))
    rt.call({"name": "note", "arguments": {"q": "hang"}}, run_id="killed")


def _wait_for(path: Path, text: str, deadline_s: float = 60.0) -> None:
    end = time.monotonic() + deadline_s
    while text not in (path.read_text() if path.exists() else ""):
        assert time.monotonic() < end, f"{text!r} never reached {path}"
        time.sleep(0.02)


def test_a_reservation_of_a_killed_process_never_lets_a_later_call_past_the_limit(
    shared_url: str, tmp_path: Path
) -> None:
    sent = tmp_path / "sent.txt"
    _runtime(shared_url, sent).close()
    ctx = mp.get_context("spawn")
    worker = ctx.Process(target=_hanging_worker, args=(shared_url, str(sent)))
    worker.start()
    try:
        _wait_for(sent, "hang")
    finally:
        assert worker.pid is not None
        os.kill(worker.pid, signal.SIGKILL)
        worker.join(30)
    assert worker.exitcode == -signal.SIGKILL
    rt = _runtime(shared_url, sent)
    try:
        assert rt.meter.used(principal=("alice", "t1")).calls == 1  # the killed call may have run
        assert rt.budget() == {"calls": 1, "money": 1.0}
        run = rt.new_run()
        first = rt.call({"name": "note", "arguments": {"q": "a"}}, run_id=run)
        second = rt.call({"name": "note", "arguments": {"q": "b"}}, run_id=run)
        assert first.ok
        assert second.error is not None and second.error.category == "budget_exceeded"
        assert second.error.recovery
        assert sent.read_text().splitlines() == ["hang", "a"]
        used = rt.meter.used(principal=("alice", "t1"))
        assert used.calls == 2 and used.money == pytest.approx(2.0)
        assert rt.budget() == {"calls": 0, "money": 0.0}
    finally:
        rt.close()
