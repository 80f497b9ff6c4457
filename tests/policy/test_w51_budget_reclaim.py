"""Reservations of a process killed (SIGKILL) between admitting a call and settling it are
reclaimed from the shared store (SQLite, PostgreSQL) once their owner is provably gone: a call the
ledger shows dispatched (or a read, which the ledger does not see) stays charged, without the
observation-bytes bound of a result nobody was shown; a call that never reached dispatch is freed.
A live owner, however slow its call, keeps its reservation: on its host its process is alive, and
from another host its lease is renewed by a timer."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actionspace.errors import ActionError
from actionspace.ledger._budget_reclaim import values
from actionspace.policy.budget import Budget, Budgets, Usage
from tests.pg import fresh_schema

BOUND = 4096
"""``max_observation_bytes`` of the tools below."""


@pytest.fixture(params=["sqlite", "postgres"])
def shared_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'shared.db'}"
    else:
        yield from fresh_schema(request.getfixturevalue("pg_url"))


def _runtime(url: str, sent: Path) -> Any:
    from actionspace import Cost, Principal, Runtime

    alice = Principal(id="alice", scopes=("*",), tenant="t1")
    rt = Runtime(
        url,
        budgets=[
            Budget(calls=2, per="principal"),
            Budget(money=2.0, per="principal"),
            Budget(bytes=3 * BOUND, per="principal"),
        ],
        principal=alice,
        recover_on_start=False,
    )

    def wrote(q: str) -> str:
        with open(sent, "a") as f:
            f.write(q + "\n")
        if q == "hang":
            time.sleep(600)
        return q

    @rt.tool(effect="write", writes=["note:{q}"], cost=Cost(per_call=1.0), max_observation_bytes=BOUND)
    def note(q: str) -> str:
        """Write a note; "hang" never returns."""
        return wrote(q)

    @rt.tool(effect="read", cost=Cost(per_call=1.0), max_observation_bytes=BOUND)
    def look(q: str) -> str:
        """Look something up; "hang" never returns."""
        return wrote(q)

    return rt


def _calling_worker(url: str, sent: str, tool: str, crash_at: str | None) -> None:
    from actionspace import _crash

    _crash.arm(crash_at)
    rt = _runtime(url, Path(sent))
    rt.call({"name": tool, "arguments": {"q": "hang"}}, run_id="killed")


def _wait_for(path: Path, text: str, deadline_s: float = 60.0) -> None:
    end = time.monotonic() + deadline_s
    while text not in (path.read_text() if path.exists() else ""):
        assert time.monotonic() < end, f"{text!r} never reached {path}"
        time.sleep(0.02)


def _kill_after(worker: Any, sent: Path | None) -> None:
    try:
        if sent is not None:
            _wait_for(sent, "hang")
    finally:
        if sent is not None:
            assert worker.pid is not None
            os.kill(worker.pid, signal.SIGKILL)
        worker.join(60)
    assert worker.exitcode == -signal.SIGKILL


def _killed_call(url: str, tmp_path: Path, tool: str, crash_at: str | None = None) -> Path:
    sent = tmp_path / "sent.txt"
    _runtime(url, sent).close()
    worker = mp.get_context("spawn").Process(target=_calling_worker, args=(url, str(sent), tool, crash_at))
    worker.start()
    _kill_after(worker, None if crash_at else sent)
    return sent


def test_a_call_killed_before_the_ledger_took_its_intent_gives_its_reservation_back(
    shared_url: str, tmp_path: Path
) -> None:
    sent = _killed_call(shared_url, tmp_path, "note", "before_intent")
    rt = _runtime(shared_url, sent)
    try:
        assert rt.meter.used(principal=("alice", "t1")) == Usage()
        assert rt.budget() == {"calls": 2, "money": 2.0, "bytes": 3 * BOUND}
        run = rt.new_run()
        assert rt.call({"name": "note", "arguments": {"q": "a"}}, run_id=run).ok
        assert rt.call({"name": "note", "arguments": {"q": "b"}}, run_id=run).ok
        third = rt.call({"name": "note", "arguments": {"q": "c"}}, run_id=run)
        assert third.error is not None and third.error.category == "budget_exceeded"
        assert sent.read_text().splitlines() == ["a", "b"]
    finally:
        rt.close()


@pytest.mark.parametrize(("tool", "crash_at"), [("note", None), ("note", "after_intent"), ("look", None)])
def test_a_call_killed_once_it_may_have_been_sent_stays_charged_without_its_observation_bound(
    shared_url: str, tmp_path: Path, tool: str, crash_at: str | None
) -> None:
    """The ledger shows it dispatched (or, for a read, cannot tell): it may have run."""
    sent = _killed_call(shared_url, tmp_path, tool, crash_at)
    rt = _runtime(shared_url, sent)
    try:
        used = rt.meter.used(principal=("alice", "t1"))
        assert (used.calls, used.items, used.bytes, used.money) == (1, 1, 0, 1.0)
        assert rt.budget() == {"calls": 1, "money": 1.0, "bytes": 3 * BOUND}
        run = rt.new_run()
        assert rt.call({"name": tool, "arguments": {"q": "a"}}, run_id=run).ok
        second = rt.call({"name": tool, "arguments": {"q": "b"}}, run_id=run)
        assert second.error is not None and second.error.category == "budget_exceeded"
        assert sent.read_text().splitlines() == ([] if crash_at else ["hang"]) + ["a"]
    finally:
        rt.close()


def _meter(url: str, lease_s: float) -> Any:
    from actionspace.ledger.budget_store import PostgresMeter, SqliteMeter

    budgets = Budgets(Budget(calls=10, per="principal"), Budget(bytes=10 * BOUND, per="principal"))
    if url.startswith("sqlite:///"):
        return SqliteMeter(budgets, url.removeprefix("sqlite:///"), lease_s=lease_s)
    return PostgresMeter(budgets, url, lease_s=lease_s)


WHO = ("alice", "t1")
ESTIMATE = Usage(calls=1, items=1, bytes=BOUND, money=0.5)
IF_SENT = Usage(calls=1, items=1, money=0.5)
ACTUAL = Usage(calls=1, items=1, bytes=10, money=0.5)


def _holding_worker(url: str, flags: str, lease_s: float, kind: str) -> None:
    """Reserve on a meter of "another host", say so, then hold until ``release`` appears (and
    settle) or until killed."""
    from actionspace.ledger import budget_owners

    budget_owners.this_host = lambda: "another-host"  # only the lease tells this owner is alive
    meter = _meter(url, lease_s)
    held = meter.admit("r1", WHO, ESTIMATE, key=None, if_sent=IF_SENT)
    assert not isinstance(held, ActionError)
    Path(flags, "reserved").touch()
    while not Path(flags, "release").exists():
        time.sleep(0.05)
    meter.settle(held, ACTUAL)
    meter.close()


def _holding(url: str, tmp_path: Path, lease_s: float) -> Any:
    worker = mp.get_context("spawn").Process(
        target=_holding_worker, args=(url, str(tmp_path), lease_s, "hold")
    )
    worker.start()
    end = time.monotonic() + 60
    while not (tmp_path / "reserved").exists():
        assert worker.is_alive() and time.monotonic() < end
        time.sleep(0.02)
    return worker


def _lease_end(meter: Any) -> float:
    """When the lease of the owner on "another host" runs out, on the database's clock (seconds
    since the epoch)."""
    with meter._read() as conn:
        row = conn.execute("SELECT expires FROM budget_owners WHERE host = 'another-host'").fetchone()
    assert row is not None, "the owner on another host is no longer registered"
    return float(values(row)[0])


def _judging_at(meter: Any, now: float) -> None:
    """Make ``meter`` read ``now`` as the database's clock: its reclaims judge leases at that
    moment, whatever the wall clock says."""
    meter._now_sql = repr(now)


def test_a_slow_owner_on_another_host_keeps_its_reservation_through_many_lease_periods(
    shared_url: str, tmp_path: Path
) -> None:
    """Its timer renews its lease: for each of several moments a lease past the first lease's end,
    the lease is renewed beyond that moment, and a reclaim judging at that moment leaves the
    reservation alone. The moments are the watcher's own clock, not the wall clock, so a worker
    starved on a loaded machine only renews later (a lease that is never renewed fails the test
    at the deadline); the watcher's own lease is long, so its timer reclaims nothing meanwhile."""
    lease_s = 0.3
    watcher = _meter(shared_url, 3600.0)
    worker = _holding(shared_url, tmp_path, lease_s)
    try:
        first_end = _lease_end(watcher)
        for period in range(1, 6):
            moment = first_end + period * lease_s
            end = time.monotonic() + 60
            while _lease_end(watcher) <= moment:
                assert worker.is_alive() and time.monotonic() < end, f"the lease never passed {moment}"
                time.sleep(0.02)
            _judging_at(watcher, moment)
            assert watcher.reclaim() == 0
            assert watcher.used(principal=WHO) == ESTIMATE
        (tmp_path / "release").touch()
        worker.join(60)
        assert worker.exitcode == 0
        assert watcher.used(principal=WHO) == ACTUAL
        assert watcher.used(run_id="r1") == ACTUAL
    finally:
        if worker.is_alive():
            worker.kill()
        watcher.close()


def test_a_killed_owner_on_another_host_is_reclaimed_once_its_lease_runs_out(
    shared_url: str, tmp_path: Path
) -> None:
    lease_s = 0.5
    worker = _holding(shared_url, tmp_path, lease_s)
    assert worker.pid is not None
    os.kill(worker.pid, signal.SIGKILL)
    worker.join(60)
    watcher = _meter(shared_url, lease_s)
    try:
        end = time.monotonic() + 30
        while watcher.used(principal=WHO) != IF_SENT:
            assert time.monotonic() < end, watcher.used(principal=WHO)
            watcher.reclaim()
            time.sleep(0.05)
        assert watcher.used(run_id="r1") == IF_SENT
        assert watcher.reclaim() == 0  # reclaimed once, never twice
        assert watcher.used(principal=WHO) == IF_SENT
    finally:
        watcher.close()


def test_an_owner_that_stalled_past_its_lease_settles_exactly_what_it_used(
    shared_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from actionspace import Runtime
    from actionspace.ledger import budget_owners

    Runtime(shared_url, recover_on_start=False).close()  # the store has a ledger to ask
    monkeypatch.setattr(budget_owners, "this_host", lambda: "another-host")
    stalled = _meter(shared_url, 0.3)
    monkeypatch.undo()
    stalled._renewal.stop()  # as if its process were frozen: nothing renews its lease
    watcher = _meter(shared_url, 0.3)
    try:
        held = stalled.admit("r1", WHO, ESTIMATE, key="as1_never_in_the_ledger", if_sent=IF_SENT)
        assert not isinstance(held, ActionError)
        end = time.monotonic() + 30
        while watcher.used(principal=WHO) != Usage():  # the ledger never saw it: freed
            assert time.monotonic() < end, watcher.used(principal=WHO)
            watcher.reclaim()  # or the watcher's own timer does
            time.sleep(0.05)
        assert watcher.used(run_id="r1") == Usage()
        stalled.settle(held, ACTUAL)  # it ran after all
        assert watcher.used(principal=WHO) == ACTUAL
        assert watcher.used(run_id="r1") == ACTUAL
    finally:
        stalled.close()
        watcher.close()
