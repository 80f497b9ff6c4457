"""A run's usage of every principal is found over the usage key's index, never by reading every row.

Usage rows are keyed per (run, principal): ``run@<run id>:principal:…``, and stores written by
earlier versions may hold ``run:<run id>`` rows that still count. ``forget_run(run_id)`` and
``used(run_id=…)`` without a principal read and drop the rows of every principal of the run; each
statement the meter really runs for them is planned by the database (``EXPLAIN QUERY PLAN`` on
SQLite, ``EXPLAIN`` on PostgreSQL) and must search the usage table by an index. A store written by
the earlier meter (``stores/budget_store_before_run_index.sql``) keeps counting and forgetting."""

from __future__ import annotations

import sqlite3
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace.ledger.budget_store import PostgresMeter, SqliteMeter
from actionspace.policy.budget import Budget, Budgets, Meter, Reservation, Usage
from tests.pg import fresh_schema

WIDE = Budgets(Budget(calls=10**6, per="run"))
TWO_PER_RUN = Budgets(Budget(calls=2, per="run"))
ALICE, BOB, ALICE_T2 = ("alice", "t1"), ("bob", "t1"), ("alice", "t:2%")
OLD_STORE = Path(__file__).parent / "stores" / "budget_store_before_run_index.sql"
RUN_IDS = ["r", "r:1%", "r;x", "r0", "r%3A1%25", "r:", "run", ""]


class Recording:
    """A connection that records every statement run on it (and its parameters)."""

    def __init__(self, conn: Any, seen: list[tuple[str, tuple[Any, ...]]]) -> None:
        self._conn, self._seen = conn, seen

    def execute(self, sql: str, params: Any = ()) -> Any:
        self._seen.append((sql, tuple(params)))
        return self._conn.execute(sql, params)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


def _recorded(meter: Any, action: Callable[[], object]) -> list[tuple[str, tuple[Any, ...]]]:
    """The statements ``action`` runs on ``meter``'s connections (reads and transactions alike)."""
    seen: list[tuple[str, tuple[Any, ...]]] = []
    transact, read = meter._transact, meter._read

    def recording_transact(work: Callable[[Any], Any]) -> Any:
        return transact(lambda conn: work(Recording(conn, seen)))

    @contextmanager
    def recording_read() -> Iterator[Any]:
        with read() as conn:
            yield Recording(conn, seen)

    meter._transact, meter._read = recording_transact, recording_read
    try:
        action()
    finally:
        del meter._transact, meter._read
    return [(sql, params) for sql, params in seen if "budget_usage" in sql]


def _action(meter: Meter, action: str, run: str) -> Callable[[], object]:
    return partial(meter.used, run_id=run) if action == "used" else partial(meter.forget_run, run)


def _fill(meter: Meter, runs: int) -> None:
    """Usage rows of ``runs`` runs of two principals each, so the table holds more than one run."""
    for i in range(runs):
        for who in (ALICE, BOB):
            held = meter.admit(f"run-{i}", who, Usage(calls=1))
            assert isinstance(held, Reservation)
            meter.settle(held, Usage(calls=1))


def _sqlite_plan(path: Path, sql: str, params: tuple[Any, ...]) -> list[str]:
    with sqlite3.connect(path) as conn:
        return [str(row[3]) for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}", params)]


@pytest.mark.parametrize("action", ["used", "forget_run"])
def test_sqlite_reads_a_runs_rows_over_the_key_index(tmp_path: Path, action: str) -> None:
    path = tmp_path / "m.db"
    meter = SqliteMeter(WIDE, path)
    try:
        _fill(meter, 50)
        run = "run-7"
        statements = _recorded(meter, _action(meter, action, run))
        assert statements, "the meter ran no statement on budget_usage"
        for sql, params in statements:
            plan = _sqlite_plan(path, sql, params)
            assert not any(step.startswith("SCAN budget_usage") for step in plan), (sql, plan)
            assert any(step.startswith("SEARCH budget_usage USING") for step in plan), (sql, plan)
        if action == "forget_run":
            assert meter.used(run_id=run) == Usage() and meter.used(run_id="run-8") == Usage(calls=2)
        else:
            assert meter.used(run_id=run) == Usage(calls=2)
    finally:
        meter.close()


@pytest.mark.parametrize("action", ["used", "forget_run"])
def test_postgres_reads_a_runs_rows_over_an_index(pg_url: str, action: str) -> None:
    for url in fresh_schema(pg_url):
        meter = PostgresMeter(WIDE, url)
        try:
            _fill(meter, 20)
            run = "run-7"
            statements = _recorded(meter, _action(meter, action, run))
            assert statements, "the meter ran no statement on budget_usage"
            with psycopg.connect(url) as conn:  # a transaction, rolled back: EXPLAIN changes nothing
                conn.execute("SET LOCAL enable_seqscan = off")  # a small table is read whole otherwise
                for sql, params in statements:
                    plan = "\n".join(str(r[0]) for r in conn.execute(f"EXPLAIN {sql}", params).fetchall())
                    assert "Seq Scan on budget_usage" not in plan, (sql, plan)
                    assert "Index" in plan, (sql, plan)
                conn.rollback()
            expected = Usage() if action == "forget_run" else Usage(calls=2)
            assert meter.used(run_id=run) == expected and meter.used(run_id="run-8") == Usage(calls=2)
        finally:
            meter.close()


def _old_store(path: Path) -> None:
    with sqlite3.connect(path) as conn:
        conn.executescript(OLD_STORE.read_text())


OLD_TOTALS: Mapping[str, Usage] = {
    # every principal's rows of the run, and its row of the older layout ('run:<id>'), together
    "r": Usage(calls=8, items=8, bytes=71),
    "r:1%": Usage(calls=13, items=13, bytes=105),  # bob's 1 call left open, reclaimed: still charged
    "r;x": Usage(calls=1, items=1, bytes=7),
    "r0": Usage(calls=1, items=1, bytes=7),
    "r%3A1%25": Usage(calls=4, items=4, bytes=28),
    "r:": Usage(calls=2, items=2, bytes=14),
    "run": Usage(),
    "": Usage(),
}


def test_a_store_the_earlier_meter_wrote_keeps_counting_and_forgetting_each_run(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    _old_store(path)
    meter = SqliteMeter(TWO_PER_RUN, path)  # reclaims the dead owner's reservation on opening
    try:
        assert {run: meter.used(run_id=run) for run in OLD_TOTALS} == OLD_TOTALS
        assert meter.used(run_id="r:1%", principal=BOB) == Usage(calls=4 + 7, items=4 + 7, bytes=21 + 70)
        meter.forget_run("r:1%")
        left = dict(OLD_TOTALS, **{"r:1%": Usage()})
        assert {run: meter.used(run_id=run) for run in OLD_TOTALS} == left
        assert meter.used(principal=BOB) == Usage(calls=8, items=8, bytes=49)  # a principal's usage stays
        for who in (ALICE, BOB, ALICE_T2):  # a fresh allowance of two calls each in the forgotten run
            for _ in range(2):
                held = meter.admit("r:1%", who, Usage(calls=1))
                assert isinstance(held, Reservation)
                meter.settle(held, Usage(calls=1))
            assert not isinstance(meter.admit("r:1%", who, Usage(calls=1)), Reservation)
        meter.forget_run("r")  # its row of the older layout too; "r:" and "r;x" are other runs
        assert meter.used(run_id="r") == Usage()
        assert meter.used(run_id="r:") == OLD_TOTALS["r:"] and meter.used(run_id="r;x") == OLD_TOTALS["r;x"]
        with sqlite3.connect(path) as conn:
            scopes = {str(r[0]) for r in conn.execute("SELECT scope FROM budget_usage")}
        assert "run:r" not in scopes and "run:r:1%" not in scopes
    finally:
        meter.close()


def test_a_postgres_store_opened_before_the_index_gets_it(pg_url: str) -> None:
    for url in fresh_schema(pg_url):
        PostgresMeter(WIDE, url).close()
        with psycopg.connect(url, autocommit=True) as conn:  # as the earlier meter left its tables
            conn.execute("DROP INDEX budget_usage_scope_bytes")
            conn.execute("INSERT INTO budget_usage VALUES ('run:r', 5, 5, 50, 0)")
            conn.execute("INSERT INTO budget_usage VALUES ('run@r:principal:t1:alice', 2, 2, 14, 0)")
            conn.execute("INSERT INTO budget_usage VALUES ('run@r%3A:principal:t1:bob', 2, 2, 14, 0)")
        meter = PostgresMeter(TWO_PER_RUN, url)
        try:
            with psycopg.connect(url) as conn:
                found = conn.execute("SELECT 1 FROM pg_indexes WHERE indexname = 'budget_usage_scope_bytes'")
                assert found.fetchone() is not None
            assert meter.used(run_id="r") == Usage(calls=7, items=7, bytes=64)
            meter.forget_run("r")
            assert meter.used(run_id="r") == Usage() and meter.used(run_id="r:") == Usage(
                calls=2, items=2, bytes=14
            )
        finally:
            meter.close()


IDS = st.text(st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"), max_size=6)
SPENDS = st.lists(
    st.tuples(
        st.sampled_from([*RUN_IDS[:4], "a:b", "a;", "a%", "é:"]) | IDS,
        st.sampled_from([ALICE, BOB, ALICE_T2]),
    ),
    min_size=1,
    max_size=25,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spends=SPENDS, forgotten=st.lists(IDS | st.sampled_from(RUN_IDS), max_size=3))
def test_a_runs_rows_in_sqlite_are_what_the_meter_in_memory_counts(
    spends: list[tuple[str, tuple[str, str]]], forgotten: list[str]
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        stored = SqliteMeter(WIDE, Path(folder) / "m.db")
        try:
            _spend_both(stored, Meter(WIDE), spends, forgotten)
        finally:
            stored.close()


def _spend_both(
    stored: Meter, memory: Meter, spends: list[tuple[str, tuple[str, str]]], forgotten: list[str]
) -> None:
    for run, who in spends:
        for meter in (stored, memory):
            held = meter.admit(run, who, Usage(calls=1, items=len(run)))
            assert isinstance(held, Reservation)
            meter.settle(held, Usage(calls=1, items=len(run)))
    for run in forgotten:
        stored.forget_run(run)
        memory.forget_run(run)
    for run in {r for r, _ in spends} | set(forgotten):
        assert stored.used(run_id=run) == memory.used(run_id=run), run


LINGUISTIC = "en-x-icu"
"""A collation in which ``:`` does not sort before ``;`` (nor keys by their bytes): a key column
in it must not change which rows are a run's."""


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spends=SPENDS, forgotten=st.lists(IDS | st.sampled_from(RUN_IDS), max_size=3))
def test_a_runs_rows_in_postgres_are_what_the_meter_in_memory_counts_whatever_the_keys_collation(
    pg_url: str, spends: list[tuple[str, tuple[str, str]]], forgotten: list[str]
) -> None:
    for url in fresh_schema(pg_url):
        with psycopg.connect(url, autocommit=True) as conn:
            if conn.execute("SELECT 1 FROM pg_collation WHERE collname = %s", (LINGUISTIC,)).fetchone():
                conn.execute(  # the table as a deployment may have made it, keyed in its own collation
                    f'CREATE TABLE budget_usage (scope TEXT COLLATE "{LINGUISTIC}" PRIMARY KEY,'
                    " calls DOUBLE PRECISION NOT NULL, items DOUBLE PRECISION NOT NULL,"
                    " bytes DOUBLE PRECISION NOT NULL, money DOUBLE PRECISION NOT NULL)"
                )
        stored = PostgresMeter(WIDE, url)
        try:
            _spend_both(stored, Meter(WIDE), spends, forgotten)
        finally:
            stored.close()
