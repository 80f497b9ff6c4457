"""The PostgreSQL trace store's tenant indexes are built with ``CREATE INDEX CONCURRENTLY``.

* A database whose index a killed concurrent build left invalid (PostgreSQL keeps such an index,
  unused, and ``IF NOT EXISTS`` finds it) has it built again by the next opener; the listing is
  right meanwhile.
* Writers are not blocked while an index is built: while the build waits for a transaction older
  than it to end (a concurrent build does so, its table's share-update lock taken), another store
  appends events to that table.
"""

from __future__ import annotations

import threading
from typing import Any, cast

import psycopg

from actionspace.trace.events import TraceEvent
from actionspace.trace.store import open_trace_store
from tests.pg import fresh_schema

INDEXES = ("trace_events_started", "trace_runs_tenant_recent")


def _started(run_id: str, at: float, tenant: str) -> TraceEvent:
    return TraceEvent(run_id=run_id, seq=0, kind="run_started", ts=at, data={"tenant": tenant})


def _valid(url: str) -> dict[str, bool]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT n, (SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass(n))"
            " FROM unnest(%s::text[]) AS n",
            (list(INDEXES),),
        ).fetchall()
    return {str(name): bool(valid) for name, valid in rows}


def test_an_index_a_killed_build_left_invalid_is_built_again(pg_url: str) -> None:
    for url in fresh_schema(pg_url):
        store = open_trace_store(url)
        store.append_many([_started("a", 1.0, "quiet"), _started("b", 2.0, "busy")])
        store.close()
        with psycopg.connect(url, autocommit=True) as conn:
            for name in INDEXES:
                conn.execute(
                    "UPDATE pg_index SET indisvalid = false WHERE indexrelid = to_regclass(%s)", (name,)
                )
        assert _valid(url) == dict.fromkeys(INDEXES, False)
        store = open_trace_store(url)
        try:
            assert _valid(url) == dict.fromkeys(INDEXES, True)
            assert [s.run_id for s in cast(Any, store).tenant_runs("quiet")] == ["a"]
        finally:
            store.close()


def _open_into(url: str, opened: list[Any]) -> None:
    opened.append(open_trace_store(url))


def _append(store: Any, done: threading.Event) -> None:
    store.append_many([_started("b", 2.0, "quiet")])
    done.set()


def test_a_writer_goes_on_while_an_opener_builds_the_index(pg_url: str) -> None:
    for url in fresh_schema(pg_url):
        store = open_trace_store(url)
        store.append_many([_started("a", 1.0, "quiet")])
        store.close()
        writer = open_trace_store(url)  # open already: an opener's schema statements wait for the build
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("DROP INDEX trace_runs_tenant_recent")
        # a transaction older than the build, holding a snapshot, touching no trace table
        older = psycopg.connect(url)
        older.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        older.execute("SELECT txid_current()")
        opened: list[Any] = []
        opener = threading.Thread(target=_open_into, args=(url, opened), daemon=True)
        opener.start()
        with psycopg.connect(url, autocommit=True) as watch:
            # the concurrent build waits for the older transaction, its table lock taken
            waiting = (
                "SELECT count(*) AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                " AND query ILIKE 'CREATE INDEX CONCURRENTLY%%'"
            )
            while not watch.execute(waiting).fetchone()[0]:  # type: ignore[index]
                assert opener.is_alive(), "the opener ended without waiting to build"
        done = threading.Event()
        try:
            threading.Thread(target=_append, args=(writer, done), daemon=True).start()
            # a plain build would hold the writer until the older transaction ends: never, here
            assert done.wait(60), "the writer was blocked by the index build"
        finally:
            older.close()
            opener.join(120)
        writer.close()
        assert not opener.is_alive() and opened
        try:
            assert _valid(url)["trace_runs_tenant_recent"]
            assert [s.run_id for s in opened[0].tenant_runs("quiet")] == ["b", "a"]
        finally:
            opened[0].close()
