"""Keeping and finding the runs servers drive: lease renewal, and the scan for runs to continue.

:class:`Drives` holds the runs one server drives and their leases; it lets a run whose calls wait
for a person go (released, so that no lease is renewed while people take their time) and claims
it back when the wait ends.

A live server renews its leases on a timer (:class:`Renewer`). On another thread it looks, at start
and every lease period, for runs whose driver is gone although no call of theirs waits for a person
(:class:`LapsedRuns`): a run killed while its tool ran, or between two nodes. It claims such a run
with the claim rule of ``service/continuation.py`` (:func:`~actionspace.service.continuation.adopt`:
exactly one server wins) and, before continuing it, settles what the dead driver left in flight as
recovery does (:func:`settle_in_flight`): nothing is sent whose outcome cannot be established.
"""

from __future__ import annotations

import functools
import logging
import math
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from actionspace.policy.principal import Principal
from actionspace.runtime import Runtime
from actionspace.service import continuation
from actionspace.service.continuation import Submission, continuable, lease_of
from actionspace.trace.events import PagesRuns, RunSummary

__all__ = ["SCAN_HORIZON_S", "SCAN_RUNS", "Drives", "LapsedRuns", "Renewer", "settle_in_flight"]

_log = logging.getLogger("actionspace.service")

SCAN_RUNS = 200
"""Runs per page of the listing a server reads each lease period for runs to continue: the most
recently active ones, and the page after its cursor (see :class:`LapsedRuns`)."""
SCAN_HORIZON_S = 24 * 3600.0
"""A run last active longer ago than this (the ledger's default retention) is not looked at."""
_MAX_REQUESTS = 10_000
"""Approval requests read per scan (pending, and approved) to leave their runs to their approvers."""
_MAX_IN_FLIGHT = 10_000
"""Ledger entries read per state to find a taken run's sends in flight."""
_MAX_REMEMBERED = 100_000
"""Runs whose last reading a scan keeps (to read a quiet run's trace again only once it moved)."""


class Renewer:
    """Renews ``server``'s leases on the runs ``runs()`` names, every third of ``lease_s``, on a
    thread of its own (a run busy in a slow tool, or a loop held up, does not stop it); and, on
    another thread, calls ``scan()`` at once and then every ``lease_s`` (a slow scan delays no
    renewal)."""

    def __init__(
        self,
        rt: Runtime,
        server: str,
        lease_s: float,
        runs: Callable[[], Sequence[str]],
        scan: Callable[[], object] | None = None,
    ) -> None:
        if not lease_s > 0:
            raise ValueError("a driver's lease lasts a positive number of seconds")
        self.rt, self.server, self.lease_s, self._runs, self._scan = rt, server, lease_s, runs, scan
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []

    def until(self) -> float:
        """The end of a lease taken or renewed now."""
        return time.time() + self.lease_s

    def start(self) -> None:
        """Start renewing and scanning (once; a stopped renewer stays stopped)."""
        with self._lock:
            if self._threads or self._stop.is_set():
                return
            self._threads.append(threading.Thread(target=self._loop, name="actionspace-leases", daemon=True))
            if self._scan is not None:
                scans = threading.Thread(target=self._scans, name="actionspace-scan", daemon=True)
                self._threads.append(scans)
            for thread in self._threads:
                thread.start()

    def stop(self, *, timeout: float) -> None:
        """Stop renewing and scanning; a renewal under way ends first (waits at most ``timeout`` s)."""
        self._stop.set()
        with self._lock:
            threads = list(self._threads)
        for thread in threads:
            thread.join(timeout=timeout)

    def _loop(self) -> None:
        while not self._stop.wait(self.lease_s / 3):
            try:
                continuation.renew(self.rt, sorted(self._runs()), self.server, self.until())
            except Exception:  # a store that fails for a moment: the next tick renews again
                _log.warning("actionspace: renewing the leases of server %s failed", self.server)

    def _scans(self) -> None:
        assert self._scan is not None
        while not self._stop.is_set():
            try:
                self._scan()
            except Exception:  # a store that fails for a moment: the next scan reads again
                _log.warning("actionspace: server %s could not look for runs to continue", self.server)
            if self._stop.wait(self.lease_s):
                return


class Drives:
    """The runs one server drives (it started them, or took them over, and they are unfinished):
    the server's id in their traces, and their leases, renewed by a :class:`Renewer`."""

    def __init__(self, rt: Runtime, lease_s: float, scan: Callable[[], object] | None = None) -> None:
        self.rt, self.lease_s, self.server = rt, lease_s, uuid.uuid4().hex
        self._lock = threading.Lock()
        self._runs: set[str] = set()
        self._renewer = Renewer(rt, self.server, lease_s, self.runs, scan)
        self._lapsed = LapsedRuns(rt, lease_s)

    def lapsed(self, live: Callable[[str], bool]) -> list[str]:
        """Runs to take over (see :class:`LapsedRuns`), but those ``live`` here."""
        return self._lapsed(live, time.time())

    def adopt(
        self, run_id: str, admit: Callable[[Principal, Any], bool] | None = None
    ) -> tuple[Submission, Principal] | None:
        """Claim ``run_id``, whose driver is gone (:func:`~actionspace.service.continuation.adopt`):
        its submission and the principal that started it, which it is driven as here from now on;
        None when another server took it, or its principal is not known here as the one that
        started it (it is never continued as another). ``admit(principal, body)`` is asked before the
        claim is written: False leaves the run as it is."""
        started = next((e for e in self.rt.trace.events(run_id) if e.kind == "run_started"), None)
        if started is None or not isinstance(who := started.data.get("principal"), str):
            return None
        tenant = started.data.get("tenant")
        # the run's stored principal; one without it gets no scope, never this runtime's default
        unknown = Principal(id=who, tenant=tenant if isinstance(tenant, str) else None)
        principal = self.rt.run_state(run_id, unknown).principal
        if principal.id != who:
            return None
        room = None if admit is None else functools.partial(admit, principal)
        taken = continuation.adopt(self.rt, run_id, self.server, lease_s=self.lease_s, admit=room)
        if taken is None:
            return None
        self.add(run_id)
        return taken, principal

    def runs(self) -> list[str]:
        with self._lock:
            return sorted(self._runs)

    def __contains__(self, run_id: str) -> bool:
        with self._lock:
            return run_id in self._runs

    def add(self, run_id: str) -> None:
        """``run_id`` is driven here from now on; its lease is renewed."""
        with self._lock:
            self._runs.add(run_id)
        self._renewer.start()

    def discard(self, run_id: str) -> bool:
        """``run_id`` is no longer driven here (it ended, or another server took it); whether it was."""
        with self._lock:
            driven = run_id in self._runs
            self._runs.discard(run_id)
        return driven

    def let_go(self, run_id: str) -> bool:
        """Release ``run_id`` (recorded), whose calls wait for a person, so that its lease is not
        renewed while they wait; False when it was not driven here."""
        if not self.discard(run_id):
            return False
        continuation.release(self.rt, [run_id], self.server)
        return True

    def claim_back(self, run_id: str) -> bool:
        """Claim back a run :meth:`let_go` released; False when another server took it meanwhile."""
        if not continuation.reclaim(self.rt, run_id, self.server, lease_s=self.lease_s):
            return False
        self.add(run_id)
        return True

    def take_all(self) -> list[str]:
        """The runs driven here, no longer driven (the server stops)."""
        with self._lock:
            left, self._runs = sorted(self._runs), set()
        return left

    def until(self) -> float:
        """The end of a lease taken or renewed now."""
        return self._renewer.until()

    def start(self) -> None:
        self._renewer.start()

    def stop(self, *, timeout: float) -> None:
        self._renewer.stop(timeout=timeout)


class LapsedRuns:
    """Finds runs a server may continue although no approval brings them to it: their driver
    released them or let its lease end, and no call of theirs waits for a person (a pending
    request, or one approved less than two leases ago: the server that took it resumes it).

    Each call lists the :data:`SCAN_RUNS` runs last active within :data:`SCAN_HORIZON_S`, and, on
    a store that pages its listing (:class:`~actionspace.trace.events.PagesRuns`), the next
    :data:`SCAN_RUNS` older ones after a cursor kept from call to call, which starts again behind
    the first page once it reached the end: every run within the horizon is looked at within
    one call per :data:`SCAN_RUNS` runs, however many newer runs pushed it out of the first page,
    and no call reads more than two pages. It reads the trace only of an unfinished run quiet for
    half a lease (a live driver renews every third of one), and of such a run only again once its
    last activity changed or the lease it read has ended."""

    def __init__(self, rt: Runtime, lease_s: float, *, limit: int = SCAN_RUNS) -> None:
        self.rt, self.lease_s, self.limit = rt, lease_s, limit
        self._read: dict[str, tuple[float, float]] = {}  # run id → (last activity read, read again after)
        self._cursor: tuple[float, str] | None = None  # (last_at, run id) the next older page follows

    def __call__(self, live: Callable[[str], bool], now: float) -> list[str]:
        """Ids of the runs to claim (with :func:`adopt`), skipping those ``live`` here."""
        listed = self._listed(now - SCAN_HORIZON_S)
        unfinished = [s for s in listed if not s.finished]
        quiet = [s for s in unfinished if now - s.last_at >= self.lease_s / 2 and not live(s.run_id)]
        kept = {s.run_id for s in quiet}
        for summary in listed:  # a run listed now that is no longer quiet: its reading is forgotten
            if summary.run_id not in kept:
                self._read.pop(summary.run_id, None)
        while len(self._read) > _MAX_REMEMBERED:
            self._read.pop(next(iter(self._read)))
        if not quiet:
            return []
        waiting = self._waiting(now)
        found = []
        for summary in quiet:
            last, after = self._read.get(summary.run_id, (math.nan, 0.0))
            if summary.run_id in waiting or (last == summary.last_at and now <= after):
                continue
            events = self.rt.trace.events(summary.run_id)
            if continuable(events, None, now) is not None:
                found.append(summary.run_id)
                continue
            lease = lease_of(events)  # a live lease: read again once it ends; else once the run moves
            ends = math.inf if lease is None or lease.until is None or lease.ended(now) else lease.until
            self._read[summary.run_id] = (summary.last_at, ends)
        return found

    def _listed(self, since: float) -> list[RunSummary]:
        """The first page of the listing, and the page after the cursor (or after the first page)."""
        store = self.rt.trace
        first = store.runs(limit=self.limit, since=since)
        if not isinstance(store, PagesRuns) or len(first) < self.limit:
            self._cursor = None
            return first
        end = (first[-1].last_at, first[-1].run_id)
        cursor = self._cursor
        if cursor is None or (-cursor[0], cursor[1]) < (-end[0], end[1]):
            cursor = end  # the first page reaches past the cursor: go on behind it
        older = store.runs_after(cursor, limit=self.limit, since=since)
        self._cursor = (older[-1].last_at, older[-1].run_id) if len(older) == self.limit else None
        seen = {s.run_id for s in first}
        return [*first, *(s for s in older if s.run_id not in seen)]

    def _waiting(self, now: float) -> set[str]:
        approvals = self.rt.approvals
        pending = approvals.list("pending", limit=_MAX_REQUESTS)
        approved = approvals.list("approved", limit=_MAX_REQUESTS)
        recent = [r for r in approved if r.decided_at is not None and now - r.decided_at < 2 * self.lease_s]
        return {r.run_id for r in (*pending, *recent)}


def settle_in_flight(rt: Runtime, run_id: str) -> int:
    """Settle, as recovery does (nothing is sent), the ledger entries of ``run_id`` left
    ``dispatched`` or ``unknown`` by the driver a server took the run over from (its lease ended:
    it is gone); how many were asked. A ``none`` write ends ``unknown_commit``, for a person. An
    entry of a node another server marks as being sent alone is left as it is (it may yet commit)."""
    settle = rt.engine.driver.settle
    if settle is None:
        return 0
    entries = [*rt.ledger.list(state="dispatched", limit=_MAX_IN_FLIGHT)]
    entries += rt.ledger.list(state="unknown", limit=_MAX_IN_FLIGHT)
    # read after the entries: a send marked before its dispatch is seen here (never settled)
    busy = continuation.sending(rt.trace.events(run_id), time.time())
    keys = sorted({e.key for e in entries if e.run_id == run_id and e.node_id not in busy})
    for key in keys:
        settle(key)
    return len(keys)
