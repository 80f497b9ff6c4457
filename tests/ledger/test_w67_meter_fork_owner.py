"""A process forked (``os.fork``) after a budget meter kept in a store was created reserves under
an owner identity of its own (its pid and start time), never its parent's: its parent reclaims the
reservations the child left when it died, and nobody reclaims those of a child that still runs
because the process that created the meter is gone (which would charge its call twice)."""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from actionspace.ledger.budget_store import SqliteMeter
from actionspace.policy.budget import Budget, Budgets, Reservation, Usage

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")

BOUND = 4096
WHO = ("alice", "t1")
BUDGETS = Budgets(Budget(calls=10, per="principal"), Budget(bytes=10 * BOUND, per="principal"))
ESTIMATE = Usage(calls=1, items=1, bytes=BOUND, money=0.5)
IF_SENT = Usage(calls=1, items=1, money=0.5)
ACTUAL = Usage(calls=1, items=1, bytes=10, money=0.5)


def _read_line(fd: int, deadline_s: float = 60.0) -> str:
    out = b""
    end = time.monotonic() + deadline_s
    while not out.endswith(b"\n"):
        assert time.monotonic() < end, "the forked process never answered"
        chunk = os.read(fd, 256)
        if not chunk:
            raise AssertionError(f"the forked process ended without answering (got {out!r})")
        out += chunk
    return out.decode().strip()


def _reservation(db: Path, token: str) -> tuple[str, float | None] | None:
    """(owner, reclaimed) of reservation ``token`` as stored, read without a meter."""
    with sqlite3.connect(db) as conn:
        row = conn.execute(
            "SELECT owner, reclaimed FROM budget_reservations WHERE token = ?", (token,)
        ).fetchone()
    return None if row is None else (str(row[0]), row[1])


def _owner_pid(db: Path, owner: str) -> int | None:
    with sqlite3.connect(db) as conn:
        row = conn.execute("SELECT pid FROM budget_owners WHERE owner = ?", (owner,)).fetchone()
    return None if row is None else int(row[0])


def _in_child(work: object) -> None:
    """Run ``work()`` in this forked process, then leave at once (no cleanup of the parent's)."""
    code = 1
    try:
        work()  # type: ignore[operator]
        code = 0
    finally:
        os._exit(code)


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "shared.db"


def test_a_forked_child_reserves_under_its_own_owner_and_its_parent_reclaims_it_once_it_died(
    db: Path,
) -> None:
    meter = SqliteMeter(BUDGETS, db)
    try:
        assert meter.admit("warm", WHO, Usage(), key=None) is not None  # the parent's writer is open
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:

            def reserve() -> None:
                os.close(r)
                held = meter.admit("r1", WHO, ESTIMATE, key=None, if_sent=IF_SENT)
                assert isinstance(held, Reservation) and held.token is not None
                os.write(w, f"{held.token}\n".encode())

            _in_child(reserve)
        os.close(w)
        try:
            token = _read_line(r)
        finally:
            os.close(r)
            _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        stored = _reservation(db, token)
        assert stored is not None
        owner, _ = stored
        assert owner != meter._owner
        assert _owner_pid(db, owner) == pid
        assert meter.used(principal=WHO) == ESTIMATE
        assert meter.reclaim() == 1  # the child is gone: its reservation is charged as sent
        assert meter.used(principal=WHO) == IF_SENT
        assert _reservation(db, token) is None
        assert meter.reclaim() == 0
    finally:
        meter.close()


def _creator(db: Path, report: int, go: int) -> None:
    """Create a meter, fork a child that reserves, reports, waits for ``go``, settles and reports;
    then end at once, leaving the child running."""
    meter = SqliteMeter(BUDGETS, db)
    child = os.fork()
    if child == 0:

        def hold() -> None:
            held = meter.admit("r1", WHO, ESTIMATE, key=None, if_sent=IF_SENT)
            assert isinstance(held, Reservation) and held.token is not None
            assert meter._renewal.is_alive()  # the child renews its own lease
            os.write(report, f"{os.getpid()} {held.token}\n".encode())
            assert os.read(go, 1) == b"s"
            meter.settle(held, ACTUAL)
            os.write(report, b"settled\n")

        _in_child(hold)


def test_a_live_forked_childs_reservation_is_never_reclaimed_when_the_meters_creator_is_gone(
    db: Path,
) -> None:
    report_r, report_w = os.pipe()
    go_r, go_w = os.pipe()
    creator = os.fork()
    if creator == 0:
        _in_child(lambda: _creator(db, report_w, go_r))
    os.close(report_w)
    os.close(go_r)
    child = None
    watcher = None
    try:
        child_pid, token = _read_line(report_r).split()
        child = int(child_pid)
        _, status = os.waitpid(creator, 0)  # the creator ended; its child still runs
        assert os.waitstatus_to_exitcode(status) == 0
        watcher = SqliteMeter(BUDGETS, db)  # opening it reclaims for the dead
        assert watcher.reclaim() == 0
        stored = _reservation(db, token)
        assert stored is not None and stored[1] is None, stored
        assert watcher.used(principal=WHO) == ESTIMATE
        os.write(go_w, b"s")
        assert _read_line(report_r) == "settled"
        assert watcher.used(principal=WHO) == ACTUAL  # settled exactly once, never charged twice
        assert _reservation(db, token) is None
    finally:
        os.close(go_w)
        os.close(report_r)
        if child is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGKILL)
        if watcher is not None:
            watcher.close()
