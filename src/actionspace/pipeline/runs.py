"""The runs an engine has open: opened on first use, read back from the run-state store, evicted.

A run's principal, context label, turn and pins decide what its next call may do, so they are
saved in the run-state store (:mod:`actionspace.ledger.run_state`) whenever they change and any
process that continues the run reads them back. In memory an engine keeps at most
``max_live_runs`` runs; an evicted run that something still holds (a call in flight, a session)
is reused when it is asked for again, never reloaded beside the live object.
"""

from __future__ import annotations

import itertools
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from actionspace.discovery.runs import RunState
from actionspace.ledger.run_state import MemoryRunStateStore, RunStateStore
from actionspace.policy.principal import Principal
from actionspace.trace.events import TraceStore

__all__ = ["MAX_LIVE_RUNS", "RunRegistry"]

MAX_LIVE_RUNS = 4096
"""Runs an engine keeps in memory; the least recently opened beyond it are evicted."""


class RunRegistry:
    """Open runs by id; thread-safe."""

    def __init__(
        self,
        trace: TraceStore,
        run_states: RunStateStore | None = None,
        *,
        max_live_runs: int = MAX_LIVE_RUNS,
        on_first_run: Callable[[], object] | None = None,
    ) -> None:
        self.trace = trace
        self.run_states: RunStateStore = run_states if run_states is not None else MemoryRunStateStore()
        """Where each run's principal, context label, turn and pins are kept for any process."""
        self.max_live_runs = max_live_runs
        self._on_first_run = on_first_run
        self._runs: OrderedDict[str, RunState] = OrderedDict()
        self._evicted: weakref.WeakValueDictionary[str, RunState] = weakref.WeakValueDictionary()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._runs)

    def known(self, run_id: str) -> RunState | None:
        """The run if it is open in memory, else None (never opens one)."""
        return self._runs.get(run_id)

    def open(self, run_id: str, principal: Principal, started: Callable[[RunState], None]) -> RunState:
        """The run ``run_id``: in memory, read back from the store, or new with ``principal``.

        ``started`` records ``run_started`` for a run with no stored event yet (outside the lock:
        a clash with another process renumbers its events under it).
        """
        run = self._runs.get(run_id)
        if run is not None:
            return run
        if self._on_first_run is not None:
            hook, self._on_first_run = self._on_first_run, None
            hook()
        evicted: list[RunState] = []
        with self._lock:
            run = self._evicted.pop(run_id, None)
            if run is not None:
                self._runs[run_id] = run
                evicted = self._evict()
        if run is not None:
            for old in evicted:
                self.persist(old)
            return run
        stored = self.run_states.load(run_id)
        with self._lock:
            run = self._runs.get(run_id)
            if run is not None:
                return run
            start = self.trace.next_seq(run_id)
            if stored is not None:
                # node numbers past every event stored: a call id of an earlier process is never reused
                run = RunState.restore(run_id, stored, itertools.count(start), start + 1)
            else:
                run = RunState(run_id, principal, itertools.count(start), nodes=itertools.count(start + 1))
            self._runs[run_id] = run
            evicted = self._evict()
        for old in evicted:
            self.persist(old)
        if stored is None:
            self.persist(run)
        if start == 0:
            started(run)
        return run

    def _evict(self) -> list[RunState]:
        """Drop the least recently opened runs past ``max_live_runs`` (under the lock)."""
        out = []
        while len(self._runs) > self.max_live_runs:
            run_id, run = self._runs.popitem(last=False)
            self._evicted[run_id] = run
            out.append(run)
        return out

    def persist(self, run: RunState) -> None:
        """Save the run's state when it changed since the last save (a cheap compare otherwise).

        When only the call ids kept behind its labels changed (:meth:`RunState.label_mark` is as
        saved), the store may write it later, without waiting (``save_later``): nothing a later
        call may do depends on them. Anything else is saved before this returns.
        """
        mark = run.mark()
        if mark == run.saved:
            return
        label = run.label_mark()
        if label == run.saved_label:
            self._save_later(run.run_id, run.snapshot())
        else:
            self.run_states.save(run.run_id, run.snapshot())
            run.saved_label = label
        run.saved = mark

    def must_save(self, run: RunState) -> bool:
        """True when :meth:`persist` would wait for the store."""
        return run.label_mark() != run.saved_label and run.mark() != run.saved

    def _save_later(self, run_id: str, state: dict[str, Any]) -> None:
        later = getattr(self.run_states, "save_later", None)
        (later or self.run_states.save)(run_id, state)

    def forget(self, run_id: str) -> None:
        """Save a run's state and drop it from memory; it comes back on use."""
        with self._lock:
            run = self._runs.pop(run_id, None)
            if run is not None:
                self._evicted[run_id] = run
        if run is not None:
            self.persist(run)

    def renumber(self, run_id: str, next_seq: int) -> None:
        """Another process stored events of the run: its next event number is ``next_seq``."""
        run = self._runs.get(run_id)
        if run is not None:
            with self._lock:
                run.seq = itertools.count(next_seq)
