"""A reservation is settled once, on the memory meter and on a meter kept in SQLite alike: a second
settle (or release, or ``settle_all``) of it is a no-op, so the budget's counts never fall below
what committed nor climb above it; a hold already released is neither drawn on nor refilled; a
reservation another meter issued is refused (``ValueError``), never applied to the wrong counts."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from actionspace.ledger.budget_store import SqliteMeter
from actionspace.policy.budget import Budget, Budgets, Meter, Reservation, Usage, drawing_from

WHO = ("alice", "t1")
BUDGETS = Budgets(Budget(calls=4, items=10, money=4.0, per="principal"), Budget(calls=3, per="run"))
ESTIMATE = Usage(calls=1, items=2, bytes=100, money=1.0)
ACTUAL = Usage(calls=1, items=1, bytes=10, money=0.5)


@pytest.fixture(params=["memory", "sqlite"])
def meter(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Meter]:
    m = Meter(BUDGETS) if request.param == "memory" else SqliteMeter(BUDGETS, tmp_path / "m.db")
    try:
        yield m
    finally:
        m.close()


def _admit(meter: Meter, amount: Usage = ESTIMATE, run: str = "r1") -> Reservation:
    held = meter.admit(run, WHO, amount)
    assert isinstance(held, Reservation), held
    return held


def test_settling_a_reservation_twice_charges_what_it_used_once(meter: Meter) -> None:
    held = _admit(meter)
    meter.settle(held, ACTUAL)
    meter.settle(held, ACTUAL)
    assert meter.used(principal=WHO) == ACTUAL
    assert meter.used(run_id="r1") == ACTUAL


def test_a_release_after_a_settle_gives_nothing_back_a_second_time(meter: Meter) -> None:
    held = _admit(meter)
    meter.settle(held, ACTUAL)
    meter.settle(held, Usage())  # a cleanup path releasing what was already settled
    meter.settle_all([(held, Usage())])
    assert meter.used(principal=WHO) == ACTUAL
    other = _admit(meter, Usage(calls=1))
    meter.settle(other, Usage(calls=1))
    assert meter.used(principal=WHO) == ACTUAL + Usage(calls=1)


def test_the_first_settlement_stands_whatever_a_later_one_says(meter: Meter) -> None:
    held = _admit(meter)
    meter.settle(held, Usage())
    meter.settle(held, ACTUAL)
    assert meter.used(principal=WHO) == Usage()


def test_a_reservation_listed_twice_in_one_settle_all_is_settled_once(meter: Meter) -> None:
    held = _admit(meter)
    meter.settle_all([(held, ACTUAL), (held, ACTUAL)])
    assert meter.used(principal=WHO) == ACTUAL


def test_repeated_settles_never_open_room_beyond_the_limit(meter: Meter) -> None:
    first = _admit(meter, Usage(calls=3))
    for _ in range(5):
        meter.settle(first, Usage(calls=1))
    assert meter.used(run_id="r1") == Usage(calls=1)
    admitted = [meter.admit("r1", WHO, Usage(calls=1)) for _ in range(4)]
    assert [isinstance(a, Reservation) for a in admitted] == [True, True, False, False]


def test_a_released_hold_is_neither_drawn_on_nor_refilled(meter: Meter) -> None:
    hold = _admit(meter, Usage(calls=2, items=2, money=2.0))
    with drawing_from(hold):
        member = _admit(meter, Usage(calls=1, items=1, money=1.0))
    meter.settle(hold, Usage())  # the group ended: what no member drew goes back
    assert meter.used(principal=WHO) == Usage(calls=1, items=1, money=1.0)
    with drawing_from(hold):  # a late admission finds nothing held for it any more
        late = _admit(meter, Usage(calls=1, items=1, money=1.0))
    assert meter.used(principal=WHO) == Usage(calls=2, items=2, money=2.0)
    meter.settle_all([(member, Usage())], hold=hold, if_sent=Usage(), refill=True)
    meter.settle(late, Usage())
    meter.settle(hold, Usage())
    assert meter.used(principal=WHO) == Usage()
    assert meter.used(run_id="r1") == Usage()


def test_a_reservation_of_another_meter_is_refused_and_counts_nothing(meter: Meter, tmp_path: Path) -> None:
    elsewhere = Meter(BUDGETS)
    foreign = elsewhere.admit("r1", WHO, ESTIMATE)
    assert isinstance(foreign, Reservation)
    mine = _admit(meter)
    with pytest.raises(ValueError, match="another meter"):
        meter.settle(foreign, Usage())
    with pytest.raises(ValueError, match="another meter"):
        meter.settle_all([(mine, ACTUAL), (foreign, Usage())])
    assert elsewhere.used(principal=WHO) == ESTIMATE
    assert meter.used(principal=WHO) == ESTIMATE  # nothing of the refused batch was applied
    meter.settle(mine, ACTUAL)
    assert meter.used(principal=WHO) == ACTUAL


def test_a_member_undone_after_it_used_part_of_its_draw_never_pushes_the_budget_past_its_limit(
    meter: Meter,
) -> None:
    hold = _admit(meter, Usage(calls=3, money=3.0))
    with drawing_from(hold):
        member = _admit(meter, Usage(calls=1, money=1.0))
    assert meter.used(run_id="r1") == Usage(calls=3, money=3.0)  # the run's whole allowance
    meter.settle_all([(member, Usage(calls=1, money=1.0))], hold=hold, if_sent=Usage(), refill=True)
    assert meter.used(run_id="r1") == Usage(calls=3, money=3.0)  # what it used is no longer held too
    assert hold.amount == Usage(calls=2, money=2.0)
    meter.settle(hold, Usage())
    assert meter.used(principal=WHO) == Usage(calls=1, money=1.0)


def test_a_reservation_settled_after_its_run_was_forgotten_never_leaves_the_run_below_zero(
    meter: Meter,
) -> None:
    held = _admit(meter, Usage(calls=2))
    meter.forget_run("r1")
    meter.settle(held, Usage())
    assert meter.used(run_id="r1") == Usage()
    assert meter.used(principal=WHO) == Usage()
    admitted = [meter.admit("r1", WHO, Usage(calls=1)) for _ in range(4)]
    assert [isinstance(a, Reservation) for a in admitted] == [True, True, True, False]  # 3 calls per run


def test_a_hold_whose_run_was_forgotten_is_not_drawn_on_by_the_runs_new_calls(meter: Meter) -> None:
    hold = _admit(meter, Usage(calls=2))
    meter.forget_run("r1")
    with drawing_from(hold):
        member = _admit(meter, Usage(calls=1))
    assert member.drawn is None and hold.amount == Usage(calls=2)
    assert meter.used(run_id="r1") == Usage(calls=1)
    meter.settle(member, Usage())
    assert meter.used(run_id="r1") == Usage()
    meter.settle(hold, Usage())
    assert meter.used(principal=WHO) == Usage()
    assert meter.used(run_id="r1") == Usage()


def test_a_settle_the_store_did_not_take_can_be_settled_again_and_counts_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    meter = SqliteMeter(BUDGETS, tmp_path / "m.db")
    try:
        held = _admit(meter)
        real = meter._transact

        def failing(work: object) -> object:
            raise OSError("database is locked")

        monkeypatch.setattr(meter, "_transact", failing)
        with pytest.raises(OSError):
            meter.settle(held, ACTUAL)
        with pytest.raises(OSError):
            meter.settle_all([(held, ACTUAL)])
        monkeypatch.setattr(meter, "_transact", real)
        assert meter.used(principal=WHO) == ESTIMATE  # still reserved: the budget errs on spent
        meter.settle(held, ACTUAL)
        meter.settle(held, ACTUAL)
        assert meter.used(principal=WHO) == ACTUAL
    finally:
        meter.close()
