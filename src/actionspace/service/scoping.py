"""Which runs, approval requests and ledger entries a token's principal may see and decide.

A principal sees what belongs to its own tenant: runs its tenant started (the tenant recorded in
``run_started``), approval requests proposed by a principal of its tenant, ledger entries of its
tenant's runs. A principal without a tenant sees what was started without one (a single-tenant
deployment sees everything, as before tenants existed). The scope :data:`ADMIN_SCOPE` (and
``"*"``) sees and decides across tenants. Deciding needs ``approvals:decide`` *and* visibility:
a request of another tenant is answered 404, as if it did not exist.

A tenant is text that every store holds as it is: a string without U+0000 and without an unpaired
surrogate (:func:`valid_tenant`). A token's principal with another tenant is refused when the app
is made (``ConfigurationError``). A tenant recorded as anything else (a number, a bool, an object,
an array, such a string: a trace written by hand, or a run started in code by such a principal)
is no principal's: its runs, requests and entries are seen by :data:`ADMIN_SCOPE` only, alike in
every listing and lookup, on every store.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final, TypeVar

from actionspace._unicode import text_for_postgres
from actionspace.approval.requests import ApprovalRequest
from actionspace.policy.principal import Principal
from actionspace.trace.events import TraceEvent, TraceStore
from actionspace.trace.store_encoding import HEAD_KINDS

__all__ = [
    "ADMIN_SCOPE",
    "MAX_SCAN",
    "NOBODY",
    "RunTenants",
    "heads",
    "heads_of",
    "may_see",
    "request_tenant",
    "sees_all",
    "valid_tenant",
    "visible_page",
]

ADMIN_SCOPE: Final = "admin:all"
"""The scope that sees and decides across tenants."""
MAX_SCAN: Final = 10_000
"""Most runs one read of a run listing asks a store for; a listing narrowed by tenant or principal
reads on, a page at a time, until its page is full or the store has no more runs."""

T = TypeVar("T")

NOBODY: Final = "\x00"
"""What a recorded tenant that is not a :func:`valid_tenant` is read as: no principal's tenant
(none may hold U+0000), so only a principal that sees all tenants sees what it holds."""


def valid_tenant(tenant: object) -> bool:
    """True for a tenant every store keeps as it is: a string without U+0000 or unpaired surrogates."""
    return isinstance(tenant, str) and text_for_postgres(tenant) == tenant


def _as_tenant(recorded: object) -> str | None:
    """A recorded tenant as scoping compares it: None as None, a valid one as itself, else NOBODY."""
    if recorded is None:
        return None
    return recorded if isinstance(recorded, str) and valid_tenant(recorded) else NOBODY


def sees_all(viewer: Principal) -> bool:
    return viewer.allows(ADMIN_SCOPE)


def may_see(viewer: Principal, tenant: str | None) -> bool:
    """True when ``viewer`` may see something of ``tenant`` (None: started without a tenant)."""
    return sees_all(viewer) or tenant == viewer.tenant


def visible_page(
    fetch: Callable[[int], Sequence[T]], keep: Callable[[T], bool], *, limit: int, scan: int
) -> list[T]:
    """Up to ``limit`` of the newest rows ``keep`` accepts, newest first.

    ``fetch(n)`` reads the ``n`` newest rows; it is read again, ``n`` four times larger each time
    (from ``scan``), until the page is full or the store has no more rows: however many newer rows
    ``keep`` refuses (another tenant's), the older rows that belong on the page are found. No bound
    stops it short, since a bound would hide a quiet tenant's rows behind a busy one's; every row
    is read at most about 4/3 times over (docs/performance-notes.md).
    """
    n = max(1, scan)
    while True:
        got = fetch(n)
        kept = [row for row in got if keep(row)]
        if len(kept) >= limit or len(got) < n:
            return kept[:limit]
        n *= 4


def heads(store: TraceStore, run_id: str) -> list[TraceEvent]:
    """The run's ``run_started``/``run_finished`` events, without reading the rest when the store can."""
    read = getattr(store, "heads", None)
    if callable(read):
        found: list[TraceEvent] = read(run_id)
        return found
    return [e for e in store.events(run_id) if e.kind in HEAD_KINDS]


def heads_of(store: TraceStore, run_ids: Sequence[str]) -> dict[str, list[TraceEvent]]:
    """:func:`heads` of several runs, in one query when the store can."""
    read = getattr(store, "heads_many", None)
    if callable(read):
        found: dict[str, list[TraceEvent]] = read(run_ids)
        return found
    return {run_id: heads(store, run_id) for run_id in run_ids}


def _tenant_of(events: Iterable[TraceEvent]) -> str | None:
    for event in events:
        if event.kind == "run_started":
            return _as_tenant(event.data.get("tenant"))
    return None


class RunTenants:
    """Each run's tenant, read once per run from the trace (one lookup per request)."""

    def __init__(self, store: TraceStore) -> None:
        self._store = store
        self._known: dict[str, str | None] = {}

    def __call__(self, run_id: str) -> str | None:
        if run_id not in self._known:
            self._known[run_id] = _tenant_of(heads(self._store, run_id))
        return self._known[run_id]

    def remember(self, run_id: str, events: Iterable[TraceEvent]) -> None:
        self._known[run_id] = _tenant_of(events)


def request_tenant(request: ApprovalRequest, run_tenant: RunTenants) -> str | None:
    """The tenant of an approval request: its proposer's, else its run's."""
    proposed: Any = request.details.get("proposed_by")
    if isinstance(proposed, Mapping) and "tenant" in proposed:
        return _as_tenant(proposed.get("tenant"))
    return run_tenant(request.run_id)
