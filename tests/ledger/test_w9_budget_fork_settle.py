"""A reservation copied into forked processes (``os.fork``) is settled at most once across every
process sharing the store (SQLite, PostgreSQL): the store, not a flag of each process's copy,
decides which settle is the first, so settling the copies one after the other or at the same
moment charges the call once, at what the first settle said (a zero estimate settled above it
included)."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from actionspace.ledger.budget_store import PostgresMeter, SqliteMeter
from actionspace.policy.budget import Budget, Budgets, Meter, Reservation, Usage
from tests.pg import fresh_schema

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")

WHO = ("alice", "t1")
BUDGETS = Budgets(Budget(calls=10, money=10.0, per="principal"), Budget(calls=10, per="run"))
ESTIMATES = {
    "priced": (Usage(calls=1, items=2, bytes=4096, money=1.0), Usage(calls=1, items=1, bytes=10, money=0.5)),
    "zero": (Usage(), Usage(calls=1, items=1, bytes=10, money=0.5)),
}
DEADLINE_S = 60.0


@pytest.fixture(params=["sqlite", "postgres"])
def open_meter(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], Meter]]:
    made: list[Meter] = []
    if request.param == "sqlite":
        path = tmp_path / "shared.db"

        def make() -> Meter:
            made.append(SqliteMeter(BUDGETS, path))
            return made[-1]

        yield make
    else:
        for url in fresh_schema(request.getfixturevalue("pg_url")):

            def make_pg(url: str = url) -> Meter:
                made.append(PostgresMeter(BUDGETS, url))
                return made[-1]

            try:
                yield make_pg
            finally:
                for meter in made:
                    meter.close()
                made.clear()
    for meter in made:
        meter.close()


def _fork(work: Callable[[], None]) -> int:
    """A child running ``work()`` then leaving at once (exit code 0 when it returned)."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            work()
            code = 0
        finally:
            os._exit(code)
    return pid


def _exit_code(pid: int) -> int:
    """Wait (up to the deadline) for child ``pid``; its exit code (killed and failed past it)."""
    end = time.monotonic() + DEADLINE_S
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > end:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail(f"forked process {pid} never ended")
        time.sleep(0.01)  # polling only: the assertion waits on the child's exit, not on time


def _admitted(meter: Meter, estimate: Usage) -> Reservation:
    held = meter.admit("r1", WHO, estimate)
    assert isinstance(held, Reservation), held
    return held


@pytest.mark.parametrize("kind", sorted(ESTIMATES))
def test_a_child_and_its_parent_settling_copies_of_one_reservation_charge_it_once(
    open_meter: Callable[[], Meter], kind: str
) -> None:
    estimate, actual = ESTIMATES[kind]
    meter = open_meter()
    held = _admitted(meter, estimate)
    child = _fork(lambda: meter.settle(held, actual))
    assert _exit_code(child) == 0
    assert meter.used(principal=WHO) == actual
    meter.settle(held, actual)  # the parent's copy, settled in the store already
    assert meter.used(principal=WHO) == actual
    assert meter.used(run_id="r1") == actual
    meter.settle(held, Usage())
    assert meter.used(principal=WHO) == actual


@pytest.mark.parametrize("kind", sorted(ESTIMATES))
def test_a_parents_settle_stands_when_its_child_settles_its_copy_afterwards(
    open_meter: Callable[[], Meter], kind: str
) -> None:
    estimate, actual = ESTIMATES[kind]
    meter = open_meter()
    held = _admitted(meter, estimate)
    r, w = os.pipe()

    def settle_later() -> None:
        os.close(w)
        assert os.read(r, 1) == b"g"
        meter.settle_all([(held, actual)])
        meter.settle(held, actual)

    child = _fork(settle_later)
    os.close(r)
    try:
        meter.settle(held, Usage())  # released: the call never ran
        os.write(w, b"g")
    finally:
        os.close(w)
    assert _exit_code(child) == 0
    assert meter.used(principal=WHO) == Usage()
    assert meter.used(run_id="r1") == Usage()


@pytest.mark.parametrize("kind", sorted(ESTIMATES))
def test_copies_settled_at_the_same_moment_in_many_processes_charge_it_once(
    open_meter: Callable[[], Meter], kind: str
) -> None:
    estimate, actual = ESTIMATES[kind]
    meter = open_meter()
    held = _admitted(meter, estimate)
    other = _admitted(meter, estimate)  # settled once, by one child, alongside
    r, w = os.pipe()
    children = 4

    def settle_on_go(i: int) -> Callable[[], None]:
        def work() -> None:
            os.close(w)
            assert os.read(r, 1) == b"g"
            if i == 0:
                meter.settle_all([(held, actual), (other, actual)])
            else:
                meter.settle(held, actual)

        return work

    pids = [_fork(settle_on_go(i)) for i in range(children)]
    os.close(r)
    try:
        os.write(w, b"g" * children)
    finally:
        os.close(w)
    assert [_exit_code(pid) for pid in pids] == [0] * children
    twice = actual + actual
    assert meter.used(principal=WHO) == twice
    assert meter.used(run_id="r1") == twice
    meter.settle(held, actual)
    meter.settle(other, Usage())
    assert meter.used(principal=WHO) == twice


def test_a_reservation_reclaimed_once_its_owner_died_is_not_charged_again_by_a_forked_copy(
    open_meter: Callable[[], Meter],
) -> None:
    """A child forked while its parent held a reservation outlives the parent: the parent's
    reservation is reclaimed (charged as sent), and the child's copy settled later adds nothing."""
    estimate, actual = ESTIMATES["priced"]
    r, w = os.pipe()
    report_r, report_w = os.pipe()

    def parent() -> None:
        meter = open_meter()
        held = meter.admit("r1", WHO, estimate, if_sent=Usage(calls=1, items=2, money=1.0))
        assert isinstance(held, Reservation)

        def child() -> None:
            os.close(w)
            assert os.read(r, 1) == b"g"
            meter.settle(held, actual)
            os.write(report_w, b"settled\n")

        pid = _fork(child)
        os.write(report_w, f"{pid}\n".encode())

    creator = _fork(parent)
    os.close(r)
    os.close(report_w)
    grandchild = None
    try:
        line = b""
        while not line.endswith(b"\n"):
            chunk = os.read(report_r, 64)
            assert chunk, "the forking process ended without answering"
            line += chunk
        grandchild = int(line.decode().split()[0])
        assert _exit_code(creator) == 0  # the admitting process is gone; its child runs
        watcher = open_meter()
        watcher.reclaim()
        charged = Usage(calls=1, items=2, money=1.0)
        assert watcher.used(principal=WHO) == charged
        os.write(w, b"g")
        tail = os.read(report_r, 64)  # the settle returned before this was written
        assert tail == b"settled\n", tail
        grandchild = None
        assert watcher.used(principal=WHO) == charged  # the reclaim stands, never charged twice
    finally:
        os.close(w)
        os.close(report_r)
        if grandchild is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(grandchild, signal.SIGKILL)
