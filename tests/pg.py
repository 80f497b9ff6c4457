"""A throwaway PostgreSQL cluster for the PostgreSQL store tests (DESIGN §10: nothing is mocked).

``pg_url`` starts one cluster per test session (per xdist worker) from the binaries of the Debian
``postgresql`` package, listening on a unix socket only, and yields the URL of an empty database.
Without the binaries the tests are skipped, except under ``CI``, where that is an error:
``scripts/install-postgres.sh`` installs them.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import psycopg
import pytest

from actionspace.pgcluster import PG_ROOT, bin_dir, throwaway_cluster

__all__ = ["PG_START_SECONDS", "STORES", "fresh_schema", "pg_url", "store_url"]

DATABASE = "actionspace_test"

PG_START_SECONDS: list[float] = []
"""How long the cluster of this session took to initialise and start (seconds), once started."""


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """``postgresql://postgres@/actionspace_test?host=<socket dir>`` of a cluster of this session."""
    if bin_dir() is None:
        reason = f"no PostgreSQL server binaries (initdb, pg_ctl) under {PG_ROOT}/*/bin"
        if os.environ.get("CI"):
            pytest.fail(f"{reason}; CI must run scripts/install-postgres.sh first", pytrace=False)
        pytest.skip(f"{reason}; run scripts/install-postgres.sh")
    began = time.monotonic()
    with throwaway_cluster(DATABASE) as url:
        PG_START_SECONDS.append(time.monotonic() - began)
        yield url


def fresh_schema(url: str) -> Iterator[str]:
    """Create an empty schema and yield ``url`` with it first on the search path; drop it after.

    Gives each test tables of its own in the session's one database.
    """
    schema = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    try:
        yield f"{url}&options={quote(f'-csearch_path={schema}', safe='')}"
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


STORES = ["memory", "sqlite", "postgres"]
"""The kinds of store :func:`store_url` makes, for ``@pytest.fixture(params=STORES)``."""


def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The URL of a fresh store of the kind ``request.param`` (one of :data:`STORES`): memory, a
    SQLite file under ``tmp_path``, or a schema of its own in the session's PostgreSQL cluster."""
    if request.param == "memory":
        yield "memory://"
    elif request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'a.db'}"
    else:
        yield from fresh_schema(request.getfixturevalue("pg_url"))
