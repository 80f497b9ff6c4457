"""A plan's look for messages decides the same way when its workflow is replayed, whatever has
arrived since: the operations it recorded are never met by different ones."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, cast

import psycopg
from hypothesis import given
from hypothesis import strategies as st

from actionspace.durable import inbox as inbox_module
from actionspace.durable.inbox import RECV, SLEEP, Inbox

WAVE = "actionspace.plan.wave"


class _Table:
    """The two DBOS tables the inbox reads, as one workflow's rows: its recorded operations, and
    whether a message waits (the answer of each look in turn)."""

    def __init__(self, recorded: dict[int, str], answers: list[bool]) -> None:
        self.recorded = recorded
        self.answers = iter(answers)
        self.statements = 0

    def execute(self, query: Any, params: Any) -> _Table:
        self.statements += 1
        self._waiting = next(self.answers, False)
        return self

    def fetchall(self) -> list[tuple[int, str | None]]:
        rows: list[tuple[int, str | None]] = list(self.recorded.items())
        return [*rows, (-1, None)] if self._waiting else rows

    def fetchone(self) -> tuple[bool]:
        return (self._waiting,)


class _Pool:
    def __init__(self, table: _Table) -> None:
        self.table = table

    @contextmanager
    def connection(self) -> Iterator[_Table]:
        yield self.table


def _run(table: _Table, looks: int) -> tuple[list[bool], dict[int, str]]:
    """The plan loop's looks and operations, as :class:`~actionspace.durable.workflows._Waves`
    starts them while no child runs: a look that finds a message reads it (a read and its sleep)
    and looks again; one that finds none is followed by a wave. Returns each look's decision and
    what it recorded."""
    inbox = Inbox(cast(Any, _Pool(table)), "dbos", "as-plan:r", "topic")
    done = 0  # the id of the last operation started (DBOS starts a workflow at 0)
    decisions: list[bool] = []
    recorded: dict[int, str] = {}
    for _ in range(looks):
        read = inbox.waiting(done + 1)
        decisions.append(read)
        if read:
            recorded[done + 1], recorded[done + 2] = RECV, SLEEP
            done += 2
        else:
            recorded[done + 1] = WAVE
            done += 1
    return decisions, recorded


@given(
    first=st.lists(st.booleans(), min_size=1, max_size=12),
    later=st.lists(st.booleans(), max_size=12),
    cut=st.integers(min_value=0, max_value=30),
    without_last_read=st.booleans(),
)
def test_a_replayed_plan_starts_the_operations_its_first_run_recorded(
    first: list[bool], later: list[bool], cut: int, without_last_read: bool
) -> None:
    decisions, recorded = _run(_Table({}, first), len(first))
    assert decisions == first  # a first run reads exactly when a message waits
    kept = {i: name for i, name in recorded.items() if i <= cut or (name == SLEEP and i - 1 <= cut)}
    last = max(kept, default=0)
    if without_last_read and kept.get(last) == SLEEP:  # cut between a read's sleep and the read
        del kept[last - 1]
    _, again = _run(_Table(kept, later), len(first))
    # up to the last operation its first run recorded, the replay starts the same ones
    assert [again.get(i) for i in range(1, last + 1)] == [recorded[i] for i in range(1, last + 1)]


def test_a_plan_with_nothing_recorded_reads_once_and_then_asks_one_statement_a_look() -> None:
    table = _Table({}, [True, False, False])
    decisions, recorded = _run(table, 3)
    assert decisions == [True, False, False]
    assert recorded == {1: RECV, 2: SLEEP, 3: WAVE, 4: WAVE}
    assert table.statements == 3


class _Failing(_Table):
    """A table whose first ``failures`` statements fail as a dropped connection does."""

    def __init__(self, recorded: dict[int, str], answers: list[bool], failures: int) -> None:
        super().__init__(recorded, answers)
        self.failures = failures

    def execute(self, query: Any, params: Any) -> _Table:
        if self.failures > 0:
            self.failures -= 1
            self.statements += 1
            raise psycopg.OperationalError("server closed the connection unexpectedly")
        return super().execute(query, params)


def test_a_look_the_database_fails_reads_and_a_first_look_is_asked_again(monkeypatch: Any) -> None:
    monkeypatch.setattr(inbox_module, "RETRY_FIRST_S", 0.0)
    replayed = _Failing({1: WAVE, 2: RECV, 3: SLEEP}, [False], failures=2)
    inbox = Inbox(cast(Any, _Pool(replayed)), "dbos", "as-plan:r", "topic")
    # the first look fails twice, then reads the record: the replay follows it, not a guess
    assert [inbox.waiting(1), inbox.waiting(2)] == [False, True]
    assert replayed.statements == 3
    live = _Failing({}, [False, False], failures=0)
    inbox = Inbox(cast(Any, _Pool(live)), "dbos", "as-plan:r", "topic")
    assert inbox.waiting(1) is False
    live.failures = 1
    assert inbox.waiting(2) is True  # unknown: recv reads, and is recorded like any read
    assert inbox.waiting(3) is False
