"""The SQLite plumbing the demo's local services share: one WAL connection per thread, short transactions."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from actionspace.errors import ConfigurationError

__all__ = ["SqliteService"]


class SqliteService:
    """Base of a demo service over one SQLite file (WAL; one connection per thread; tools run on
    worker threads). ``close`` closes every connection any thread opened. A file that cannot be
    opened (its folder refused, not a database) raises ConfigurationError; a missing folder is made."""

    def __init__(self, path: Path, schema: str) -> None:
        self.path = path
        self._local = threading.local()
        self._opened: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._conn().executescript(schema)
        except (OSError, sqlite3.DatabaseError) as exc:
            self.close()
            said = f"{exc.strerror}: {exc.filename}" if isinstance(exc, OSError) and exc.strerror else exc
            raise ConfigurationError(f"cannot open the demo service's database {path}: {said}") from exc

    def _conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA busy_timeout=5000")
            conn.row_factory = sqlite3.Row
            self._local.conn = conn
            with self._lock:
                self._opened.append(conn)
        return conn

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def close(self) -> None:
        """Close every connection opened by any thread."""
        with self._lock:
            opened, self._opened = self._opened, []
        for conn in opened:
            conn.close()
        self._local = threading.local()
