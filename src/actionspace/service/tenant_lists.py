"""Ledger and approval listings of one tenant, asked of the stores for that tenant.

A principal that does not see every tenant is shown its tenant's rows only. A store that lists one
tenant's rows in its query (:class:`~actionspace.ledger.entries.ListsTenantEntries`,
:class:`~actionspace.approval.requests.ListsTenantRequests`: every store shipped here, once it
knows its runs' tenants) is asked for that tenant's rows, so a quiet tenant's page costs a page
however many rows another tenant's flood holds. Every row is still judged as before (its tenant read
from the trace, see :mod:`actionspace.service.scoping`); a store that cannot tell (it answers None:
a ledger file kept apart from its trace) has its listing filtered here, read on four times larger
each time until the page is full.

The memory stores learn their runs' tenants from the memory trace store beside them
(:func:`link_run_tenants`, when the app is made).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from actionspace.approval.requests import ApprovalRequest, ListsTenantRequests
from actionspace.ledger.entries import LedgerEntry, ListsTenantEntries
from actionspace.ledger.memory import MemoryApprovalStore, MemoryLedgerStore
from actionspace.policy.principal import Principal
from actionspace.runtime import Runtime
from actionspace.service.scoping import RunTenants, may_see, request_tenant, sees_all, visible_page
from actionspace.service.views import as_read
from actionspace.trace.memory import MemoryTraceStore

__all__ = ["approvals_page", "ledger_page", "link_run_tenants"]

T = TypeVar("T")


def link_run_tenants(rt: Runtime) -> None:
    """Let memory ledger and approval stores read their runs' tenants from the memory trace store."""
    if not isinstance(rt.trace, MemoryTraceStore):
        return
    for store in (rt.ledger, rt.approvals.store):
        if isinstance(store, MemoryLedgerStore | MemoryApprovalStore) and store.run_tenant is None:
            store.run_tenant = rt.trace.run_tenant


def ledger_page(rt: Runtime, who: Principal, state: str | None, limit: int) -> list[LedgerEntry]:
    """Up to ``limit`` entries ``who`` may see (in ``state`` if given), most recently updated first."""
    tenants = RunTenants(rt.trace)

    def keep(entry: LedgerEntry) -> bool:
        return may_see(who, tenants(entry.run_id))

    def every(n: int) -> list[LedgerEntry]:
        return rt.ledger.list(state=state, limit=n)

    store = rt.ledger
    if sees_all(who) or not isinstance(store, ListsTenantEntries):
        return visible_page(every, keep, limit=limit, scan=limit if sees_all(who) else limit * 4)
    lister, tenant = store, who.tenant
    return _page(lambda n: lister.tenant_entries(tenant, state=state, limit=n), every, keep, limit)


def approvals_page(rt: Runtime, who: Principal, status: str, limit: int, now: float) -> list[ApprovalRequest]:
    """Up to ``limit`` requests ``who`` may see with ``status`` (``all``: any) as read at ``now``
    (``expired`` from ``expires_at``, see :func:`~actionspace.service.views.as_read`), newest first."""
    tenants = RunTenants(rt.trace)

    def keep(request: ApprovalRequest) -> bool:
        return status in ("all", request.status) and may_see(who, request_tenant(request, tenants))

    def every(n: int) -> list[ApprovalRequest]:
        return [as_read(r, now) for r in _stored(rt, status, n, now)]

    store = rt.approvals.store
    if sees_all(who) or not isinstance(store, ListsTenantRequests):
        return visible_page(every, keep, limit=limit, scan=limit if sees_all(who) else limit * 4)
    lister, tenant = store, who.tenant
    timed = status in ("approved", "expired")

    def of_tenant(n: int) -> list[ApprovalRequest] | None:
        got = lister.tenant_requests(
            tenant,
            status="approved" if timed else None if status == "all" else status,
            limit=n,
            expired=(status == "expired") if timed else None,
            now=now,
        )
        return None if got is None else [as_read(r, now) for r in got]

    return _page(of_tenant, every, keep, limit)


def _page(
    of_tenant: Callable[[int], Sequence[T] | None],
    every: Callable[[int], Sequence[T]],
    keep: Callable[[T], bool],
    limit: int,
) -> list[T]:
    """:func:`visible_page` of the tenant's listing; of every row when the store cannot tell."""
    first = of_tenant(limit)
    if first is None:
        return visible_page(every, keep, limit=limit, scan=limit * 4)

    def fetch(n: int) -> Sequence[T]:
        if n == limit:
            return first
        got = of_tenant(n)
        return every(n) if got is None else got

    return visible_page(fetch, keep, limit=limit, scan=limit)


def _stored(rt: Runtime, status: str, n: int, now: float) -> list[ApprovalRequest]:
    """The ``n`` newest requests the store holds with ``status`` (``all``: any) as read at ``now``.

    ``approved`` and ``expired`` are both stored ``approved`` (expiry is read from ``expires_at``):
    the store tells them apart in its query, so however many of one are newer, the other is found.
    """
    if status in ("approved", "expired"):
        return rt.approvals.list_approved(expired=status == "expired", limit=n, now=now)
    return rt.approvals.list(None if status == "all" else status, limit=n)
