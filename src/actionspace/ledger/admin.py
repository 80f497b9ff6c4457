"""A runtime's ledger administration: recovery, settling by hand and purging, on the runtime's clock."""

from __future__ import annotations

from collections.abc import Callable

from actionspace._crash import point
from actionspace.catalog.registry import Catalog
from actionspace.ledger.entries import LedgerEntry, LedgerStore
from actionspace.ledger.recover import (
    FindsSpecs,
    Record,
    RecoveryReport,
    Shape,
    recover,
    recover_key,
    resolve_by_hand,
)
from actionspace.types import Clock

__all__ = ["DEFAULT_RETENTION_S", "LedgerAdmin"]

DEFAULT_RETENTION_S = 24 * 3600.0
"""Ledger records live at least this long: longer than any retry window."""


class LedgerAdmin:
    """Settles and prunes one ledger; what it settles is traced through ``record``.

    ``specs`` returns, at each recovery, where the tools of the entries are looked up; ``shape``
    makes a settled result the observation's data (see :mod:`actionspace.ledger.recover`).
    """

    __slots__ = ("clock", "ledger", "record", "shape", "specs")

    def __init__(
        self,
        ledger: LedgerStore,
        *,
        specs: Callable[[], Catalog | FindsSpecs],
        record: Record,
        shape: Shape,
        clock: Clock,
    ) -> None:
        self.ledger = ledger
        self.specs = specs
        self.record = record
        self.shape = shape
        self.clock = clock

    def recover(self, *, min_age_s: float = 0.0, live_holders: bool = False) -> RecoveryReport:
        """:func:`~actionspace.ledger.recover.recover` of the entries untouched for ``min_age_s`` s
        (``live_holders``: and for their tool's ``holder_window``, at a process's start, unless no
        other process of the store is alive)."""
        return recover(
            self.ledger,
            self.specs(),
            self.record,
            min_age_s=min_age_s,
            shape=self.shape,
            now=self.clock.time(),
            live_holders=live_holders,
        )

    def recover_key(self, key: str) -> LedgerEntry | None:
        """:func:`~actionspace.ledger.recover.recover_key`: settle the one entry ``key`` whose holder
        is gone (the commit protocol decided it), as recovery settles any."""
        specs, now = self.specs(), self.clock.time()
        return recover_key(self.ledger, specs, self.record, key, shape=self.shape, now=now)

    def resolve(self, key: str, *, outcome: str, by: str, reason: str) -> LedgerEntry:
        """:func:`~actionspace.ledger.recover.resolve_by_hand` of ``key``."""
        return resolve_by_hand(
            self.ledger, key, outcome=outcome, by=by, reason=reason, record=self.record, shape=self.shape
        )

    def purge(self, *, retention_s: float = DEFAULT_RETENTION_S) -> int:
        """Delete settled entries older than ``retention_s`` seconds by the clock; never unresolved ones."""
        point("during_purge")
        return self.ledger.purge(older_than=self.clock.time() - retention_s)
