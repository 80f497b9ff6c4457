"""Paging ``GET /api/runs`` over the PostgreSQL trace store lists every run exactly once, in order,
however many runs share one ``last_at`` (to the microsecond shown, or exactly), as it does over the
memory and SQLite stores (``tests/test_w13_service_paging_ties.py``): the cursor is the last row's
``last_at`` and ``run_id`` (``before`` and ``before_id``)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace.trace.events import TraceEvent
from tests.pg import fresh_schema
from tests.service.apptools import bearer, served

ADMIN = bearer("admin-token")
BASE = 1_700_000_000.0
_PREFIXES = ("run", "Run", "run_", "r")
"""Ids whose byte order differs from a locale's ("R" < "r" in bytes, "-" < "_")."""


@contextmanager
def _listing(pg_url: str, stamps: list[tuple[str, float]]) -> Iterator[TestClient]:
    """A runtime on a fresh PostgreSQL schema whose trace holds one finished run per ``(run_id, ts)``."""
    schema = fresh_schema(pg_url)
    url = next(schema)
    try:
        with served(url) as (client, rt, *_):
            events = []
            for run_id, ts in stamps:
                events.append(TraceEvent(run_id=run_id, seq=0, kind="run_started", ts=ts, data={}))
                events.append(
                    TraceEvent(run_id=run_id, seq=1, kind="run_finished", ts=ts, data={"status": "ok"})
                )
            rt.trace.append_many(events)
            yield client
    finally:
        next(schema, None)


def _pages(client: TestClient, size: int, most: int) -> list[dict[str, Any]]:
    """Every row, a page of ``size`` at a time, each page after the last row of the one before."""
    rows: list[dict[str, Any]] = []
    params: dict[str, Any] = {"limit": size}
    for _ in range(most + 2):  # more pages than rows would be a cursor that does not move
        answer = client.get("/api/runs", params=params, headers=ADMIN)
        assert answer.status_code == 200, answer.text
        page = answer.json()
        if not page:
            return rows
        assert len(page) <= size
        rows += page
        params = {"limit": size, "before": page[-1]["last_at"], "before_id": page[-1]["run_id"]}
    raise AssertionError("the pages never ended")


def _order(row: dict[str, Any]) -> tuple[float, str]:
    return (-datetime.fromisoformat(row["last_at"]).timestamp(), row["run_id"])


groups = st.lists(
    st.tuples(st.integers(min_value=1, max_value=7), st.sampled_from([0.0, 1e-7, 2.5e-7, 4e-7])),
    min_size=1,
    max_size=6,
)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(groups=groups, size=st.integers(min_value=1, max_value=9), data=st.data())
def test_postgres_pages_list_every_run_once_whatever_shares_a_timestamp(
    pg_url: str, groups: list[tuple[int, float]], size: int, data: st.DataObject
) -> None:
    count = sum(n for n, _ in groups)
    names = data.draw(st.permutations([f"{_PREFIXES[i % 4]}-{i:02d}" for i in range(count)]))
    stamps, taken = [], iter(names)
    for g, (n, step) in enumerate(groups):
        at = BASE - g * 1e-3  # a group shares one microsecond; with a step, not one exact float
        stamps += [(next(taken), at + j * step) for j in range(n)]
    with _listing(pg_url, stamps) as client:
        rows = _pages(client, size, count)
        whole = client.get("/api/runs", params={"limit": 500}, headers=ADMIN).json()
    ids = [r["run_id"] for r in rows]
    assert sorted(ids) == sorted(names)  # every run, none twice
    assert ids == [r["run_id"] for r in whole]  # the pages are the listing, in its order
    assert [_order(r) for r in rows] == sorted(_order(r) for r in rows)


def test_postgres_before_alone_lists_the_runs_last_active_before_it(pg_url: str) -> None:
    stamps = [("a", BASE), ("b", BASE), ("c", BASE - 1.0), ("d", BASE - 2.0)]
    with _listing(pg_url, stamps) as client:
        at = datetime.fromtimestamp(BASE).astimezone().isoformat()
        answer = client.get("/api/runs", params={"before": at}, headers=ADMIN)
        assert answer.status_code == 200
        assert [r["run_id"] for r in answer.json()] == ["c", "d"]
        tied = client.get("/api/runs", params={"before": at, "before_id": "a"}, headers=ADMIN)
        assert [r["run_id"] for r in tied.json()] == ["b", "c", "d"]
        lone = client.get("/api/runs", params={"before_id": "a"}, headers=ADMIN)
        assert [r["run_id"] for r in lone.json()] == ["a", "b", "c", "d"]
