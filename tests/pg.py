"""A throwaway PostgreSQL cluster for the PostgreSQL store tests (DESIGN §10: nothing is mocked).

``pg_url`` starts one cluster per test session (per xdist worker) from the binaries of the Debian
``postgresql`` package, listening on a unix socket only, and yields the URL of an empty database.
Without the binaries the tests are skipped, except under ``CI``, where that is an error:
``scripts/install-postgres.sh`` installs them.
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import psycopg
import pytest

__all__ = ["PG_START_SECONDS", "fresh_schema", "pg_url"]

DATABASE = "actionspace_test"
PG_ROOT = Path("/usr/lib/postgresql")
OS_USER = "postgres"
COMMAND_TIMEOUT_S = 120.0

PG_START_SECONDS: list[float] = []
"""How long the cluster of this session took to initialise and start (seconds), once started."""


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """``postgresql://postgres@/actionspace_test?host=<socket dir>`` of a cluster of this session."""
    bin_dir = _bin_dir()
    if bin_dir is None:
        reason = f"no PostgreSQL server binaries (initdb, pg_ctl) under {PG_ROOT}/*/bin"
        if os.environ.get("CI"):
            pytest.fail(f"{reason}; CI must run scripts/install-postgres.sh first", pytrace=False)
        pytest.skip(f"{reason}; run scripts/install-postgres.sh")
    root = Path(tempfile.mkdtemp(prefix="actionspace-pg-"))
    started = False
    try:
        as_owner = _owner_prefix(root)
        data, log = root / "data", root / "postgres.log"
        began = time.monotonic()
        initdb = [str(bin_dir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust"]
        # A fixed encoding: the host's locale may be C, whose SQL_ASCII would garble the tests' text.
        _run([*as_owner, *initdb, "--no-sync", "--encoding=UTF8", "--locale=C.UTF-8"])
        options = f"-k {root} -c listen_addresses='' -c fsync=on"
        started = True
        pg_ctl = [str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(log)]
        _run([*as_owner, *pg_ctl, "-o", options, "-w", "start"], log=log)
        with psycopg.connect(host=str(root), user="postgres", dbname="postgres", autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{DATABASE}"')
        PG_START_SECONDS.append(time.monotonic() - began)
        yield f"postgresql://postgres@/{DATABASE}?host={quote(str(root), safe='')}"
    finally:
        if started:
            stop = [str(bin_dir / "pg_ctl"), "-D", str(root / "data"), "-m", "immediate", "stop"]
            subprocess.run(
                [*_owner_prefix(root), *stop], capture_output=True, timeout=COMMAND_TIMEOUT_S, check=False
            )
        shutil.rmtree(root, ignore_errors=True)


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


def _bin_dir() -> Path | None:
    found = [d for d in PG_ROOT.glob("*/bin") if (d / "initdb").is_file() and (d / "pg_ctl").is_file()]
    return max(found, key=lambda d: _version(d.parent.name), default=None)


def _version(name: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", name))


def _owner_prefix(root: Path) -> list[str]:
    """Run as the ``postgres`` OS user when we are root (initdb refuses root); else as ourselves."""
    if os.geteuid() != 0:
        return []
    user = pwd.getpwnam(OS_USER)
    os.chown(root, user.pw_uid, user.pw_gid)
    return ["runuser", "-u", OS_USER, "--"]


def _run(command: list[str], *, log: Path | None = None) -> None:
    done = subprocess.run(command, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, check=False)
    if done.returncode != 0:
        server_log = log.read_text(errors="replace")[-4000:] if log is not None and log.exists() else ""
        raise RuntimeError(
            f"{' '.join(command)} exited with {done.returncode}:\n{done.stdout}{done.stderr}{server_log}"
        )
