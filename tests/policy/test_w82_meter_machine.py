"""The Meter API driven in any order on the memory meter and on a meter kept in SQLite side by side:
admissions (alone or drawing on a group's hold), settles with actual costs, releases, settle_all
(with a hold, refilled or not), reclaims, group holds — repeats and settles of reservations another
meter admitted included. Both meters agree on every admission and every count; no count is ever
negative nor above its limit (every settle charges at most what was reserved); the room reserved
comes back exactly once: once everything is released, what is counted is what the settles charged.
A settle above the estimate (a zero estimate's, often after its run was forgotten) is compared too."""

from __future__ import annotations

import asyncio
import math
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, invariant, rule

from actionspace import Principal
from actionspace.ledger.budget_store import SqliteMeter
from actionspace.plan.group_budget import release_group, reserve_group, undo_members
from actionspace.policy.budget import Budget, Budgets, Meter, Reservation, Usage, drawing_from

WHO = ("alice", "t1")
ALICE = Principal(id="alice", scopes=("*",), tenant="t1")
RUNS = ("r1", "r2")
BUDGETS = Budgets(
    Budget(calls=4, items=5, bytes=120, money=2.0, per="principal"), Budget(calls=3, items=4, per="run")
)
LIMITS = {"principal": BUDGETS.budgets[0].limits(), "run": BUDGETS.budgets[1].limits()}

amounts = st.builds(
    Usage,
    calls=st.integers(0, 2),
    items=st.integers(0, 3),
    bytes=st.integers(0, 60),
    money=st.sampled_from([0.0, 0.25, 0.5, 1.0]),
)


def _part(amount: Usage, half: int) -> Usage:
    """``half`` halves of ``amount`` (0, 1 or 2): never more than was reserved."""
    return Usage(
        calls=amount.calls * half // 2,
        items=amount.items * half // 2,
        bytes=amount.bytes * half // 2,
        money=amount.money * half / 2,
    )


@dataclass
class Pair:
    """One admission on both meters, and what the first settle of it charged (None: open)."""

    memory: Reservation
    stored: Reservation
    run: str
    hold: bool
    charged: Usage | None = None
    drew_on: Pair | None = None
    epoch: int = 0
    """How many times its run had been forgotten when it was admitted."""


class _Admitted:
    """The two fields of an admission :func:`undo_members` reads."""

    def __init__(self, meter: Meter, reservation: Reservation) -> None:
        self.meter, self.reservation = meter, reservation


class MeterMachine(RuleBasedStateMachine):
    reservations = Bundle("reservations")
    holds = Bundle("holds")

    def __init__(self) -> None:
        super().__init__()
        self.tmp = tempfile.mkdtemp(prefix="w82_meter_")
        self.memory = Meter(BUDGETS)
        self.stored = SqliteMeter(BUDGETS, Path(self.tmp, "m.db"))
        self.stranger = Meter(BUDGETS)
        self.pairs: list[Pair] = []
        self.epochs = dict.fromkeys(RUNS, 0)
        self.overdrawn = False
        """A settle charged more than its reservation: the counts may be past a limit."""

    def teardown(self) -> None:
        self.memory.close()
        self.stored.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def _admit(self, run: str, amount: Usage, hold: Pair | None, key: str | None) -> Pair | None:
        outcomes = []
        holds = (None, None) if hold is None else (hold.memory, hold.stored)
        for meter, drawn_on in zip((self.memory, self.stored), holds, strict=True):
            with drawing_from(drawn_on):
                outcomes.append(meter.admit(run, WHO, amount, key=key))
        first, second = outcomes
        assert isinstance(first, Reservation) == isinstance(second, Reservation), outcomes
        if not isinstance(first, Reservation) or not isinstance(second, Reservation):
            return None
        if hold is not None:
            assert hold.memory.amount == hold.stored.amount
        drew = first.drawn is not None and hold is not None
        pair = Pair(first, second, run, hold=False, drew_on=hold if drew else None, epoch=self.epochs[run])
        self.pairs.append(pair)
        return pair

    @rule(target=reservations, run=st.sampled_from(RUNS), amount=amounts)
    def admit(self, run: str, amount: Usage) -> Pair | None:
        return self._admit(run, amount, None, None)

    @rule(target=reservations, run=st.sampled_from(RUNS), amount=amounts, hold=holds)
    def admit_drawing(self, run: str, amount: Usage, hold: Pair | None) -> Pair | None:
        return self._admit(run, amount, hold, None)

    @rule(target=holds, run=st.sampled_from(RUNS), amount=amounts)
    def reserve_group(self, run: str, amount: Usage) -> Pair | None:
        sent = amount - Usage(bytes=amount.bytes)
        got = [
            asyncio.run(reserve_group(meter, run, ALICE, amount, "g", key=f"as1_{run}_g", if_sent=sent))
            for meter in (self.memory, self.stored)
        ]
        assert isinstance(got[0], Reservation) == isinstance(got[1], Reservation), got
        if not isinstance(got[0], Reservation) or not isinstance(got[1], Reservation):
            return None
        pair = Pair(got[0], got[1], run, hold=True, epoch=self.epochs[run])
        self.pairs.append(pair)
        return pair

    def _charged(self, pair: Pair | None, actual: Usage) -> None:
        if pair is not None and pair.charged is None:
            pair.charged = actual

    @rule(target=reservations, run=st.sampled_from(RUNS))
    def admit_nothing(self, run: str) -> Pair | None:
        """A zero estimate: no room is reserved, yet its settle may charge what the call used."""
        return self._admit(run, Usage(), None, None)

    @rule(pair=reservations, extra=amounts, forget_first=st.booleans())
    def settle_above_the_estimate(self, pair: Pair | None, extra: Usage, forget_first: bool) -> None:
        """A call that used more than it reserved (a zero estimate, most often), its run forgotten
        meanwhile or not: the counts may then pass a limit, and both meters still agree."""
        if pair is None:
            return
        if forget_first:
            self.forget_run(pair.run)
        actual = pair.memory.amount + extra
        if pair.charged is None:
            self.overdrawn = True
        self.memory.settle(pair.memory, actual)
        self.stored.settle(pair.stored, actual)
        self._charged(pair, actual)

    @rule(pair=st.one_of(reservations, holds), half=st.integers(0, 2))
    def settle(self, pair: Pair | None, half: int) -> None:
        if pair is None:
            return
        actual = _part(pair.memory.amount, half)
        assert pair.memory.amount == pair.stored.amount
        self.memory.settle(pair.memory, actual)
        self.stored.settle(pair.stored, actual)
        self._charged(pair, actual)

    @rule(hold=holds)
    def release_group(self, hold: Pair | None) -> None:
        if hold is None:
            return
        assert release_group(self.memory, hold.memory) is None
        assert release_group(self.stored, hold.stored) is None
        self._charged(hold, Usage())

    @rule(
        chosen=st.lists(st.tuples(reservations, st.integers(0, 2)), max_size=4),
        hold=st.one_of(st.none(), holds),
        refill=st.booleans(),
        armed=st.booleans(),
    )
    def settle_all(
        self, chosen: list[tuple[Pair | None, int]], hold: Pair | None, refill: bool, armed: bool
    ) -> None:
        picked = [(p, _part(p.memory.amount, h)) for p, h in chosen if p is not None]
        for meter, side in ((self.memory, "memory"), (self.stored, "stored")):
            held = None if hold is None else getattr(hold, side)
            if_sent = None if held is None or not armed else held.amount - Usage(bytes=held.amount.bytes)
            meter.settle_all(
                [(getattr(p, side), a) for p, a in picked], hold=held, if_sent=if_sent, refill=refill
            )
        for pair, actual in picked:
            self._charged(pair, actual)
        if hold is not None:
            assert hold.memory.amount == hold.stored.amount

    @rule(pair=reservations, half=st.integers(0, 2), armed=st.booleans())
    def undo_a_member_on_its_hold(self, pair: Pair | None, half: int, armed: bool) -> None:
        if pair is None or pair.drew_on is None:
            return
        actual = _part(pair.memory.amount, half)
        for meter, side in ((self.memory, "memory"), (self.stored, "stored")):
            held: Reservation = getattr(pair.drew_on, side)
            if_sent = held.amount - Usage(bytes=held.amount.bytes) if armed else None
            meter.settle_all([(getattr(pair, side), actual)], hold=held, if_sent=if_sent, refill=True)
        self._charged(pair, actual)
        assert pair.drew_on.memory.amount == pair.drew_on.stored.amount

    @rule(chosen=st.lists(reservations, max_size=3), hold=holds)
    def undo_members(self, chosen: list[Pair | None], hold: Pair | None) -> None:
        members = [p for p in chosen if p is not None]
        for meter, side in ((self.memory, "memory"), (self.stored, "stored")):
            admitted = {f"m{i}": _Admitted(meter, getattr(p, side)) for i, p in enumerate(members)}
            held = None if hold is None else getattr(hold, side)
            assert all(why is None for _m, _c, why in undo_members(meter, admitted, held))  # type: ignore[arg-type]
        for pair in members:
            self._charged(pair, Usage())

    @rule(amount=amounts, settle_all=st.booleans())
    def settle_a_strangers_reservation(self, amount: Usage, settle_all: bool) -> None:
        foreign = self.stranger.admit("r1", WHO, amount)
        if not isinstance(foreign, Reservation):
            return
        for meter in (self.memory, self.stored):
            with pytest.raises(ValueError, match="another meter"):
                if settle_all:
                    meter.settle_all([(foreign, Usage())])
                else:
                    meter.settle(foreign, Usage())
        self.stranger.settle(foreign, Usage())

    @rule(run=st.sampled_from(RUNS))
    def forget_run(self, run: str) -> None:
        self.memory.forget_run(run)
        self.stored.forget_run(run)
        self.epochs[run] += 1

    @rule()
    def reclaim(self) -> None:
        assert self.memory.reclaim() == self.stored.reclaim() == 0

    @rule()
    def release_everything(self) -> None:
        """What is counted once every open reservation is released is what the settles charged."""
        for pair in sorted(self.pairs, key=lambda p: p.hold):  # members before their holds
            self.memory.settle(pair.memory, Usage())
            self.stored.settle(pair.stored, Usage())
            self._charged(pair, Usage())
        total = sum((p.charged or Usage() for p in self.pairs), Usage())
        for meter in (self.memory, self.stored):
            _same(meter.used(principal=WHO), total)
            for run in RUNS:
                now = [p for p in self.pairs if p.run == run and p.epoch == self.epochs[run]]
                _same(meter.used(run_id=run), sum((p.charged or Usage() for p in now), Usage()))

    @invariant()
    def both_meters_agree_and_stay_within_their_limits(self) -> None:
        scopes = [("principal", {"principal": WHO})] + [("run", {"run_id": run}) for run in RUNS]
        for per, where in scopes:
            memory, stored = self.memory.used(**where), self.stored.used(**where)
            _same(memory, stored)
            for unit in ("calls", "items", "bytes", "money"):
                assert getattr(memory, unit) >= -1e-9, (per, where, memory)
            for unit, limit in LIMITS[per].items():
                assert self.overdrawn or getattr(memory, unit) <= limit + 1e-9, (per, where, memory)


def _same(a: Usage, b: Usage) -> None:
    assert (a.calls, a.items, a.bytes) == (b.calls, b.items, b.bytes), (a, b)
    assert math.isclose(a.money, b.money, abs_tol=1e-6), (a, b)


MeterMachine.TestCase.settings = settings(
    max_examples=80,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
test_the_meter_api_in_any_order = MeterMachine.TestCase
