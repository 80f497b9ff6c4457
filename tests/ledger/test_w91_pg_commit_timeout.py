"""PostgreSQL stores behind a network cut during a ``COMMIT``, a purge slower than the read timeout,
and the pool after a read timed out inside a transaction.

The proxy (``w90_pg_proxy``) forwards a ``COMMIT`` (or swallows it), then forwards nothing more on
any connection and closes nothing: the client's read times out, the server's session lives on. The
transaction's end is looked for on fresh connections for ``settle_s``: found once the network is
back (written once, answered as written); not found, the write ends ``unknown_commit``, never as a
driver error that the service or the gateway would answer "ask again".
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import closing
from typing import Any

import psycopg
import pytest

from actionspace.errors import store_unavailable
from actionspace.execution.errors import map_exception
from actionspace.ledger.postgres import PostgresLedgerStore
from actionspace.ledger.postgres_pool import PostgresConnections
from actionspace.trace.postgres import PostgresTraceStore
from tests.ledger.factories import entry
from tests.ledger.w90_pg_proxy import Proxy
from tests.pg import fresh_schema

CUTS = ["commit_cut_landed", "commit_cut_dropped"]


@pytest.fixture
def url(pg_url: str) -> Iterator[str]:
    yield from fresh_schema(pg_url)


@pytest.fixture
def proxy(url: str) -> Iterator[Proxy]:
    p = Proxy(url)
    yield p
    p.close()


def _records(n: int, ts: float) -> list[tuple[int, str, float, str | None, dict[str, Any]]]:
    return [(i, "observation", ts + i, f"c{i}", {"status": "ok", "i": i}) for i in range(n)]


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


def _trace_store(proxy: Proxy, settle_s: float) -> PostgresTraceStore:
    store = PostgresTraceStore(proxy.url, read_timeout_s=1.0, connect_timeout_s=2.0)
    store._db.settle_s = settle_s  # an attribute an older release ignores
    return store


@pytest.mark.parametrize("cut", CUTS)
@pytest.mark.parametrize("restore_after_s", [0.5, 2.5])
def test_a_commit_cut_by_a_silent_network_is_settled_once_the_network_is_back(
    url: str, proxy: Proxy, cut: str, restore_after_s: float
) -> None:
    """Back before the read timeout ends (0.5 s) or after the first fresh connection was lost to
    the cut too (2.5 s): the transaction's end is learnt, the batch is stored once and answered."""
    with _trace_store(proxy, settle_s=10.0) as store:
        store.append_records("run", _records(1, 100.0))
        proxy.arm(cut)
        timer = threading.Timer(restore_after_s, proxy.restore)
        timer.start()
        ended, raised, _ = _within(30.0, lambda: store.append_records("run", _records(2, 200.0)))
        timer.join()
        assert ended and proxy.acted == [cut]
        assert raised is None, f"{type(raised).__name__}: {raised}"
    with PostgresTraceStore(url) as direct:
        assert [e.ts for e in direct.events("run")] == [100.0, 200.0, 201.0]


@pytest.mark.parametrize("cut", CUTS)
def test_a_commit_cut_for_longer_than_the_bound_ends_unknown_commit_not_ask_again(
    url: str, proxy: Proxy, cut: str
) -> None:
    settle_s = 3.0
    with _trace_store(proxy, settle_s=settle_s) as store:
        store.append_records("run", _records(1, 100.0))
        proxy.arm(cut)
        ended, raised, took = _within(30.0, lambda: store.append_records("run", _records(2, 200.0)))
        assert ended, "the write still waits"
        assert proxy.acted == [cut]
        assert raised is not None
        assert map_exception(raised, side_effects=True).category == "unknown_commit", repr(raised)
        assert not store_unavailable(raised)  # the service and the gateway would answer "ask again"
        # read timeout, then the bound, then at most one fresh connection's connect timeout
        assert 1.0 + settle_s <= took < 1.0 + settle_s + 2.0 + 1.5
        xid = raised.error.details["xid"]  # type: ignore[attr-defined]
    proxy.close()  # the server's session ends with its socket: the dropped COMMIT never lands
    with psycopg.connect(url, autocommit=True) as pg:
        for _ in range(200):
            row = pg.execute("SELECT txid_status(%s)", (xid,)).fetchone()
            if row is not None and row[0] != "in progress":
                break
            time.sleep(0.05)
        status = row[0] if row is not None else None
    landed = cut == "commit_cut_landed"
    assert status == ("committed" if landed else "aborted")
    with PostgresTraceStore(url) as direct:
        want = [100.0, 200.0, 201.0] if landed else [100.0]
        assert [e.ts for e in direct.events("run")] == want


@pytest.mark.parametrize("cut", CUTS)
def test_an_intent_whose_answer_timed_out_is_asked_again_and_stays_its_writers(
    url: str, proxy: Proxy, cut: str
) -> None:
    """The insert landed (its answer lost) or never arrived; the network is back 1.5 s later: either
    way the intent is the caller's (it sends), stored once; not ``transient`` with a row left
    ``dispatched`` that no process sends."""
    with PostgresLedgerStore(proxy.url, read_timeout_s=1.0, connect_timeout_s=2.0) as store:
        assert store.begin(entry("n0").evolve(state="dispatched", attempts=1)).created
        intent = entry("n1").evolve(state="dispatched", attempts=1)
        proxy.arm(cut, marker=b"INSERT INTO ledger_entries")
        timer = threading.Timer(1.5, proxy.restore)
        timer.start()
        begun: list[Any] = []
        ended, raised, _ = _within(60.0, lambda: begun.append(store.begin(intent)))
        timer.join()
        assert ended and proxy.acted == [cut]
        assert raised is None, f"{type(raised).__name__}: {raised}"
        assert begun[0].created
    with PostgresLedgerStore(url) as direct:
        assert direct.get(intent.key) == intent


@pytest.mark.parametrize("cut", CUTS)
def test_an_outcome_whose_answer_timed_out_is_asked_again_and_known(url: str, proxy: Proxy, cut: str) -> None:
    with PostgresLedgerStore(proxy.url, read_timeout_s=1.0, connect_timeout_s=2.0) as store:
        sent = entry("n1").evolve(state="dispatched", attempts=1)
        assert store.begin(sent).created
        done = sent.evolve(state="committed", remote_id="rem-1")
        proxy.arm(cut, marker=b"UPDATE ledger_entries")
        timer = threading.Timer(1.5, proxy.restore)
        timer.start()
        moved: list[Any] = []
        ended, raised, _ = _within(
            60.0, lambda: moved.append(store.transition(sent.key, ["dispatched"], done))
        )
        timer.join()
        assert ended and proxy.acted == [cut]
        assert raised is None, f"{type(raised).__name__}: {raised}"
        assert moved == [done]
    with PostgresLedgerStore(url) as direct:
        assert direct.get(sent.key) == done


def _purgeable(store: PostgresLedgerStore, n: int) -> list[str]:
    keys = []
    for i in range(n):
        e = entry(f"n{i}", at=10.0).evolve(state="committed", attempts=1, updated_at=10.0)
        assert store.begin(e).created
        keys.append(e.key)
    return keys


def _locked_for(url: str, key: str, seconds: float) -> threading.Thread:
    """A transaction of another session holds ``key``'s row for ``seconds``: a purge waits for it."""
    locked = threading.Event()

    def hold() -> None:
        with psycopg.connect(url) as pg:
            pg.execute("SELECT 1 FROM ledger_entries WHERE key = %s FOR UPDATE", (key,))
            locked.set()
            time.sleep(seconds)
            pg.commit()

    thread = threading.Thread(target=hold, daemon=True)
    thread.start()
    assert locked.wait(10.0)
    return thread


def _ledger(url: str, admin_timeout_s: float) -> PostgresLedgerStore:
    try:
        return PostgresLedgerStore(url, read_timeout_s=1.0, admin_timeout_s=admin_timeout_s)  # type: ignore[call-arg, unused-ignore]
    except TypeError:  # a release without the purge's own bound
        return PostgresLedgerStore(url, read_timeout_s=1.0)


def test_a_purge_slower_than_the_read_timeout_runs_under_its_own_bound(url: str) -> None:
    with _ledger(url, admin_timeout_s=20.0) as store:
        keys = _purgeable(store, 3)
        holder = _locked_for(url, keys[1], 2.5)  # the purge's statement runs 2.5 s, past the 1 s
        purged: list[int] = []
        ended, raised, _ = _within(30.0, lambda: purged.append(store.purge(older_than=100.0)))
        holder.join()
        assert ended and raised is None, f"{type(raised).__name__}: {raised}"
        assert purged == [3]
        assert all(store.get(k) is None for k in keys)


def test_a_purge_past_its_own_bound_is_cancelled_by_the_server_and_deletes_nothing(url: str) -> None:
    with _ledger(url, admin_timeout_s=2.0) as store:
        keys = _purgeable(store, 3)
        holder = _locked_for(url, keys[1], 6.0)
        ended, raised, took = _within(30.0, lambda: store.purge(older_than=100.0))
        assert ended
        assert isinstance(raised, psycopg.errors.QueryCanceled), repr(raised)  # the server's answer
        assert 2.0 <= took < 5.0
        assert all(store.get(k) is not None for k in keys)  # one statement: all or nothing
        holder.join()
        assert store.purge(older_than=100.0) == 3


def test_a_connection_whose_read_timed_out_in_a_transaction_is_never_handed_out_again(url: str) -> None:
    db = PostgresConnections(url, name="pool", min_size=1, max_size=2, read_timeout_s=0.5)
    with closing(db):
        timed_out: list[Any] = []
        with pytest.raises(psycopg.OperationalError, match="no answer"), db.transaction() as conn:
            timed_out.append(conn)
            conn.execute("SELECT 1")
            conn.execute("SELECT pg_sleep(3)")
        with db.connection() as conn:  # the caller goes on inside the block after the timeout
            timed_out.append(conn)
            with pytest.raises(psycopg.OperationalError, match="no answer"):
                conn.execute("BEGIN; SELECT pg_sleep(3)")
        for _ in range(6):
            with db.connection() as conn:
                assert all(conn is not lost for lost in timed_out)
                assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
                assert conn.execute("SELECT 2 AS two").fetchone() == {"two": 2}
            with db.transaction() as conn:
                assert conn.execute("SELECT 1 AS one").fetchone() == {"one": 1}
