"""A group's hold and the admissions drawn on it, left by an owner that died, are reclaimed as the
group's ledger entry says, whatever the members' estimates: never sent, all freed; sent, every
member that drew is charged its call in full, the rest of the hold at most what the members that did
not draw would be charged (exactly that when the hold counted them exactly), and never more than
the store counted before the reclaim."""

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
from actionspace.plan.group_budget import reserve_group
from actionspace.policy.budget import Budget, Budgets, Reservation, Usage, drawing_from
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


members_st = st.lists(st.tuples(st.integers(0, 3), st.booleans()), min_size=1, max_size=4)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    members=members_st,
    drew=st.integers(0, 4),
    state=st.sampled_from([None, "accepted", "dispatched", "unknown", "committed"]),
)
def test_a_dead_groups_hold_is_charged_as_its_ledger_says_and_never_above_what_was_counted(
    members: list[tuple[int, bool]], drew: int, state: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    drew = min(drew, len(members))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, "shared.db")
        with sqlite3.connect(path) as conn:
            conn.execute("CREATE TABLE ledger_entries (key TEXT PRIMARY KEY, state TEXT NOT NULL)")
            if state is not None:
                conn.execute("INSERT INTO ledger_entries VALUES (?, ?)", (KEY, state))
        dying = _dying_meter(path, monkeypatch)
        # a member whose items come from another member is counted without them in the hold
        held_items = [n if known else 0 for n, known in members]
        need = _total([_need(n) for n in held_items])
        if_sent = _total([_sent(n) for n in held_items])
        hold = asyncio.run(reserve_group(dying, "r1", ALICE, need, "g", key=KEY, if_sent=if_sent))
        assert isinstance(hold, Reservation) and hold.ledger_key == KEY
        for i, (n, _known) in enumerate(members[:drew]):
            with drawing_from(hold):
                admitted = dying.admit("r1", WHO, _need(n), key=f"as1_member{i}", if_sent=_sent(n))
            assert not isinstance(admitted, Exception)
        counted = dying.used(principal=WHO)
        watcher = SqliteMeter(BUDGETS, path)  # opening reclaims the dead owner's rows
        try:
            charged = watcher.used(principal=WHO)
            assert charged == watcher.used(run_id="r1")
            if state in (None, "accepted"):
                assert charged == Usage()
                return
            low = _total([_sent(n) for n, _k in members[:drew]])
            high = _total([_sent(n) for n, _k in members])
            for c, lo, hi, before in zip(_vec(charged), _vec(low), _vec(high), _vec(counted), strict=True):
                assert lo - 1e-6 <= c <= hi + 1e-6
                assert c <= before + 1e-6
            if all(known for _n, known in members):
                assert charged.calls == len(members) and charged.bytes == 0
                assert _vec(charged) == pytest.approx(_vec(high))
            assert watcher.reclaim() == 0
        finally:
            watcher.close()
            dying.close()
