"""Who owns a budget reservation kept in a store, and whether that owner still lives.

A meter kept in a store registers itself in ``budget_owners``: a random id, this host (its boot and
pid namespace, where a pid and its start time name exactly one process), its pid and start time,
and a lease that :class:`Renewal` renews on a timer. Its open reservations are rows of
``budget_reservations``; :mod:`actionspace.ledger.budget_store` reclaims those of an owner that is
provably gone.
"""

from __future__ import annotations

import contextlib
import os
import threading
import weakref
from pathlib import Path
from typing import Final, Protocol

__all__ = [
    "LEASE_S",
    "NOT_SENT",
    "OWNER_TABLES",
    "PG_OWNER_TABLES",
    "RETENTION_S",
    "Renewal",
    "Renewing",
    "started_of",
    "this_host",
]

LEASE_S: Final = 30.0
"""Default lease of a meter's registration, in seconds; renewed every third of it."""
RETENTION_S: Final = 7 * 24 * 3600.0
"""How long a reservation reclaimed from an owner on another host is kept, in seconds, so that the
owner, should it only have stalled, still settles it exactly."""
NOT_SENT: Final = frozenset({"accepted"})
"""Ledger states of an action that was never dispatched (no entry at all means the same)."""

_RESERVATION_COLUMNS: Final = (
    "token TEXT PRIMARY KEY, owner TEXT NOT NULL, run_scope TEXT NOT NULL, principal_scope TEXT NOT NULL,"
    " ledger_key TEXT, calls {n} NOT NULL, items {n} NOT NULL, bytes {n} NOT NULL, money {n} NOT NULL,"
    " sent_calls {n} NOT NULL, sent_items {n} NOT NULL, sent_bytes {n} NOT NULL, sent_money {n} NOT NULL,"
    " reclaimed {n}"
)
_INDEX: Final = "CREATE INDEX IF NOT EXISTS budget_reservations_owner ON budget_reservations (owner)"
OWNER_TABLES: Final = (
    "CREATE TABLE IF NOT EXISTS budget_owners (owner TEXT PRIMARY KEY, host TEXT NOT NULL,"
    " pid INTEGER NOT NULL, started TEXT NOT NULL, expires REAL NOT NULL);\n"
    f"CREATE TABLE IF NOT EXISTS budget_reservations ({_RESERVATION_COLUMNS.format(n='REAL')});\n"
    f"{_INDEX}"
)
"""SQLite's statements, ``;``-separated."""
PG_OWNER_TABLES: Final = (
    "CREATE TABLE IF NOT EXISTS budget_owners (owner TEXT PRIMARY KEY, host TEXT NOT NULL,"
    " pid BIGINT NOT NULL, started TEXT NOT NULL, expires DOUBLE PRECISION NOT NULL)",
    f"CREATE TABLE IF NOT EXISTS budget_reservations ({_RESERVATION_COLUMNS.format(n='DOUBLE PRECISION')})",
    _INDEX,
)


def this_host() -> str:
    """This host's boot and pid namespace, where a pid and its start time name one process; ""
    when unknown (then only the lease tells whether an owner lives)."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        return f"{boot}/{os.readlink('/proc/self/ns/pid')}"
    except OSError:
        return ""


def started_of(pid: int) -> str:
    """The start time (clock ticks since boot) of the running process ``pid`` of this host; ""
    when no such process runs (a zombie no longer runs) or it cannot be read."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    fields = stat[stat.rfind(")") + 2 :].split()  # the name in parentheses may hold spaces
    if len(fields) < 20 or fields[0] in ("Z", "X", "x"):
        return ""
    return fields[19]


class Renewing(Protocol):
    def renew(self) -> int: ...


class Renewal(threading.Thread):
    """Calls ``meter.renew()`` every ``every_s`` seconds until stopped or the meter is garbage."""

    def __init__(self, meter: Renewing, every_s: float) -> None:
        super().__init__(name="actionspace-budget-lease", daemon=True)
        self._meter = weakref.ref(meter)
        self._every_s = every_s
        self._stopped = threading.Event()

    def run(self) -> None:
        while not self._stopped.wait(self._every_s):
            meter = self._meter()
            if meter is None:
                return
            # a failed tick is tried again at the next; a lease lapsed meanwhile is taken again
            with contextlib.suppress(Exception):
                meter.renew()
            del meter

    def stop(self) -> None:
        """Stop renewing; waits (up to 5 s) for a tick under way."""
        self._stopped.set()
        if self.is_alive() and self is not threading.current_thread():
            self.join(5)
