"""A PostgreSQL mark session is idle by design: a server that ends idle sessions
(``idle_session_timeout``, PostgreSQL 14+) used to end it again and again, each time leaving its live
process unseen by every look until its watcher took the mark again (ledger/liveness.py). The mark
session turns that timeout off for itself; the store's own sessions keep the server's setting.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import psycopg
import pytest

from actionspace.ledger import liveness
from tests.pg import fresh_schema

IDLE_MS = 200


@pytest.fixture
def idle_ending(pg_url: str) -> Iterator[str]:
    """A store URL whose sessions the server ends after ``IDLE_MS`` idle."""
    for url in fresh_schema(pg_url):
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE TABLE ledger_entries (key text PRIMARY KEY)")
        yield url.replace("options=", f"options=-cidle_session_timeout%3D{IDLE_MS}%20", 1)


def _holders(url: str) -> set[int]:
    """The backends holding a mark on the store's ledger table now."""
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 2"
            " AND classid = 'ledger_entries'::regclass"
        ).fetchall()
    return {int(r[0]) for r in rows}


def test_a_mark_session_outlives_the_servers_idle_session_timeout(idle_ending: str) -> None:
    with psycopg.connect(idle_ending, autocommit=True) as probe:  # the setting reaches the sessions
        assert probe.execute("SHOW idle_session_timeout").fetchone() == (f"{IDLE_MS}ms",)
    store = object()
    drop = liveness.hold(store, idle_ending, "postgresql")
    try:
        first = _holders(idle_ending)
        assert len(first) == 1
        time.sleep(10 * IDLE_MS / 1000)  # ten times the timeout: old, ended (and taken again) by now
        assert _holders(idle_ending) == first  # the very session: never ended, never unseen
    finally:
        drop()
