"""Sixteen threads admitting and settling against one limit, on the memory meter and on a meter kept
in SQLite: what is counted never exceeds the limit and, once every reservation is settled, equals
the sum of what the settles charged — reservations settled again from other threads at the same
time, and admissions drawing on one group's hold at the same time, included."""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from actionspace.errors import ActionError
from actionspace.ledger.budget_store import SqliteMeter
from actionspace.policy.budget import Budget, Budgets, Meter, Reservation, Usage, drawing_from

THREADS = 16
WHO = ("alice", "t1")
LIMIT = Budget(calls=40, items=60, money=20.0, per="principal")
ESTIMATE = Usage(calls=1, items=2, bytes=64, money=1.0)


@pytest.fixture(params=["memory", "sqlite"])
def meter(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Meter]:
    budgets = Budgets(LIMIT)
    m = Meter(budgets) if request.param == "memory" else SqliteMeter(budgets, tmp_path / "m.db")
    try:
        yield m
    finally:
        m.close()


def _in_threads(work: Callable[[int], None]) -> None:
    """Run ``work(i)`` in THREADS threads started together; re-raise the first failure."""
    start, errors = threading.Barrier(THREADS), list[BaseException]()

    def run(i: int) -> None:
        try:
            start.wait(30)
            work(i)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads), "a thread never finished"
    if errors:
        raise errors[0]


def _within(meter: Meter) -> None:
    used = meter.used(principal=WHO)
    assert used.calls <= 40 and used.items <= 60 and used.money <= 20.0 + 1e-9, used


def test_sixteen_threads_never_count_more_than_the_limit_and_end_at_what_they_charged(meter: Meter) -> None:
    lock, charged, held = threading.Lock(), [], list[Reservation]()

    def work(i: int) -> None:
        rng = random.Random(i)
        for _ in range(6):
            got = meter.admit(f"run{i}", WHO, ESTIMATE)
            if not isinstance(got, Reservation):
                assert got.category == "budget_exceeded"
                continue
            _within(meter)
            actual = Usage(
                calls=1, items=rng.randint(0, 2), bytes=rng.randint(0, 64), money=rng.choice([0.5, 1.0])
            )
            meter.settle(got, actual)
            with lock:
                charged.append(actual)
                held.append(got)
            _within(meter)

    _in_threads(work)
    total = sum(charged, Usage())
    assert meter.used(principal=WHO) == total
    assert isinstance(meter.admit("late", WHO, ESTIMATE), ActionError)  # 96 asked: the limit was reached

    def settle_again(i: int) -> None:  # every thread settles every reservation again, at once
        for reservation in held:
            meter.settle(reservation, Usage() if i % 2 else ESTIMATE)

    _in_threads(settle_again)
    assert meter.used(principal=WHO) == total


def test_sixteen_threads_drawing_on_one_hold_never_draw_more_than_it_holds(meter: Meter) -> None:
    member = Usage(calls=1, items=1, money=0.5)
    hold = meter.admit("group", WHO, Usage(calls=8, items=8, money=4.0))
    assert isinstance(hold, Reservation)
    lock, members = threading.Lock(), list[Reservation]()

    def work(i: int) -> None:
        for _ in range(3):
            with drawing_from(hold):
                got = meter.admit("group", WHO, member)
            if isinstance(got, Reservation):
                with lock:
                    members.append(got)
            _within(meter)

    _in_threads(work)
    assert len(members) == 40  # 8 on the hold, 32 more the limit still allowed, 8 refused
    assert sum(1 for m in members if m.drawn is not None) == 8
    assert hold.amount == Usage()
    assert meter.used(principal=WHO) == Usage(calls=40, items=40, money=20.0)

    def settle(i: int) -> None:
        for reservation in members[i::THREADS]:
            meter.settle(reservation, Usage(calls=1, items=1, money=0.25))
        if i == 0:
            meter.settle(hold, Usage())

    _in_threads(settle)
    assert meter.used(principal=WHO) == Usage(calls=40, items=40, money=10.0)
