"""A run id claimed by a starter that never recorded an event is freed after a bounded time: a
claim with no event expires, and of starters racing for an expired claim exactly one wins."""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest

from actionspace.errors import ConfigurationError
from actionspace.trace.events import CLAIM_EXPIRY_S, ClaimsRuns, TraceEvent, TraceStore
from actionspace.trace.memory import MemoryTraceStore
from actionspace.trace.sqlite import SqliteTraceStore
from tests.pg import STORES, store_url

EXPIRY_S = 60.0
RACERS = 6


@dataclass
class Stores:
    """Opens stores of one kind on one backing store, and ages the claims they hold."""

    open: Callable[[], TraceStore]
    age: Callable[[float], None]
    """Make every stored claim ``seconds`` older."""
    shared: bool
    """Every ``open`` answers the same store (memory is one process's)."""


@pytest.fixture(params=STORES)
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Stores]:
    from actionspace.types import ManualClock

    clock = ManualClock(1_000_000.0)
    if request.param == "memory":
        memory = MemoryTraceStore(claim_expiry_s=EXPIRY_S, clock=clock)
        yield Stores(lambda: memory, clock.advance, shared=True)
    elif request.param == "sqlite":
        path = tmp_path / "claims.db"
        yield Stores(
            lambda: SqliteTraceStore(path, claim_expiry_s=EXPIRY_S, clock=clock), clock.advance, shared=False
        )
    else:
        from actionspace.trace.postgres import PostgresTraceStore

        with contextmanager(store_url)(request, tmp_path) as url:

            def age(seconds: float) -> None:  # the database's clock decides: write the claims' time back
                with psycopg.connect(url, autocommit=True) as conn:
                    conn.execute("UPDATE trace_claims SET claimed_at = claimed_at - %s", (seconds,))

            yield Stores(lambda: PostgresTraceStore(url, claim_expiry_s=EXPIRY_S), age, shared=False)


def _claim(store: TraceStore, run_id: str) -> bool:
    assert isinstance(store, ClaimsRuns)
    return store.claim_run(run_id)


def test_the_default_bound_is_minutes_not_forever() -> None:
    assert 60.0 <= CLAIM_EXPIRY_S <= 900.0


def test_a_claim_no_event_followed_is_taken_until_the_bound_then_free(stores: Stores) -> None:
    store = stores.open()
    try:
        assert _claim(store, "crashed")
        stores.age(EXPIRY_S - 5)
        assert _claim(store, "crashed") is False  # still within the bound: the starter may be busy
        stores.age(10)
        assert _claim(store, "crashed") is True  # the starter left nothing: the id is free again
        assert _claim(store, "crashed") is False  # and now claimed anew, for the bound again
        assert store.next_seq("crashed") == 0
        assert store.runs() == []
    finally:
        if not stores.shared:
            store.close()


def test_a_claimed_run_that_recorded_events_never_expires(stores: Stores) -> None:
    store = stores.open()
    try:
        assert _claim(store, "started")
        store.append_many([TraceEvent(run_id="started", seq=0, kind="run_started", ts=5.0, data={})])
        stores.age(EXPIRY_S * 100)
        assert _claim(store, "started") is False
        assert [s.run_id for s in store.runs()] == ["started"]
    finally:
        if not stores.shared:
            store.close()


def test_starters_racing_for_an_expired_claim_exactly_one_wins(stores: Stores) -> None:
    first = stores.open()
    try:
        assert _claim(first, "raced")
    finally:
        if not stores.shared:
            first.close()
    stores.age(EXPIRY_S + 1)
    racers = [stores.open() for _ in range(RACERS)]
    start = threading.Barrier(RACERS, timeout=30)
    answers: list[bool] = []
    lock = threading.Lock()

    def claim(store: TraceStore) -> None:
        start.wait()
        won = _claim(store, "raced")
        with lock:
            answers.append(won)

    threads = [threading.Thread(target=claim, args=(s,)) for s in racers]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
    finally:
        if not stores.shared:
            for store in racers:
                store.close()
    assert sorted(answers) == [False] * (RACERS - 1) + [True]


@pytest.mark.parametrize("bad", [0.0, -1.0, math.nan])
def test_a_claim_bound_that_is_not_a_positive_duration_is_refused(bad: float, tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError):
        MemoryTraceStore(claim_expiry_s=bad)
    with pytest.raises(ConfigurationError):
        SqliteTraceStore(tmp_path / "t.db", claim_expiry_s=bad)
