"""The tenant columns of ledger entries and approval requests, on files and databases made before them.

* A SQLite file or PostgreSQL schema without the columns (their rows written by an earlier
  version) is given them, filled in, when stores open it: four processes opening it at once all
  open it, and each lists a tenant's rows right. The schema versions stay.
* A writer that knows nothing of the columns (raw SQL, as an earlier version writes) still has its
  rows listed under their tenant: triggers in the file or database set them.
* PostgreSQL: the indexes are built concurrently, by one process: an opener that finds another
  one building (its lock held) goes on without waiting, and an index a killed build left invalid is
  built again by the next opener.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import psycopg
import pytest

from actionspace import Runtime
from actionspace.approval.requests import ApprovalRequest
from actionspace.ledger._postgres_tenants import INDEXES
from actionspace.ledger.entries import LedgerEntry
from actionspace.trace.events import TraceEvent
from tests.pg import fresh_schema
from tests.proc import WAIT_FOR, at_once

_SQLITE_NAMES = (
    "ledger_entries_tenant_updated",
    "approval_requests_tenant_created",
    "approval_requests_tenant_status",
    "ledger_entries_tenant_of_new",
    "approval_requests_tenant_of_new",
    "approval_requests_tenant_of_change",
    "trace_runs_tenant_to_listings_new",
    "trace_runs_tenant_to_listings_moved",
)


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'a.db'}"
    else:
        yield from fresh_schema(request.getfixturevalue("pg_url"))


def _fill(url: str) -> None:
    rt = Runtime(url, recover_on_start=False)
    try:
        events = [
            TraceEvent(run_id=r, seq=0, kind="run_started", ts=1.0, data={"principal": "p", "tenant": t})
            for r, t in (("qt", "quiet"), ("bz", "busy"))
        ]
        rt.trace.append_many(events)
        for n, run in enumerate(["qt", "bz", "bz", "qt"]):
            rt.ledger.begin(_entry(run, n))
            rt.approvals.store.create(_request(run, n))
    finally:
        rt.close()


def _entry(run: str, n: int) -> LedgerEntry:
    return LedgerEntry(
        key=f"as1_{run}{n}", run_id=run, node_id=f"n{n}", tool="t@1", args_digest=f"d{n}",
        arguments={}, created_at=float(n), updated_at=float(n),
    )  # fmt: skip


def _request(run: str, n: int) -> ApprovalRequest:
    return ApprovalRequest(
        id=f"apr_{run}{n}", run_id=run, node_id=f"n{n}", tool="t@1", args_digest=f"d{n}",
        arguments={}, provenance={}, created_at=float(n),
    )  # fmt: skip


def _strip(url: str) -> None:
    """Take the columns, indexes and triggers away, as a file of an earlier version has none."""
    if url.startswith("sqlite"):
        with sqlite3.connect(url.removeprefix("sqlite:///")) as conn:
            for name in _SQLITE_NAMES:
                kind = "INDEX" if name.endswith(("updated", "created", "status")) else "TRIGGER"
                conn.execute(f"DROP {kind} {name}")
            conn.execute("ALTER TABLE ledger_entries DROP COLUMN tenant")
            conn.execute("ALTER TABLE approval_requests DROP COLUMN tenant")
        return
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DROP TRIGGER trace_runs_tenant_to_listings_new ON trace_runs")
        conn.execute("DROP TRIGGER trace_runs_tenant_to_listings_moved ON trace_runs")
        conn.execute("DROP TRIGGER ledger_entries_tenant_of_new ON ledger_entries")
        conn.execute("DROP TRIGGER approval_requests_tenant_of_new ON approval_requests")
        conn.execute("ALTER TABLE ledger_entries DROP COLUMN tenant")
        conn.execute("ALTER TABLE approval_requests DROP COLUMN tenant")


def _raw_insert(url: str) -> None:
    """An entry and a request of the quiet run written as an earlier version writes them."""
    ledger = (
        "INSERT INTO ledger_entries (key, run_id, node_id, tool, args_digest, arguments, state, attempts,"
        " created_at, updated_at) VALUES ('as1_raw', 'qt', 'raw', 't@1', 'dr', '{}', 'accepted', 0, 9, 9)"
    )
    approval = (
        "INSERT INTO approval_requests (id, run_id, node_id, tool, args_digest, arguments, provenance,"
        " effects, reason, details, status, created_at, holder) VALUES ('apr_raw', 'qt', 'raw', 't@1',"
        " 'dr', '{}', '{}', '[]', '', '{}', 'pending', 9, '')"
    )
    if url.startswith("sqlite"):
        with sqlite3.connect(url.removeprefix("sqlite:///")) as conn:
            conn.execute(ledger)
            conn.execute(approval)
    else:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(ledger)
            conn.execute(approval)


OPEN = (
    WAIT_FOR
    + """
import json, sys
from actionspace import Runtime
url, go = sys.argv[1], sys.argv[2]
print("ready", flush=True)
wait_for(go)
rt = Runtime(url, recover_on_start=False)
entries = rt.ledger.tenant_entries("quiet")
requests = rt.approvals.store.tenant_requests("quiet")
print(json.dumps({"entries": [e.key for e in entries], "requests": [r.id for r in requests]}))
rt.close()
"""
)


def _versions(url: str) -> dict[str, str]:
    sql = "SELECT key, value FROM ledger_meta WHERE key IN ('schema_version', 'approval_schema_version')"
    if url.startswith("sqlite"):
        with sqlite3.connect(url.removeprefix("sqlite:///")) as conn:
            return {str(k): str(v) for k, v in conn.execute(sql)}
    with psycopg.connect(url) as pg:
        return {str(k): str(v) for k, v in pg.execute(sql)}


def test_a_file_without_the_columns_is_given_them_by_processes_opening_it_at_once(
    url: str, tmp_path: Path
) -> None:
    _fill(url)
    versions = _versions(url)
    _strip(url)
    got = at_once(OPEN, [(url, str(tmp_path / "go"))] * 4, tmp_path / "go")
    want: dict[str, Any] = {"entries": ["as1_qt3", "as1_qt0"], "requests": ["apr_qt3", "apr_qt0"]}
    assert got == [want] * 4
    assert _versions(url) == versions  # additive: the versions stay
    # a writer knowing nothing of the columns has its rows listed under their run's tenant
    _raw_insert(url)
    rt = Runtime(url, recover_on_start=False)
    try:
        ledger: Any = rt.ledger
        assert [e.key for e in ledger.tenant_entries("quiet")] == ["as1_raw", *want["entries"]]
        assert [r.id for r in cast(Any, rt.approvals.store).tenant_requests("quiet") or []] == [
            "apr_raw",
            *want["requests"],
        ]
        assert [e.key for e in ledger.tenant_entries("busy")] == ["as1_bz2", "as1_bz1"]
    finally:
        rt.close()


def _valid_indexes(url: str) -> set[str]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT n FROM unnest(%s::text[]) AS n WHERE EXISTS"
            " (SELECT FROM pg_index WHERE indexrelid = to_regclass(n) AND indisvalid)",
            ([name for name, _ in INDEXES],),
        ).fetchall()
    return {str(r[0]) for r in rows}


def test_postgres_indexes_are_built_by_one_process_and_an_invalid_one_again(pg_url: str) -> None:
    for url in fresh_schema(pg_url):
        _fill(url)
        names = {name for name, _ in INDEXES}
        assert _valid_indexes(url) == names
        with psycopg.connect(url, autocommit=True) as conn:
            for name in names:
                conn.execute(f"DROP INDEX {name}")
            # another process building the ledger's index holds its lock: an opener does not wait
            lock = "actionspace.index.ledger_entries_tenant_updated"
            conn.execute("SELECT pg_advisory_lock(hashtextextended(%s, 0))", (lock,))
            rt = Runtime(url, recover_on_start=False)
            try:
                ledger: Any = rt.ledger
                assert [e.key for e in ledger.tenant_entries("quiet")] == ["as1_qt3", "as1_qt0"]
            finally:
                rt.close()
            assert _valid_indexes(url) == names - {"ledger_entries_tenant_updated"}
            conn.execute("SELECT pg_advisory_unlock(hashtextextended(%s, 0))", (lock,))
            # a build that was killed leaves its index invalid: the next opener builds it again
            invalid = "approval_requests_tenant_status"
            conn.execute(
                "UPDATE pg_index SET indisvalid = false WHERE indexrelid = to_regclass(%s)", (invalid,)
            )
        assert _valid_indexes(url) == names - {
            "ledger_entries_tenant_updated",
            "approval_requests_tenant_status",
        }
        Runtime(url, recover_on_start=False).close()
        assert _valid_indexes(url) == names
        got = json.loads(json.dumps(_versions(url)))
        assert got == {"schema_version": "1", "approval_schema_version": "2"}


def test_an_entry_of_a_run_without_a_tenant_is_written_to_no_tenant_index(tmp_path: Path) -> None:
    """SQLite: the ledger's tenant index holds entries with a tenant only, so a durable call of a
    single-tenant deployment writes no more B-trees than before."""
    url = f"sqlite:///{tmp_path / 'a.db'}"
    rt = Runtime(url, recover_on_start=False)
    try:
        rt.trace.append_many(
            [
                TraceEvent(run_id="plain", seq=0, kind="run_started", ts=1.0, data={"principal": "p"}),
                TraceEvent(run_id="qt", seq=0, kind="run_started", ts=1.0, data={"tenant": "quiet"}),
            ]
        )
        for n in range(30):
            rt.ledger.begin(_entry("plain", n))
        for n in range(30, 33):
            rt.ledger.begin(_entry("qt", n))
        with sqlite3.connect(tmp_path / "a.db") as conn:
            cells = conn.execute(
                "SELECT sum(ncell) FROM dbstat"
                " WHERE name = 'ledger_entries_tenant_updated' AND pagetype = 'leaf'"
            ).fetchone()[0]
        assert cells == 3
        ledger: Any = rt.ledger
        assert [e.key for e in ledger.tenant_entries("quiet")] == ["as1_qt32", "as1_qt31", "as1_qt30"]
        assert ledger.tenant_entries(None) is None  # the caller filters: see service/tenant_lists.py
    finally:
        rt.close()
