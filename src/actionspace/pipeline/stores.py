"""The stores a store URL names: ledger, approvals, trace and artifacts (DESIGN §10).

Artifacts live beside the other stores: in a folder next to a SQLite file, in PostgreSQL for a
``postgresql://`` store (every process sharing it reads them), in memory for ``memory://``."""

from __future__ import annotations

import sqlite3

from actionspace.approval.requests import ApprovalStore
from actionspace.errors import ConfigurationError, store_unavailable
from actionspace.ledger.entries import LedgerStore
from actionspace.ledger.memory import MemoryApprovalStore, MemoryLedgerStore
from actionspace.observation import ArtifactStore, FolderArtifactStore, MemoryArtifactStore
from actionspace.trace.events import TraceStore
from actionspace.trace.memory import MemoryTraceStore

__all__ = ["open_ledger_stores", "open_stores"]


def open_ledger_stores(url: str) -> tuple[LedgerStore, ApprovalStore]:
    if url == "memory://":
        return MemoryLedgerStore(), MemoryApprovalStore()
    from actionspace.ledger.open import open_approvals, open_ledger

    return open_ledger(url), open_approvals(url)


def open_stores(url: str) -> tuple[TraceStore, ArtifactStore]:
    if url == "memory://":
        return MemoryTraceStore(), MemoryArtifactStore()
    from actionspace.trace.store import open_trace_store, sqlite_path

    try:
        store = open_trace_store(url)
    except (OSError, sqlite3.DatabaseError) as exc:
        if (why := _unopenable(url, exc)) is None:
            raise
        raise ConfigurationError(f"cannot open store {url}: {why}") from exc
    if url.startswith("sqlite://"):
        return store, FolderArtifactStore(sqlite_path(url).with_suffix(".artifacts"))
    from actionspace.pipeline._pg_artifacts import PostgresArtifactStore

    try:  # beside the run's state: a process continuing the run reads what its model was shown
        return store, PostgresArtifactStore(url)
    except BaseException:
        store.close()
        raise


def _unopenable(url: str, exc: OSError | sqlite3.DatabaseError) -> str | None:
    """Why no retry opens the SQLite file ``url`` names, and what to name instead; None when the
    failure may pass (the file locked or busy, the system short of handles) or is no SQLite one."""
    from actionspace.trace.store import sqlite_path

    if not url.lower().startswith("sqlite://"):
        return None
    path = sqlite_path(url)
    if path.is_dir():
        return f"{path} is a folder, not a database file; name a file in it, e.g. sqlite:///{path}/actionspace.db"
    if path.parent.exists() and not path.parent.is_dir():
        return f"{path.parent} is not a folder; name a database file in a folder"
    if isinstance(exc, OSError):
        return f"{exc.strerror or exc}: {exc.filename or path}; name a file in a folder you can write to"
    if not store_unavailable(exc) and "not a database" in str(exc):
        return f"{path} is not an SQLite database (another program's file?); name another file"
    return None
