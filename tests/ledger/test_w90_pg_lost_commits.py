"""PostgreSQL stores whose session is lost at the worst moments: during a ``COMMIT`` (it landed and
its answer was lost, or it never landed), while two processes begin the same node at the same
instant, and behind a network that stops forwarding without a word.

Cut through a proxy (``w90_pg_proxy``) at the exact message: the trace's records and the run's state
are each written exactly once whatever the cut; an intent is its writer's only; a statement on a
silent network raises within the store's read timeout instead of waiting for ever.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import replace
from typing import Any

import psycopg
import pytest

from actionspace.ledger.postgres import PostgresLedgerStore
from actionspace.ledger.run_state import PostgresRunStateStore
from actionspace.trace.postgres import PostgresTraceStore
from tests.ledger.factories import entry
from tests.ledger.w90_pg_proxy import Proxy
from tests.pg import fresh_schema

CUTS = ["commit_answer", "commit_dropped"]


@pytest.fixture
def url(pg_url: str) -> Iterator[str]:
    yield from fresh_schema(pg_url)


@pytest.fixture
def proxy(url: str) -> Iterator[Proxy]:
    p = Proxy(url)
    yield p
    p.close()


@pytest.mark.parametrize("cut", CUTS)
def test_a_run_state_save_whose_commit_answer_is_lost_is_written_once_and_answered_saved(
    url: str, proxy: Proxy, cut: str
) -> None:
    """Landed: asked again it would find its own revision stored and answer False (the turn's calls
    ``transient`` after they ran); not landed: written now. Either way stored once, answered True."""
    with closing(PostgresRunStateStore(proxy.url)) as store:
        assert store.save("r1", {"rev": 1, "label": "a"}, [(0, "hello")])
        proxy.arm(cut)
        saved = store.save("r1", {"rev": 2, "label": "b"}, [(1, "again")])
        assert proxy.acted == [cut]
        assert saved is True
    with closing(PostgresRunStateStore(url)) as direct:
        state = direct.load("r1")
        assert state is not None and (state["rev"], state["label"]) == (2, "b")
        assert state["user_texts"] == ["hello", "again"]
        assert direct.rev("r1") == 2


def _records(n: int, ts: float) -> list[tuple[int, str, float, str | None, dict[str, Any]]]:
    return [(i, "observation", ts + i, f"c{i}", {"status": "ok", "i": i}) for i in range(n)]


@pytest.mark.parametrize("cut", CUTS)
def test_trace_records_whose_commit_answer_is_lost_are_stored_exactly_once(
    url: str, proxy: Proxy, cut: str
) -> None:
    with PostgresTraceStore(proxy.url) as store:
        store.append_records("run", _records(2, 100.0))
        proxy.arm(cut)
        store.append_records("run", _records(3, 200.0))
        assert proxy.acted == [cut]
        events = store.events("run")
    assert [e.seq for e in events] == list(range(5))
    assert [(e.ts, e.call_id) for e in events[2:]] == [(200.0, "c0"), (201.0, "c1"), (202.0, "c2")]


@pytest.mark.parametrize("cut", CUTS)
def test_a_trace_batch_whose_commit_answer_is_lost_is_stored_once_and_not_refused(
    url: str, proxy: Proxy, cut: str
) -> None:
    """Written again after it landed, the batch would repeat its own ``(run_id, seq)``: ValueError."""
    with PostgresTraceStore(proxy.url) as store:
        store.append_records("run", _records(1, 100.0))
        events = store.events("run")
        later = [replace(e, seq=1 + i, ts=300.0 + i) for i, e in enumerate(events * 2)]
        proxy.arm(cut)
        store.append_many(later)
        assert proxy.acted == [cut]
        assert [(e.seq, e.ts) for e in store.events("run")] == [(0, 100.0), (1, 300.0), (2, 301.0)]


@contextmanager
def _session_lost_after_next_statement(store: PostgresLedgerStore) -> Iterator[list[str]]:
    """The next statement of ``store`` runs, then its session ends before its answer is read."""
    connection = store._db.connection
    said: list[str] = []

    class Lost:
        def __init__(self, conn: Any) -> None:
            self.conn = conn

        def execute(self, sql: Any, params: Any = None) -> Any:
            done = self.conn.execute(sql, params)
            if not said:
                said.append(str(sql))
                self.conn.execute("SELECT pg_terminate_backend(pg_backend_pid()); SELECT pg_sleep(5)")
            return done

        def __getattr__(self, name: str) -> Any:
            return getattr(self.conn, name)

    @contextmanager
    def lost_once() -> Iterator[Any]:
        with connection() as conn:
            yield conn if said else Lost(conn)

    store._db.connection = lost_once  # type: ignore[method-assign]
    try:
        yield said
    finally:
        store._db.connection = connection  # type: ignore[method-assign]


def test_two_processes_beginning_a_node_at_the_same_instant_never_both_take_it(url: str) -> None:
    """The same intent (same key, same creation and update times: one instant) from two stores; the
    second's session ends under its insert, which found the first's row. Asked again, the row equals
    what it wrote in every column: only the nonce it drew tells it is the other's."""
    intent = entry("n1").evolve(state="dispatched", attempts=1)
    with PostgresLedgerStore(url) as first, PostgresLedgerStore(url) as second:
        assert first.begin(intent).created
        with _session_lost_after_next_statement(second) as said:
            begun = second.begin(intent)
        assert said and "INSERT INTO ledger_entries" in said[0]
        assert begun.entry.created_at == intent.created_at
        assert not begun.created  # else both send


def test_an_intent_whose_answer_is_lost_is_still_its_writers_own(url: str) -> None:
    intent = entry("n1").evolve(state="dispatched", attempts=1)
    with PostgresLedgerStore(url) as store:
        with _session_lost_after_next_statement(store) as said:
            begun = store.begin(intent)
        assert said and begun.created


def test_a_ledger_table_of_an_earlier_release_gets_the_nonce_and_its_rows_stay_readable(url: str) -> None:
    old = entry("n0").evolve(state="dispatched", attempts=1)
    with PostgresLedgerStore(url) as store:
        assert store.begin(old).created
    with psycopg.connect(url, autocommit=True) as pg:
        pg.execute("ALTER TABLE ledger_entries DROP COLUMN intent_nonce")  # as an earlier release made it
    with PostgresLedgerStore(url) as store:
        assert store.get(old.key) == old
        mine = entry("n1").evolve(state="dispatched", attempts=1)
        assert store.begin(mine).created
        assert not store.begin(old).created
    with psycopg.connect(url, autocommit=True) as pg:
        nonces: dict[str, str | None] = dict(
            pg.execute("SELECT node_id, intent_nonce FROM ledger_entries").fetchall()
        )
    assert nonces["n0"] is None and isinstance(nonces["n1"], str)


def _within(seconds: float, call: Any) -> tuple[bool, BaseException | None, float]:
    """Run ``call`` on a thread; whether it ended within ``seconds``, what it raised, how long it took."""
    raised: list[BaseException | None] = []
    began = time.monotonic()

    def run() -> None:
        try:
            call()
            raised.append(None)
        except BaseException as exc:
            raised.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    return not thread.is_alive(), (raised or [None])[0], time.monotonic() - began


def test_a_statement_behind_a_network_that_stopped_forwarding_times_out_within_the_bound(
    url: str, proxy: Proxy
) -> None:
    try:
        store = PostgresLedgerStore(proxy.url, read_timeout_s=1.0)  # type: ignore[call-arg, unused-ignore]
    except TypeError:  # a release without the bound
        store = PostgresLedgerStore(proxy.url)
    with store:
        first = entry("n1").evolve(state="dispatched", attempts=1)
        assert store.begin(first).created
        proxy.arm("blackhole")
        ended, raised, took = _within(15.0, lambda: store.get(first.key))
        assert ended, "the statement still waits for an answer that will never come"
        assert isinstance(raised, psycopg.OperationalError) and "1 s" in str(raised)
        assert took < 5.0
        proxy.close()  # the network is back (a new path): the store goes on
        fresh = PostgresLedgerStore(url)
        with fresh:
            assert fresh.get(first.key) == first


def test_a_transaction_behind_a_network_that_stopped_forwarding_times_out_and_lands_nothing(
    url: str, proxy: Proxy
) -> None:
    try:
        store = PostgresTraceStore(proxy.url, read_timeout_s=1.0)  # type: ignore[call-arg, unused-ignore]
    except TypeError:  # a release without the bound
        store = PostgresTraceStore(proxy.url)
    with store:
        store.append_records("run", _records(1, 100.0))
        proxy.arm("blackhole")
        ended, raised, took = _within(15.0, lambda: store.append_records("run", _records(2, 200.0)))
        assert ended, "the transaction still waits for an answer that will never come"
        assert isinstance(raised, psycopg.OperationalError) and took < 5.0
    proxy.close()
    with PostgresTraceStore(url) as direct:
        assert [e.ts for e in direct.events("run")] == [100.0]
