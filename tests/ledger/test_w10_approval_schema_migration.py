"""Approval tables written before pending requests were held per proposer (schema version 1) are
migrated when a store opens them: their requests read back as they were, and a second proposer of a
call pending in them files a request of its own."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from actionspace.approval.requests import ApprovalRequest, ApprovalStore
from actionspace.ledger.sqlite_approvals import SqliteApprovalStore
from tests.ledger.factories import request

ALICE = {"id": "alice", "scopes": ["*"], "tenant": "acme"}
MALLORY = {"id": "mallory", "scopes": ["*"], "tenant": "acme"}

_COLUMNS = (
    "id TEXT PRIMARY KEY, run_id TEXT NOT NULL, node_id TEXT NOT NULL, tool TEXT NOT NULL,"
    " args_digest TEXT NOT NULL, arguments {j} NOT NULL, provenance {j} NOT NULL, effects {j} NOT NULL,"
    " reason TEXT NOT NULL, details {j} NOT NULL, status TEXT NOT NULL, created_at {f} NOT NULL,"
    " decided_at {f}, decided_by TEXT, decision_reason TEXT, expires_at {f}"
)
VERSION_1 = (
    "CREATE TABLE ledger_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE approval_requests ({columns})",
    "CREATE INDEX approval_requests_binding ON approval_requests (run_id, tool, args_digest)",
    "CREATE INDEX approval_requests_status_created ON approval_requests (status, created_at)",
    "CREATE UNIQUE INDEX approval_requests_one_pending"
    " ON approval_requests (run_id, tool, args_digest) WHERE status = 'pending'",
    "INSERT INTO ledger_meta (key, value) VALUES ('approval_schema_version', '1')",
)


def _old_row(old: ApprovalRequest) -> tuple[object, ...]:
    return (
        old.id,
        old.run_id,
        old.node_id,
        old.tool,
        old.args_digest,
        json.dumps(dict(old.arguments)),
        json.dumps(dict(old.provenance)),
        json.dumps(list(old.effects)),
        old.reason,
        json.dumps(dict(old.details)),
        old.status,
        old.created_at,
    )


OLD_PENDING = request(request_id="apr_old", details={"limit": 5, "proposed_by": ALICE})
OLD_DENIED = request(request_id="apr_denied", amount=99, status="denied", details={"proposed_by": MALLORY})
_INSERT = (
    "INSERT INTO approval_requests (id, run_id, node_id, tool, args_digest, arguments, provenance,"
    " effects, reason, details, status, created_at) VALUES ({p})"
)


@pytest.fixture
def sqlite_version_1(tmp_path: Path) -> Iterator[ApprovalStore]:
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as conn:
        for statement in VERSION_1:
            conn.execute(statement.format(columns=_COLUMNS.format(j="TEXT", f="REAL")))
        for old in (OLD_PENDING, OLD_DENIED):
            conn.execute(_INSERT.format(p=", ".join("?" * 12)), _old_row(old))
    conn.close()
    store = SqliteApprovalStore(path)
    yield store
    store.close()
    with sqlite3.connect(path) as conn:
        version = conn.execute("SELECT value FROM ledger_meta WHERE key = 'approval_schema_version'")
        assert version.fetchone() == ("2",)
    conn.close()


@pytest.fixture
def postgres_version_1(pg_url: str) -> Iterator[ApprovalStore]:
    from actionspace.ledger.postgres import PostgresApprovalStore
    from tests.pg import fresh_schema

    for url in fresh_schema(pg_url):
        with psycopg.connect(url, autocommit=True) as conn:
            for statement in VERSION_1:
                conn.execute(statement.format(columns=_COLUMNS.format(j="jsonb", f="double precision")))
            for old in (OLD_PENDING, OLD_DENIED):
                conn.execute(_INSERT.format(p=", ".join(["%s"] * 12)), _old_row(old))
        store = PostgresApprovalStore(url)
        yield store
        store.close()
        with psycopg.connect(url, autocommit=True) as conn:
            row = conn.execute("SELECT value FROM ledger_meta WHERE key = 'approval_schema_version'")
            assert row.fetchone() == ("2",)


@pytest.fixture(params=["sqlite", "postgres"])
def migrated(request: pytest.FixtureRequest) -> ApprovalStore:
    store: ApprovalStore = request.getfixturevalue(f"{request.param}_version_1")
    return store


def test_requests_of_version_1_read_back_as_they_were(migrated: ApprovalStore) -> None:
    assert migrated.get("apr_old") == OLD_PENDING
    assert migrated.get("apr_denied") == OLD_DENIED


def test_a_second_proposer_of_a_call_pending_in_version_1_files_its_own(migrated: ApprovalStore) -> None:
    mine = migrated.create(request(request_id="apr_new", details={"limit": 5, "proposed_by": MALLORY}))
    assert mine.id == "apr_new"
    again = migrated.create(request(request_id="apr_again", details={"limit": 5, "proposed_by": ALICE}))
    assert again.id == "apr_old"
    assert {r.id for r in migrated.list(status="pending")} == {"apr_old", "apr_new"}


def test_a_decided_request_of_version_1_frees_its_binding(migrated: ApprovalStore) -> None:
    denied = migrated.create(request(request_id="apr_x", amount=99, details={"proposed_by": MALLORY}))
    assert denied.id == "apr_x"
    again = migrated.create(request(request_id="apr_y", amount=99, details={"proposed_by": MALLORY}))
    assert again.id == "apr_x"
