"""Ledger entries and the store interface (DESIGN §6).

One entry per logical action ``(run_id, node_id)``, keyed by the idempotency key the runtime mints.
The entry is durable before the tool is called; its state records what is known of the outcome::

    accepted ──► dispatched ──► committed (remote id, result)
                           ├──► failed (definitely not committed)
                           └──► unknown (timeout, crash, lost response)
    unknown ── status query ──► committed | not_committed (dispatch again, same key) | unknown_commit
    unknown_commit ── a person reconciles ──► committed | failed
"""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Literal, Protocol, runtime_checkable

from actionspace.ledger import _sqlite_null  # noqa: F401  (SQL NULL bound without a failed lookup)

__all__ = [
    "IN_FLIGHT",
    "STATES",
    "TERMINAL",
    "TRANSITIONS",
    "UNRESOLVED",
    "UNSETTLED",
    "BeginsUnlessPending",
    "Begun",
    "Encoded",
    "GuardsAttempts",
    "Identity",
    "LedgerEntry",
    "LedgerState",
    "LedgerStore",
    "ListsTenantEntries",
    "begun_new",
    "resendable",
    "with_identity",
]

LedgerState = Literal["accepted", "dispatched", "committed", "failed", "unknown", "unknown_commit"]
STATES: tuple[LedgerState, ...] = (
    "accepted",
    "dispatched",
    "committed",
    "failed",
    "unknown",
    "unknown_commit",
)
TERMINAL: frozenset[str] = frozenset({"committed", "failed"})
UNSETTLED: frozenset[str] = frozenset({"dispatched", "unknown", "unknown_commit"})
"""States of an action whose outcome is not established: an identical proposal is never sent."""
UNRESOLVED: frozenset[str] = frozenset({"dispatched", "unknown", "unknown_commit"})
"""States a purge never removes and ``recover()`` works on (``unknown_commit`` waits for a person)."""
IN_FLIGHT: frozenset[str] = frozenset({"accepted", "dispatched", "unknown"})

TRANSITIONS: Mapping[str, frozenset[str]] = {
    "accepted": frozenset({"dispatched", "failed"}),
    # dispatched → accepted: the status query proved it was not committed; it may be sent again.
    "dispatched": frozenset({"committed", "failed", "unknown", "accepted"}),
    "unknown": frozenset({"committed", "accepted", "unknown_commit", "failed"}),
    "unknown_commit": frozenset({"committed", "failed"}),
    "committed": frozenset(),
    # failed → dispatched: the tool answered with a retryable failure (transient, rate_limited), so it
    # did not commit; a later call of the same node sends again with the same key.
    "failed": frozenset({"dispatched"}),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class LedgerEntry:
    """What the ledger knows of one logical action."""

    key: str
    """``as1_`` + 32 hex (see ``actionspace.ledger.keys.idempotency_key``)."""
    run_id: str
    node_id: str
    tool: str
    """``name@version`` the action was accepted with; it finishes on that version."""
    args_digest: str
    """sha256 hex of the RFC 8785 canonical arguments, strings in NFC (``ledger.keys.args_digest``)."""
    arguments: Mapping[str, Any]
    state: LedgerState = "accepted"
    attempts: int = 0
    """How many times the tool was sent this action."""
    created_at: float = field(default_factory=time.time)
    updated_at: float = field(default_factory=time.time)
    remote_id: str | None = None
    observation: Mapping[str, Any] | None = None
    """The committed observation (``Observation.to_dict()``), returned again to a repeated call."""
    error: Mapping[str, Any] | None = None
    """The ``ActionError.to_dict()`` of a failed or unknown outcome."""
    resolution: Mapping[str, Any] | None = None
    """A person's reconciliation: ``{"by", "reason", "at", "outcome"}``."""

    def evolve(self, **changes: Any) -> LedgerEntry:
        """A copy with ``changes`` applied and ``updated_at`` now (``replace``, unrolled).

        Raises ``TypeError`` for a name that is not a field, as ``replace`` would.
        """
        new: LedgerEntry = _new_entry(LedgerEntry)
        for name, put in _SLOTS:  # the frozen __init__'s fourteen object.__setattr__ calls, skipped
            put(new, getattr(self, name))
        _set_updated_at(new, time.time())
        for name, value in changes.items():
            put = _SETTERS.get(name)
            if put is None:
                raise TypeError(f"LedgerEntry has no field {name!r}")
            put(new, value)
        return new

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "run_id": self.run_id,
            "node_id": self.node_id,
            "tool": self.tool,
            "args_digest": self.args_digest,
            "arguments": dict(self.arguments),
            "state": self.state,
            "attempts": self.attempts,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "remote_id": self.remote_id,
            "observation": dict(self.observation) if self.observation is not None else None,
            "error": dict(self.error) if self.error is not None else None,
            "resolution": dict(self.resolution) if self.resolution is not None else None,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LedgerEntry:
        return cls(
            key=str(data["key"]),
            run_id=str(data["run_id"]),
            node_id=str(data["node_id"]),
            tool=str(data["tool"]),
            args_digest=str(data["args_digest"]),
            arguments=dict(data.get("arguments") or {}),
            state=data["state"],
            attempts=int(data.get("attempts", 0)),
            created_at=float(data["created_at"]),
            updated_at=float(data["updated_at"]),
            remote_id=data.get("remote_id"),
            observation=data.get("observation"),
            error=data.get("error"),
            resolution=data.get("resolution"),
        )


class Encoded(dict[str, Any]):
    """A JSON column's value (an entry's ``observation``) with ``text``, the JSON a store writes for
    it, made beside it by code that knows its shape (a durable write's committed observation,
    pipeline/_write_parts.py), so the outcome's write does not encode it again. ``text`` is ASCII
    and is ``strict_dumps`` of the mapping (its keys in their order), what the SQLite store's
    ``to_json`` writes for it. Anything else sees an ordinary ``dict``; a copy is one."""

    __slots__ = ("text",)

    text: str


Identity = tuple[str, str, str, str]
"""(run_id, node_id, tool, args_digest): what an entry was begun as; no transition changes it."""


def with_identity(entry: LedgerEntry, identity: Identity) -> LedgerEntry:
    """``entry`` as stored by a transition: with the identity its action was begun with."""
    if (entry.run_id, entry.node_id, entry.tool, entry.args_digest) == identity:
        return entry
    run_id, node_id, tool, digest = identity
    return entry.evolve(
        run_id=run_id, node_id=node_id, tool=tool, args_digest=digest, updated_at=entry.updated_at
    )


_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(LedgerEntry))
_SETTERS: dict[str, Any] = {name: LedgerEntry.__dict__[name].__set__ for name in _FIELDS}
"""Each field's slot setter (a frozen dataclass's own ``__setattr__`` refuses)."""
_SLOTS: tuple[tuple[str, Any], ...] = tuple(_SETTERS.items())
_set_updated_at = _SETTERS["updated_at"]
_new_entry = object.__new__


@dataclass(frozen=True, slots=True)
class Begun:
    """The result of :meth:`LedgerStore.begin`: the stored entry and whether this call created it."""

    entry: LedgerEntry
    created: bool
    pending: LedgerEntry | None = None
    """From :meth:`BeginsUnlessPending.begin_unless_pending`: the unsettled identical action of
    the run under another key that stopped the insert (then ``entry`` is it, ``created`` False)."""


_BEGUN_FIELDS = ("entry", "created", "pending")
if tuple(f.name for f in fields(Begun)) != _BEGUN_FIELDS:
    raise AssertionError(f"Begun's fields are not those begun_new sets: {[f.name for f in fields(Begun)]}")
_set_begun_entry, _set_created, _set_pending = (Begun.__dict__[name].__set__ for name in _BEGUN_FIELDS)


def begun_new(entry: LedgerEntry) -> Begun:
    """``Begun(entry, True, None)`` (a store's answer for the entry it just inserted), its slots
    set by their own setters: the frozen class's ``__init__`` sets each through
    ``object.__setattr__``, three lookups and calls more on every durable call."""
    begun: Begun = _new_entry(Begun)
    _set_begun_entry(begun, entry)
    _set_created(begun, True)
    _set_pending(begun, None)
    return begun


@runtime_checkable
class LedgerStore(Protocol):
    """Durable ledger. Implementations: memory (tests), SQLite (default), PostgreSQL.

    Every method is atomic. Uniqueness of ``(run_id, node_id)`` and of ``key`` is enforced by the
    store itself (the database's constraints), never by a lock held in one Python process.
    """

    def begin(self, entry: LedgerEntry) -> Begun:
        """Insert ``entry`` (``accepted``) unless its ``(run_id, node_id)`` exists; return the stored one."""
        ...

    def transition(self, key: str, expected: Sequence[str], entry: LedgerEntry) -> LedgerEntry | None:
        """Compare-and-set: store ``entry`` only if the current state is in ``expected``.

        The entry keeps the identity it was begun with (:func:`with_identity`). Returns the stored
        entry, or None when the state had moved (another process won). Raises ``ValueError`` when
        ``entry.key`` is not ``key``.
        """
        ...

    def get(self, key: str) -> LedgerEntry | None: ...

    def get_node(self, run_id: str, node_id: str) -> LedgerEntry | None: ...

    def entries_of(self, run_id: str, node_ids: Collection[str]) -> dict[str, LedgerEntry]:
        """The stored entries of ``node_ids`` in ``run_id``, by node id, read at once.

        Nodes without an entry are left out.
        """
        ...

    def pending_action(self, run_id: str, tool: str, args_digest: str) -> LedgerEntry | None:
        """The oldest entry of ``run_id`` for ``tool`` (name@version) and ``args_digest`` in UNSETTLED."""
        ...

    def list(self, *, state: str | None = None, limit: int = 100) -> list[LedgerEntry]:
        """Most recently updated first."""
        ...

    def purge(self, *, older_than: float) -> int:
        """Delete entries last updated before ``older_than`` (unix s) that are committed or failed.

        Never removes an unresolved entry. Returns how many were removed.
        """
        ...

    def close(self) -> None: ...


@runtime_checkable
class BeginsUnlessPending(Protocol):
    """A store that checks for an unsettled identical action inside the insert's own transaction."""

    def begin_unless_pending(self, entry: LedgerEntry) -> Begun:
        """:meth:`LedgerStore.begin`, unless :meth:`LedgerStore.pending_action` of the entry's run,
        tool and digest finds an entry with another key: then nothing is written and that entry
        comes back as ``pending``."""
        ...


@runtime_checkable
class GuardsAttempts(Protocol):
    """A store whose compare-and-set can also name the send an outcome was established for."""

    def transition_at(self, key: str, state: str, attempts: int, entry: LedgerEntry) -> LedgerEntry | None:
        """:meth:`LedgerStore.transition`, only while ``key`` is still in ``state`` after exactly
        ``attempts`` sends. Every send counts one more attempt, so what was concluded about one
        send (a status query's answer) never lands on a later send of the same action.

        Returns the stored entry, or None when the entry had moved on.
        """
        ...


def resendable(entry: LedgerEntry) -> bool:
    """A failure that did not commit, so a new call may send again: one the tool reported as
    retryable, or a send withdrawn before its tool was called (``cancelled``, ``sent`` False: by a
    close, or by its caller's cancel while it waited for a worker thread)."""
    error = entry.error
    if error is None:
        return False
    category = error.get("category")
    if category == "cancelled":
        details = error.get("details")
        return isinstance(details, dict) and details.get("sent") is False
    return category in ("transient", "rate_limited")


@runtime_checkable
class ListsTenantEntries(Protocol):
    """A store that lists the entries of one tenant's runs in its query (every store shipped here
    does, once it knows the tenants of runs): a quiet tenant's page is found behind any number of
    other tenants' entries, at the cost of a page. A run's tenant is that of its first
    ``run_started``."""

    def tenant_entries(
        self, tenant: str | None, *, state: str | None = None, limit: int = 100
    ) -> list[LedgerEntry] | None:
        """At most ``limit`` entries of the runs of ``tenant`` (None: of runs without one), in
        ``state`` if given, most recently updated first, ties by key; None when the store cannot
        tell the tenants of its runs (their trace is elsewhere): the caller filters another listing."""
        ...
