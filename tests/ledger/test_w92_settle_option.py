"""``settle_s`` where PostgreSQL stores are built: how long a write whose ``COMMIT`` got no answer is
asked about (``PostgresConnections.transaction_again``) before it is ``unknown_commit``.

The trace and run-state stores take it as a keyword and hand it to their connections: a write whose
``COMMIT`` answer is lost (the connection closed under it, as past its read timeout) is settled
within the bound given, and the ``CommitUnknown`` names it. A value that is no positive, finite
number of seconds is a ConfigurationError naming the option, raised before any connection is made.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest

from actionspace.errors import ConfigurationError
from actionspace.ledger import postgres_pool
from actionspace.ledger._postgres_lost import BoundedConnection, CommitUnknown
from actionspace.ledger.postgres_pool import SETTLE_S, PostgresConnections
from actionspace.ledger.run_state import PostgresRunStateStore
from actionspace.trace.events import TraceEvent
from actionspace.trace.postgres import PostgresTraceStore
from tests.pg import fresh_schema

_NOWHERE = "postgresql://nobody@/nowhere?host=/nonexistent-socket-dir&connect_timeout=1"


@pytest.fixture
def schema(pg_url: str) -> Iterator[str]:
    yield from fresh_schema(pg_url)


def _lost_commits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Every ``COMMIT`` from now on gets no answer (its connection closed as past its read timeout);
    the bound each is then settled within, recorded, its end not learnt."""
    asked: list[float] = []

    def commit(conn: BoundedConnection) -> None:
        conn.timed_out = True
        conn.close()
        raise psycopg.OperationalError("no answer from the PostgreSQL server")

    def settled(url: str, xid: int, pid: int, *, within: float, read_timeout_s: float | None) -> None:
        asked.append(within)

    monkeypatch.setattr(BoundedConnection, "commit", commit)
    monkeypatch.setattr(postgres_pool, "settled", settled)
    return asked


def test_a_trace_store_built_with_settle_s_settles_a_lost_commit_within_it(
    schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with PostgresTraceStore(schema, settle_s=2.5) as store:
        assert store._db.settle_s == 2.5
        with monkeypatch.context() as patched:
            asked = _lost_commits(patched)
            event = TraceEvent(run_id="r", seq=0, kind="run_started", ts=1.0, data={})
            with pytest.raises(CommitUnknown, match=r"within 2\.5 s"):
                store.append_many([event])
        assert asked == [2.5]
    with PostgresTraceStore(schema) as store:
        assert store._db.settle_s == SETTLE_S


def test_a_run_state_store_built_with_settle_s_settles_a_lost_commit_within_it(
    schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = PostgresRunStateStore(schema, settle_s=4)
    try:
        assert store._db.settle_s == 4.0
        with monkeypatch.context() as patched:
            asked = _lost_commits(patched)
            with pytest.raises(CommitUnknown, match=r"within 4 s"):
                store.save("r", {"v": 1, "rev": 1})
        assert asked == [4.0]
    finally:
        store.close()
    default = inspect.signature(PostgresRunStateStore).parameters["settle_s"].default
    assert default == SETTLE_S


_BUILDS: list[Callable[..., Any]] = [
    PostgresTraceStore,
    PostgresRunStateStore,
    lambda url, **options: PostgresConnections(url, name="x", **options),
]


@pytest.mark.parametrize("build", _BUILDS, ids=["trace", "run_state", "connections"])
@pytest.mark.parametrize("bad", [0, -1.0, math.nan, math.inf, True, "5", None])
def test_a_bad_settle_s_is_a_configuration_error_naming_it(build: Callable[..., Any], bad: object) -> None:
    with pytest.raises(ConfigurationError, match="settle_s must be a positive, finite number"):
        build(_NOWHERE, settle_s=bad)  # refused before any connection is tried
