"""A group's members undone by its rollback and its hold, left by an owner that died before
releasing the hold, are reclaimed at nothing whatever the group's ledger entry says (the group
never became visible); a hold set up again for the next send is charged, should its owner die, at
most what its members would be charged and never more than the store counted for it."""

from __future__ import annotations

import asyncio
import sqlite3
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace.ledger import budget_owners
from actionspace.ledger.budget_store import SqliteMeter
from actionspace.plan.group_budget import rearm_hold, reserve_group
from actionspace.policy.budget import ZERO, Budget, Budgets, Meter, Reservation, Usage, drawing_from
from actionspace.policy.principal import Principal

BOUND = 1000
KEY = "as1_group"
ALICE = Principal(id="alice", scopes=("*",), tenant="t1")
WHO = ("alice", "t1")
BUDGETS = Budgets(Budget(calls=1000, items=1000, money=1e6, per="principal"))


def _sent(items: int) -> Usage:
    return Usage(calls=1, items=items, money=1.0 + 0.5 * items)


def _need(items: int) -> Usage:
    return _sent(items) + Usage(bytes=BOUND * max(1, items), money=0.001 * BOUND * max(1, items))


def _total(usages: list[Usage]) -> Usage:
    out = Usage()
    for u in usages:
        out += u
    return out


def _vec(u: Usage) -> tuple[float, float, float, float]:
    return (u.calls, u.items, u.bytes, u.money)


def _dying_meter(path: Path, monkeypatch: pytest.MonkeyPatch) -> SqliteMeter:
    """A meter whose owner row names a process that no longer runs (reclaimed by the next one)."""
    monkeypatch.setattr(budget_owners, "started_of", lambda pid: "gone")
    meter = SqliteMeter(BUDGETS, path)
    monkeypatch.undo()
    meter._renewal.stop()
    return meter


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    items=st.lists(st.integers(0, 3), min_size=1, max_size=4),
    drew=st.integers(0, 4),
    state=st.sampled_from([None, "accepted", "dispatched", "unknown", "failed", "committed"]),
    rearmed=st.booleans(),
)
def test_an_undone_groups_hold_and_members_are_reclaimed_at_nothing_or_at_most_the_rearmed_charge(
    items: list[int], drew: int, state: str | None, rearmed: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    drew = min(drew, len(items))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, "shared.db")
        with sqlite3.connect(path) as conn:
            conn.execute("CREATE TABLE ledger_entries (key TEXT PRIMARY KEY, state TEXT NOT NULL)")
            if state is not None:
                conn.execute("INSERT INTO ledger_entries VALUES (?, ?)", (KEY, state))
        dying = _dying_meter(path, monkeypatch)
        if_sent = _total([_sent(n) for n in items])
        hold = asyncio.run(
            reserve_group(
                dying, "r1", ALICE, _total([_need(n) for n in items]), "g", key=KEY, if_sent=if_sent
            )
        )
        assert isinstance(hold, Reservation)
        members = []
        for n in items[:drew]:
            with drawing_from(hold):
                admitted = dying.admit("r1", WHO, _need(n), key=None, if_sent=_sent(n))
            assert isinstance(admitted, Reservation)
            members.append(admitted)
        dying.settle_all([(m, ZERO) for m in members], hold=hold, if_sent=ZERO)  # the rollback
        assert hold.if_sent == Usage()
        if rearmed:  # sent again: the hold is charged again should its owner die
            assert rearm_hold(dying, hold, if_sent) is None
        counted = dying.used(principal=WHO)
        assert _vec(counted) == pytest.approx(_vec(hold.amount))  # only what the hold still holds
        watcher = SqliteMeter(BUDGETS, path)  # opening reclaims the dead owner's rows
        try:
            charged = watcher.used(principal=WHO)
            assert charged == watcher.used(run_id="r1")
            if not rearmed or state in (None, "accepted"):
                assert charged == Usage()
            else:
                assert hold.if_sent is not None
                assert _vec(charged) == pytest.approx(_vec(hold.if_sent))
                for c, most, before in zip(_vec(charged), _vec(if_sent), _vec(counted), strict=True):
                    assert c <= most + 1e-6 and c <= before + 1e-6
                if drew == 0:
                    assert _vec(charged) == pytest.approx(_vec(if_sent))  # the hold counted them all
            assert watcher.reclaim() == 0
        finally:
            watcher.close()
            dying.close()


def test_a_meter_in_memory_sets_a_holds_charge_if_sent_capped_by_what_it_holds() -> None:
    meter = Meter(BUDGETS)
    hold = meter.admit("r1", WHO, Usage(calls=2, items=2, bytes=10, money=2.0))
    assert isinstance(hold, Reservation)
    with drawing_from(hold):
        member = meter.admit("r1", WHO, Usage(calls=1, items=1, bytes=5, money=1.0))
    assert isinstance(member, Reservation)
    meter.settle_all([(member, ZERO)], hold=hold, if_sent=Usage(calls=5, items=5, money=9.0))
    assert hold.if_sent == Usage(calls=1, items=1, money=1.0)
    assert meter.used(principal=WHO) == Usage(calls=1, items=1, bytes=5, money=1.0)
