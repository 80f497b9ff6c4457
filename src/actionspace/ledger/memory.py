"""In-memory ledger and approval stores: for tests; lost with the process."""

from __future__ import annotations

import builtins
import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from actionspace.approval.requests import ApprovalRequest
from actionspace.ledger.entries import TERMINAL, UNSETTLED, Begun, LedgerEntry, with_identity

__all__ = ["MemoryApprovalStore", "MemoryLedgerStore", "RunTenant"]

RunTenant = Callable[[str], "str | None"]
"""The tenant of a run (of its first ``run_started``), as the trace store beside the store knows it."""


class MemoryLedgerStore:
    """A dict under a lock; same semantics as the database stores."""

    def __init__(self) -> None:
        self._by_key: dict[str, LedgerEntry] = {}
        self._by_node: dict[tuple[str, str], str] = {}
        self._unsettled: dict[tuple[str, str, str], dict[str, None]] = {}
        """(run, tool, argument digest) → keys of those identical actions of the run that are in
        UNSETTLED, for ``pending_action``: kept as each entry is begun and moved (a purge removes
        only settled entries), so one write's work does not grow with the run's settled ones."""
        self._lock = threading.Lock()
        self.run_tenant: RunTenant | None = None
        """Where :meth:`tenant_entries` reads the tenant of a run (set by whoever put the trace
        store beside this one); None: it cannot tell (answers None)."""

    def begin(self, entry: LedgerEntry) -> Begun:
        with self._lock:
            key = self._by_node.get((entry.run_id, entry.node_id))
            if key is not None:
                return Begun(self._by_key[key], False)
            existing = self._by_key.get(entry.key)
            if existing is not None:
                return Begun(existing, False)
            self._by_key[entry.key] = entry
            self._by_node[(entry.run_id, entry.node_id)] = entry.key
            if entry.state in UNSETTLED:
                self._unsettled.setdefault(_action(entry), {})[entry.key] = None
            return Begun(entry, True)

    def transition(self, key: str, expected: Sequence[str], entry: LedgerEntry) -> LedgerEntry | None:
        _same_key(key, entry)
        with self._lock:
            current = self._by_key.get(key)
            if current is None or current.state not in expected:
                return None
            return self._store(current, entry)

    def transition_at(self, key: str, state: str, attempts: int, entry: LedgerEntry) -> LedgerEntry | None:
        _same_key(key, entry)
        with self._lock:
            current = self._by_key.get(key)
            if current is None or current.state != state or current.attempts != attempts:
                return None
            return self._store(current, entry)

    def _store(self, current: LedgerEntry, entry: LedgerEntry) -> LedgerEntry:
        identity = (current.run_id, current.node_id, current.tool, current.args_digest)
        stored = self._by_key[current.key] = with_identity(entry, identity)
        was, now = current.state in UNSETTLED, stored.state in UNSETTLED
        if now and not was:
            self._unsettled.setdefault(_action(current), {})[current.key] = None
        elif was and not now:
            self._unmark(current)
        return stored

    def _unmark(self, entry: LedgerEntry) -> None:
        action = _action(entry)
        keys = self._unsettled.get(action)
        if keys is not None:
            keys.pop(entry.key, None)
            if not keys:
                del self._unsettled[action]

    def get(self, key: str) -> LedgerEntry | None:
        with self._lock:
            return self._by_key.get(key)

    def get_node(self, run_id: str, node_id: str) -> LedgerEntry | None:
        with self._lock:
            key = self._by_node.get((run_id, node_id))
            return self._by_key.get(key) if key is not None else None

    def entries_of(self, run_id: str, node_ids: Collection[str]) -> dict[str, LedgerEntry]:
        with self._lock:
            keys = {n: self._by_node.get((run_id, n)) for n in node_ids}
            return {n: self._by_key[k] for n, k in keys.items() if k is not None}

    def pending_action(self, run_id: str, tool: str, args_digest: str) -> LedgerEntry | None:
        with self._lock:
            keys = self._unsettled.get((run_id, tool, args_digest))
            if keys is None:  # the common answer: no identical action unsettled
                return None
            found = [self._by_key[k] for k in keys]
        return min(found, key=lambda e: (e.created_at, e.key), default=None)

    def list(self, *, state: str | None = None, limit: int = 100) -> list[LedgerEntry]:
        with self._lock:
            entries = [e for e in self._by_key.values() if state is None or e.state == state]
        entries.sort(key=lambda e: e.key)  # ties of time in key order, as the databases break them
        entries.sort(key=lambda e: e.updated_at, reverse=True)
        return entries[:limit]

    def tenant_entries(
        self, tenant: str | None, *, state: str | None = None, limit: int = 100
    ) -> builtins.list[LedgerEntry] | None:
        """See ``ListsTenantEntries``: the entries are read as :meth:`list` reads them (every one:
        this store keeps no order), each run's tenant asked of :attr:`run_tenant` once."""
        of_run = self.run_tenant
        if of_run is None:
            return None
        with self._lock:
            entries = [e for e in self._by_key.values() if state is None or e.state == state]
        tenants: dict[str, str | None] = {}
        for e in entries:
            if e.run_id not in tenants:
                tenants[e.run_id] = of_run(e.run_id)
        mine = [e for e in entries if tenants[e.run_id] == tenant]
        mine.sort(key=lambda e: e.key)
        mine.sort(key=lambda e: e.updated_at, reverse=True)
        return mine[:limit]

    def purge(self, *, older_than: float) -> int:
        with self._lock:
            old = [e for e in self._by_key.values() if e.state in TERMINAL and e.updated_at < older_than]
            for e in old:
                del self._by_key[e.key]
                self._by_node.pop((e.run_id, e.node_id), None)
            return len(old)

    def close(self) -> None:
        pass


def _same_key(key: str, entry: LedgerEntry) -> None:
    if entry.key != key:
        raise ValueError(f"transition of {key} was given the entry of {entry.key}")


def _action(entry: LedgerEntry) -> tuple[str, str, str]:
    return entry.run_id, entry.tool, entry.args_digest


class MemoryApprovalStore:
    """Approval requests in a dict under a lock."""

    def __init__(self) -> None:
        self._requests: dict[str, ApprovalRequest] = {}
        self._lock = threading.Lock()
        self.run_tenant: RunTenant | None = None
        """Where :meth:`tenant_requests` reads the tenant of a run (as ``MemoryLedgerStore``'s)."""

    def create(self, request: ApprovalRequest) -> ApprovalRequest:
        with self._lock:
            for existing in self._requests.values():
                pending = existing.status == "pending" and existing.binding == request.binding
                if pending and existing.pending_key == request.pending_key:
                    return existing
            self._requests[request.id] = request
            return request

    def get(self, request_id: str) -> ApprovalRequest | None:
        with self._lock:
            return self._requests.get(request_id)

    def find(self, run_id: str, tool: str, args_digest: str) -> list[ApprovalRequest]:
        binding = (run_id, tool, args_digest)
        with self._lock:
            found = [r for r in self._requests.values() if r.binding == binding]
        found.sort(key=lambda r: r.created_at, reverse=True)
        return found

    def list_approved(self, *, expired: bool, now: float, limit: int = 100) -> list[ApprovalRequest]:
        """See :class:`~actionspace.approval.requests.ListsApproved`."""
        with self._lock:
            found = [
                r
                for r in self._requests.values()
                if r.status == "approved" and (r.expires_at is not None and now >= r.expires_at) == expired
            ]
        found.sort(key=lambda r: r.created_at, reverse=True)
        return found[:limit]

    def list_of_runs(self, run_ids: Sequence[str], *, status: str | None = None) -> list[ApprovalRequest]:
        """See :class:`~actionspace.approval.requests.ListsOfRuns`."""
        runs = set(run_ids)
        with self._lock:
            found = [r for r in self._requests.values() if r.run_id in runs and status in (None, r.status)]
        found.sort(key=lambda r: r.created_at, reverse=True)
        return found

    def list(self, *, status: str | None = None, limit: int = 100) -> list[ApprovalRequest]:
        with self._lock:
            found = [r for r in self._requests.values() if status is None or r.status == status]
        found.sort(key=lambda r: r.created_at, reverse=True)
        return found[:limit]

    def tenant_requests(
        self,
        tenant: str | None,
        *,
        status: str | None = None,
        limit: int = 100,
        expired: bool | None = None,
        now: float = 0.0,
    ) -> builtins.list[ApprovalRequest] | None:
        """See :class:`~actionspace.approval.requests.ListsTenantRequests`."""
        of_run = self.run_tenant
        if of_run is None:
            return None
        with self._lock:
            found = [r for r in self._requests.values() if status is None or r.status == status]
        if status == "approved" and expired is not None:
            found = [r for r in found if (r.expires_at is not None and now >= r.expires_at) == expired]
        tenants: dict[str, str | None] = {}
        mine = []
        for r in found:
            proposed: Any = r.details.get("proposed_by")
            if isinstance(proposed, Mapping) and "tenant" in proposed:
                of = _as_tenant(proposed.get("tenant"))
            else:
                if r.run_id not in tenants:
                    tenants[r.run_id] = of_run(r.run_id)
                of = tenants[r.run_id]
            if of == tenant:
                mine.append(r)
        mine.sort(key=lambda r: r.id)
        mine.sort(key=lambda r: r.created_at, reverse=True)
        return mine[:limit]

    def update(
        self, request_id: str, expected: Sequence[str], request: ApprovalRequest
    ) -> ApprovalRequest | None:
        with self._lock:
            current = self._requests.get(request_id)
            if current is None or current.status not in expected:
                return None
            self._requests[request_id] = request
            return request

    def close(self) -> None:
        pass


def _as_tenant(value: object) -> str | None:
    """A recorded tenant as the other stores keep it: text, JSON null as None, a bool as Python
    writes it; anything else as its text (no principal's tenant: see ``service/scoping.py``)."""
    return None if value is None else str(value)
