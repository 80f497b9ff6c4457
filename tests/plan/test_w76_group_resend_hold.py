"""An atomic group sent again after a rollback (its commit unknown, then found not committed by
the environment) is covered by its hold alone: what its undone members had drawn goes back to the
hold, not to the budget, so nothing spends that room between the rollback and the new send, the
new send completes within a budget exactly the group's size, and a process killed (SIGKILL) while
it runs is charged, once reclaimed, what the group is charged once sent. A hold whose charge if
sent cannot be set again ends the group typed, nothing of it sent again, the trace saying why."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace import Cost, Plan, Principal, Runtime, ToolError
from actionspace.ledger.budget_store import SqliteMeter
from actionspace.plan.environments import SqliteEnvironment, SqliteTransaction
from actionspace.plan.group_budget import rearm_hold, reserve_group, undo_members
from actionspace.policy.budget import Budget, Budgets, Meter, Reservation, Usage, drawing_from
from tests.pg import fresh_schema
from tests.plan.settings_table import make_settings_db, rows

BOUND = 1024
"""``max_observation_bytes`` of the tools below."""
SIZE = 3
"""Members of the group, and every budget's size in calls (and money, and bytes bounds)."""
ALICE = Principal(id="alice", scopes=("*",), tenant="t1")
WHO = ("alice", "t1")
COMPLETED = Usage(calls=3, items=3, bytes=0, money=3.0)
"""What the group is charged once sent, should nobody see its members' results."""


class SpendingEnvironment(SqliteEnvironment):
    """Its status query lets another run of the same principal spend all the room it finds, as a
    concurrent process would between the group's rollback and its next send."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.meter: Meter | None = None
        self.spent = 0

    def committed(self, key: str) -> bool | None:
        answer = super().committed(key)
        assert self.meter is not None
        while isinstance(self.meter.admit("other", WHO, Usage(calls=1, items=1, money=1.0)), Reservation):
            self.spent += 1
        return answer


def _runtime(url: str, env: SqliteEnvironment, marks: Path) -> Runtime:
    rt = Runtime(
        url,
        budgets=[
            Budget(calls=SIZE, per="principal"),
            Budget(money=float(SIZE), per="principal"),
            Budget(bytes=SIZE * BOUND, per="principal"),
        ],
        principal=ALICE,
        recover_on_start=False,
    )
    rt.environment("settings", env)

    def seen() -> list[str]:
        return marks.read_text().splitlines() if marks.exists() else []

    @rt.tool(
        effect="write",
        writes=["setting:{name}"],
        transaction="settings",
        cost=Cost(per_call=1.0),
        max_observation_bytes=BOUND,
    )
    def put(name: str, value: str, transaction: SqliteTransaction | None = None) -> str:
        """Set a setting inside the group's transaction; "lost" loses its first answer, "hang"
        hangs when sent again."""
        assert transaction is not None
        before = name in seen()
        with open(marks, "a") as f:
            f.write(name + "\n")
        if value == "lost" and not before:
            raise ToolError("unknown_commit", "the answer was lost")
        if value == "hang" and before:
            time.sleep(600)
        transaction.connection.execute("INSERT OR REPLACE INTO settings VALUES (?, ?)", (name, value))
        return value

    return rt


def _plan(first: str = "v") -> Plan:
    nodes = [
        {"id": "w1", "tool": "put", "arguments": {"name": "a", "value": first}},
        {"id": "w2", "tool": "put", "arguments": {"name": "b", "value": "lost"}},
        {"id": "w3", "tool": "put", "arguments": {"name": "c", "value": "v"}},
    ]
    return Plan.from_dict({"nodes": nodes, "groups": [{"id": "apply", "nodes": ["w1", "w2", "w3"]}]})


@pytest.fixture(params=["memory", "sqlite"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return "memory://" if request.param == "memory" else f"sqlite:///{tmp_path / 'shared.db'}"


def test_a_group_sent_again_after_its_rollback_completes_on_its_hold_alone(url: str, tmp_path: Path) -> None:
    env_db, marks = make_settings_db(tmp_path / "env.db"), tmp_path / "marks.txt"
    env = SpendingEnvironment(env_db)
    rt = _runtime(url, env, marks)
    try:
        env.meter = rt.meter
        result = rt.run_plan(_plan(), run_id="again")
        group = result.nodes["apply"]
        assert group.ok, group.error
        assert marks.read_text().splitlines() == ["a", "b", "a", "b", "c"]  # sent twice
        assert env.spent == 0  # the hold kept the undone members' room between the two sends
        assert rt.meter is not None
        used = rt.meter.used(principal=WHO)
        assert (used.calls, used.items, used.money) == (SIZE, SIZE, float(SIZE))
        assert used.bytes <= SIZE * BOUND
    finally:
        rt.close()
    assert rows(env_db) == [("a", "v"), ("b", "lost"), ("c", "v")]


def test_a_hold_that_cannot_be_set_again_ends_the_group_unsent_and_the_trace_says_why(
    url: str, tmp_path: Path
) -> None:
    env_db, marks = make_settings_db(tmp_path / "env.db"), tmp_path / "marks.txt"
    rt = _runtime(url, SqliteEnvironment(env_db), marks)
    try:
        meter = rt.meter
        assert meter is not None
        real = meter.settle_all

        def failing(settled: Any, *, hold: Any = None, if_sent: Any = None, **more: Any) -> None:
            settled = list(settled)
            if not settled and if_sent is not None and if_sent != Usage():
                raise OSError("budget store went away")
            real(settled, hold=hold, if_sent=if_sent, **more)

        meter.settle_all = failing  # type: ignore[method-assign]
        result = rt.run_plan(_plan(), run_id="unarmed")
        error = result.nodes["apply"].error
        assert error is not None and error.category == "transient", error
        assert error.details["sent"] is False and "budget store went away" in error.message
        assert marks.read_text().splitlines() == ["a", "b"]  # nothing of it was sent again
        why = [
            e.data for e in rt.trace.events("unarmed") if e.kind == "metered" and e.call_id == "unarmed:apply"
        ]
        assert len(why) == 1 and why[0]["recorded"] is False, why
        assert "budget store went away" in why[0]["budget_unsettled"]
        assert meter.used(principal=WHO) == Usage()  # the hold was released with the group
    finally:
        rt.close()
    assert rows(env_db) == []


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_an_undone_members_draw_goes_back_to_the_hold_and_a_rearmed_hold_is_charged_in_full(
    kind: str, tmp_path: Path
) -> None:
    budgets = Budgets(Budget(calls=SIZE, money=float(SIZE), per="principal"))
    meter = Meter(budgets) if kind == "memory" else SqliteMeter(budgets, tmp_path / "m.db")
    try:
        need, sent = Usage(calls=3, items=3, bytes=30, money=3.0), COMPLETED
        hold = _hold(meter, need, sent)
        drew = []
        for _ in range(2):
            with drawing_from(hold):
                member = meter.admit("r1", WHO, Usage(calls=1, items=1, bytes=10, money=1.0))
            assert isinstance(member, Reservation)
            drew.append(member)
        assert hold.amount == Usage(calls=1, items=1, bytes=10, money=1.0)
        admitted = {f"m{i}": _Admitted(meter, r) for i, r in enumerate(drew)}
        assert [why for _m, _c, why in undo_members(meter, admitted, hold)] == [None, None]  # type: ignore[arg-type]
        assert hold.amount == need and hold.if_sent == Usage()
        assert meter.used(principal=WHO) == need  # nothing given back to the budget
        assert not isinstance(meter.admit("other", WHO, Usage(calls=1)), Reservation)  # the hold keeps it
        assert rearm_hold(meter, hold, sent) is None
        assert hold.if_sent == sent
    finally:
        meter.close()


@settings(max_examples=30, deadline=None)
@given(
    needs=st.lists(st.tuples(st.integers(0, 3), st.integers(0, 50)), min_size=1, max_size=4),
    drew=st.integers(0, 4),
    extra=st.integers(0, 2),
    stored=st.booleans(),
)
def test_an_undo_leaves_the_hold_as_reserved_and_the_budget_as_before_whatever_was_drawn(
    needs: list[tuple[int, int]], drew: int, extra: int, stored: bool
) -> None:
    members = [Usage(calls=1, items=n, bytes=b, money=1.0 + 0.25 * n) for n, b in needs]
    need = sum(members, Usage()) + Usage(calls=extra)  # a hold may hold more than its members draw
    budgets = Budgets(Budget(calls=20, items=20, bytes=500, money=50.0, per="principal"))
    with tempfile.TemporaryDirectory() as tmp:
        meter = SqliteMeter(budgets, Path(tmp, "m.db")) if stored else Meter(budgets)
        try:
            hold = _hold(meter, need, need - Usage(bytes=need.bytes))
            admitted = {}
            for i, amount in enumerate(members[: min(drew, len(members))]):
                with drawing_from(hold):
                    member = meter.admit("r1", WHO, amount)
                assert isinstance(member, Reservation)
                admitted[f"m{i}"] = _Admitted(meter, member)
            undo_members(meter, admitted, hold)  # type: ignore[arg-type]
            assert hold.amount == need
            assert meter.used(principal=WHO) == need
            assert all(a.reservation.drawn is None for a in admitted.values())  # given back once
            meter.settle(hold, Usage())
            assert meter.used(principal=WHO) == Usage()
        finally:
            meter.close()


class _Admitted:
    """The two fields of an admission that :func:`undo_members` reads."""

    def __init__(self, meter: Meter, reservation: Reservation) -> None:
        self.meter, self.reservation = meter, reservation


def _hold(meter: Meter, need: Usage, sent: Usage) -> Reservation:
    import asyncio

    held = asyncio.run(reserve_group(meter, "r1", ALICE, need, "g", key="as1_g", if_sent=sent))
    assert isinstance(held, Reservation)
    return held


@pytest.fixture(params=["sqlite", "postgres"])
def shared_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'shared.db'}"
    else:
        yield from fresh_schema(request.getfixturevalue("pg_url"))


def _worker(url: str, env_db: str, marks: str, crash_at: str | None) -> None:
    from actionspace import _crash

    _crash.arm(crash_at)
    rt = _runtime(url, SqliteEnvironment(env_db), Path(marks))
    rt.run_plan(_plan("v" if crash_at else "hang"), run_id="killed")


def _wait_for(path: Path, lines: list[str], deadline_s: float = 60.0) -> None:
    end = time.monotonic() + deadline_s
    while (path.read_text().splitlines() if path.exists() else []) != lines:
        assert time.monotonic() < end, f"{lines!r} never reached {path}"
        time.sleep(0.02)


@pytest.mark.parametrize(
    ("crash_at", "stored"),
    [(None, []), ("after_ledger_commit", [("a", "v"), ("b", "lost"), ("c", "v")])],
    ids=["inside_its_first_member", "after_its_commit"],
)
def test_a_process_killed_while_its_group_is_sent_again_is_charged_the_whole_group(
    shared_url: str, tmp_path: Path, crash_at: str | None, stored: list[tuple[str, str]]
) -> None:
    env_db, marks = make_settings_db(tmp_path / "env.db"), tmp_path / "marks.txt"
    _runtime(shared_url, SqliteEnvironment(env_db), marks).close()
    worker = mp.get_context("spawn").Process(
        target=_worker, args=(shared_url, str(env_db), str(marks), crash_at)
    )
    worker.start()
    try:
        if crash_at is None:  # the second send runs its first member: the others not drawn yet
            _wait_for(marks, ["a", "b", "a"])
    finally:
        if crash_at is None:
            assert worker.pid is not None
            os.kill(worker.pid, signal.SIGKILL)
        worker.join(60)
    assert worker.exitcode == -signal.SIGKILL
    rt = _runtime(shared_url, SqliteEnvironment(env_db), marks)  # opening its meter reclaims
    try:
        assert rt.meter is not None
        used = rt.meter.used(principal=WHO)  # the bytes of results shown before its commit, if any
        assert (used.calls, used.items, used.money) == (COMPLETED.calls, COMPLETED.items, COMPLETED.money)
        assert used.bytes == 0 or crash_at is not None
        assert rt.meter.reclaim() == 0
        assert rt.budget()["calls"] == SIZE - COMPLETED.calls
    finally:
        rt.close()
    assert rows(env_db) == stored
