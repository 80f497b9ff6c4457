"""A throwaway PostgreSQL cluster from the installed server binaries, for tests and benchmarks.

``throwaway_cluster()`` runs ``initdb`` and ``pg_ctl start`` in a temp folder (as the ``postgres``
OS user when run as root), listening on a unix socket only, creates one database, yields its URL,
and stops and removes everything afterwards. ``scripts/install-postgres.sh`` installs the binaries
(Debian's ``postgresql`` package).
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

__all__ = ["PG_ROOT", "bin_dir", "throwaway_cluster"]

PG_ROOT = Path("/usr/lib/postgresql")
OS_USER = "postgres"
COMMAND_TIMEOUT_S = 120.0


def bin_dir() -> Path | None:
    """The newest ``/usr/lib/postgresql/<v>/bin`` holding ``initdb`` and ``pg_ctl``, or None."""
    found = [d for d in PG_ROOT.glob("*/bin") if (d / "initdb").is_file() and (d / "pg_ctl").is_file()]
    return max(found, key=lambda d: tuple(int(p) for p in re.findall(r"\d+", d.parent.name)), default=None)


@contextmanager
def throwaway_cluster(database: str = "actionspace_test") -> Iterator[str]:
    """Yield ``postgresql://postgres@/<database>?host=<socket dir>``; raises RuntimeError without binaries."""
    import psycopg

    binaries = bin_dir()
    if binaries is None:
        raise RuntimeError(
            f"no PostgreSQL server binaries under {PG_ROOT}/*/bin; run scripts/install-postgres.sh"
        )
    root = Path(tempfile.mkdtemp(prefix="actionspace-pg-"))
    started = False
    try:
        as_owner = _owner_prefix(root)
        data, log = root / "data", root / "postgres.log"
        initdb = [str(binaries / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust"]
        # A fixed encoding: the host's locale may be C, whose SQL_ASCII would garble text.
        _run([*as_owner, *initdb, "--no-sync", "--encoding=UTF8", "--locale=C.UTF-8"])
        options = f"-k {root} -c listen_addresses='' -c fsync=on"
        started = True
        pg_ctl = [str(binaries / "pg_ctl"), "-D", str(data), "-l", str(log)]
        _run([*as_owner, *pg_ctl, "-o", options, "-w", "start"], log=log)
        with psycopg.connect(host=str(root), user="postgres", dbname="postgres", autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{database}"')
        yield f"postgresql://postgres@/{database}?host={quote(str(root), safe='')}"
    finally:
        if started:
            stop = [str(binaries / "pg_ctl"), "-D", str(root / "data"), "-m", "immediate", "stop"]
            subprocess.run(
                [*_owner_prefix(root), *stop], capture_output=True, timeout=COMMAND_TIMEOUT_S, check=False
            )
        shutil.rmtree(root, ignore_errors=True)


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
