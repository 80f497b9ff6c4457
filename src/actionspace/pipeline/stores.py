"""The stores a store URL names: ledger, approvals, trace and artifacts (DESIGN §10)."""

from __future__ import annotations

from actionspace.approval.requests import ApprovalStore
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

    store = open_trace_store(url)
    if url.startswith("sqlite://"):
        return store, FolderArtifactStore(sqlite_path(url).with_suffix(".artifacts"))
    return store, MemoryArtifactStore()
