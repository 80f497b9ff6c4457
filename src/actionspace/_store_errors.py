"""Whether a store's driver error means its database did not answer (a request that may succeed
when asked again); re-exported by :mod:`actionspace.errors`."""

from __future__ import annotations

import sqlite3
import sys
from typing import Final

__all__ = ["store_unavailable"]

_SQLITE_BUSY: Final = ("locked", "busy", "disk i/o error", "unable to open")
"""What SQLite says when the file did not answer (another writer past the busy timeout, the disk)."""


def store_unavailable(exc: BaseException) -> bool:
    """True when ``exc`` is a store's driver saying its database did not answer: SQLite locked or
    busy past its timeout, or its file unreadable; PostgreSQL's connection lost or refused, or its
    pool out of connections. A request that failed so may succeed when asked again."""
    if isinstance(exc, sqlite3.OperationalError):
        text = str(exc).lower()
        return any(word in text for word in _SQLITE_BUSY)
    psycopg = sys.modules.get("psycopg")  # loaded only where a PostgreSQL store is in use
    return psycopg is not None and isinstance(exc, psycopg.OperationalError)
