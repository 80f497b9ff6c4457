"""A run id claimed by the previous version (a ``trace_runs`` row with an empty span, started at
+inf and last at -inf, and no event) stays taken for a store of this version: a mixed-version
rollout never claims one id twice. Such a claim is then treated as a claim of this version made
when first seen, so a starter that died before recording anything frees the id after the bound."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest

from actionspace.trace.events import ClaimsRuns, TraceEvent, TraceStore
from actionspace.trace.sqlite import SqliteTraceStore
from tests.pg import store_url

EXPIRY_S = 60.0


@dataclass
class Backing:
    open: Callable[[], TraceStore]
    execute: Callable[[str], None]
    """Run one SQL statement on the backing database, outside any store."""
    age: Callable[[float], None]
    infinity: str
    """How the database's SQL spells +inf."""


@pytest.fixture(params=["sqlite", "postgres"])
def backing(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backing]:
    from actionspace.types import ManualClock

    if request.param == "sqlite":
        import sqlite3

        path = tmp_path / "claims.db"
        clock = ManualClock(1_000_000.0)

        def run_sqlite(sql: str) -> None:
            with sqlite3.connect(path) as conn:
                conn.execute(sql)

        yield Backing(
            lambda: SqliteTraceStore(path, claim_expiry_s=EXPIRY_S, clock=clock),
            run_sqlite,
            clock.advance,
            "9e999",
        )
        return
    from actionspace.trace.postgres import PostgresTraceStore

    with contextmanager(store_url)(request, tmp_path) as url:

        def run_pg(sql: str) -> None:
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute(sql.encode())

        def age(seconds: float) -> None:
            run_pg(f"UPDATE trace_claims SET claimed_at = claimed_at - {seconds}")

        yield Backing(
            lambda: PostgresTraceStore(url, claim_expiry_s=EXPIRY_S), run_pg, age, "'Infinity'::float8"
        )


def _legacy_claim(backing: Backing, run_id: str) -> None:
    """What ``claim_run`` of the previous version wrote: the run's row, its span empty."""
    inf = backing.infinity
    backing.execute(
        f"INSERT INTO trace_runs (run_id, started_at, last_at) VALUES ('{run_id}', {inf}, -{inf})"
    )


def _claim(store: TraceStore, run_id: str) -> bool:
    assert isinstance(store, ClaimsRuns)
    return store.claim_run(run_id)


def test_a_claim_of_the_previous_version_keeps_the_id_taken(backing: Backing) -> None:
    store = backing.open()
    try:
        _legacy_claim(backing, "old-claim")
        assert _claim(store, "old-claim") is False
        assert _claim(store, "old-claim") is False
        assert _claim(store, "fresh") is True
        assert store.runs() == []
    finally:
        store.close()


def test_a_claim_of_the_previous_version_whose_starter_recorded_events_stays_taken(backing: Backing) -> None:
    store = backing.open()
    try:
        _legacy_claim(backing, "old-run")
        store.append_many([TraceEvent(run_id="old-run", seq=0, kind="run_started", ts=5.0, data={})])
        backing.age(EXPIRY_S * 100)
        assert _claim(store, "old-run") is False
        assert [(s.run_id, s.started_at) for s in store.runs()] == [("old-run", 5.0)]
    finally:
        store.close()


def test_a_claim_of_the_previous_version_no_event_followed_expires_like_ours(backing: Backing) -> None:
    store = backing.open()
    try:
        _legacy_claim(backing, "old-dead")
        assert _claim(store, "old-dead") is False  # first seen now: taken for the bound from now
        backing.age(EXPIRY_S - 5)
        assert _claim(store, "old-dead") is False
        backing.age(10)
        assert _claim(store, "old-dead") is True
        assert _claim(store, "old-dead") is False
    finally:
        store.close()
