"""The runs an engine has open: opened on first use, read back from the run-state store, evicted;
their state and their events stored.

A run's principal, context label, turn and pins decide what its next call may do, so they are
saved in the run-state store (:mod:`actionspace.ledger.run_state`) whenever they change and any
process that continues the run reads them back. In memory an engine keeps at most
``max_live_runs`` runs; an evicted run that something still holds (a call in flight, a session)
is reused when it is asked for again, never reloaded beside the live object. A call's events
reach the trace store through :meth:`RunRegistry.flush`, after the run's state they depend on.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import logging
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, cast

from actionspace import _crash
from actionspace._crash import point
from actionspace._unicode import text_for_utf8
from actionspace.discovery.config import error_category
from actionspace.discovery.runs import RunState, join_call_ids
from actionspace.errors import ActionError, ConfigurationError, RunStateError, said_safely, store_unavailable
from actionspace.ledger.run_state import MemoryRunStateStore, RunStateStore
from actionspace.policy.principal import Principal
from actionspace.trace.events import EventRecord, TraceStore
from actionspace.trace.recorder import Recorder, RecordSink

__all__ = ["CLOSED", "MAX_LIVE_RUNS", "NODE_BLOCK", "ReservedNodes", "RunRegistry", "check_id", "unreserved"]

MAX_LIVE_RUNS = 4096
"""Runs an engine keeps in memory; the least recently opened beyond it are evicted."""
_HELD: ContextVar[list[RunState] | None] = ContextVar("actionspace_held_saves", default=None)
SAVE_ATTEMPTS = 16
"""How often a run's state is merged and saved again after other processes saved theirs first."""
TRACE_RENUMBER_ATTEMPTS = 5
"""How often a batch of trace events is renumbered after another process took its numbers."""
NODE_BLOCK = 64
"""Node numbers a process reserves for a run at a time in a shared store (:class:`ReservedNodes`)."""

_JOINS: dict[object, bool] = {}
"""A run-state store's ``save`` (or ``save_later``) function → it takes ``join=``."""
_log = logging.getLogger("actionspace")
CLOSED = "this Runtime is closed (close() released its threads and stores); open a new Runtime"


class RunRegistry:
    """Open runs by id; thread-safe."""

    def __init__(
        self,
        trace: TraceStore,
        run_states: RunStateStore | None = None,
        *,
        max_live_runs: int = MAX_LIVE_RUNS,
        on_first_run: Callable[[], object] | None = None,
        in_memory: bool = True,
    ) -> None:
        """``in_memory``: the stores are in memory, so storing never waits for I/O."""
        self.trace = trace
        self.in_memory = in_memory
        """The stores are in memory: storing never waits for a file or a server (read on every
        call, so a plain attribute rather than a property)."""
        self._defers = bool(getattr(trace, "defers_appends", False))
        """The trace store's appends return without waiting for its file (SQLite)."""
        self.run_states: RunStateStore = run_states if run_states is not None else MemoryRunStateStore()
        """Where each run's principal, context label, turn and pins are kept for any process."""
        self.max_live_runs = max_live_runs
        self._on_first_run = on_first_run
        self._runs: OrderedDict[str, RunState] = OrderedDict()
        self.live = self._runs
        """The runs open in memory, by id (read only: :meth:`known` without its call)."""
        self._evicted: weakref.WeakValueDictionary[str, RunState] = weakref.WeakValueDictionary()
        self._lock = threading.Lock()
        self.closed = False
        """Set when the runtime closes: :meth:`open` then raises, before any store is read."""

    def __len__(self) -> int:
        return len(self._runs)

    def known(self, run_id: str, *, refresh: bool = True) -> RunState | None:
        """The run if open in memory, else None; on a shared store, refreshed unless ``refresh`` is False."""
        try:
            run = self._runs.get(run_id)
        except TypeError:  # not hashable, so not text: check_id says so
            check_id("run id", run_id)
            raise
        if run is not None and refresh and not self.in_memory:
            self.refresh(run)
        return run

    @property
    def remote(self) -> bool:
        """The run-state store waits on the network (PostgreSQL): async callers refresh a run on
        a worker thread, never on their event loop."""
        return bool(getattr(self.run_states, "remote", False))

    async def arefresh(self, run: RunState) -> None:
        """:meth:`refresh` for an async caller: on a worker thread when the store is remote."""
        if self.in_memory:
            return
        if self.remote:
            await asyncio.to_thread(self.refresh, run)
        else:
            self.refresh(run)  # one local indexed read

    def refresh(self, run: RunState) -> None:
        """Merge in the run's stored snapshot when another process saved a newer one (one read
        of its revision otherwise).

        Its usual course is this frame and the store's read (the write frame's admission calls it).

        Raises :class:`~actionspace.errors.RunStateError` when the stored snapshot cannot be read
        (a newer actionspace's format, a damaged row), as opening the run does: going on with the
        state held here would drop what the other process saved (a secret it read in the run)."""
        states: Any = self.run_states
        read = getattr(states, "rev_row", None)  # SQLite's: the writer's kept read, no frame of its own
        try:
            if read is None:
                stored_rev = states.rev(run.run_id) if hasattr(states, "rev") else None
            else:  # a revision that is not an int is asked of ``rev``, which raises
                row = read(run.run_id)
                stored_rev = row and (row[0] if type(row[0]) is int else states.rev(run.run_id))
            if stored_rev is None or stored_rev == run.rev:
                return
            with run.lock:
                if stored_rev == run.rev:
                    return
                stored = states.load(run.run_id)
                if stored is not None and stored.get("rev", 0) != run.rev:
                    run.absorb(stored)
        except RunStateError:
            raise  # the row is there, unreadable: never the state held here instead of it
        except Exception:  # the store is down: so is the ledger on it, which answers the call typed
            _log.exception("actionspace: the stored state of run %s could not be read", run.run_id)

    def open(self, run_id: str, principal: Principal, started: Callable[[RunState], None]) -> RunState:
        """The run ``run_id``: in memory, read back from the store, or new with ``principal``.

        ``started`` records ``run_started`` for a run with no stored event yet (outside the lock:
        a clash with another process renumbers its events under it). Raises ConfigurationError
        once :attr:`closed`.
        """
        run = self._runs.get(run_id)
        if run is not None:
            return run
        if self.closed:
            raise ConfigurationError(CLOSED)
        check_id("run id", run_id)
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
            if not self.in_memory:
                self.refresh(run)  # another process may have saved the run since it was evicted
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
                if start == 0:  # no event stored yet: no error either
                    run.errors_seen = set()
            reserve = None if self.in_memory else getattr(self.run_states, "reserve_nodes", None)
            if reserve is not None:  # numbers past every block another process reserved too
                run.nodes = ReservedNodes(reserve, run_id, max(start + 1, NODE_BLOCK + 1))
            self._runs[run_id] = run
            evicted = self._evict()
        for old in evicted:
            self.persist(old)
        if stored is None:
            nodes = run.nodes
            if start == 0 and isinstance(nodes, ReservedNodes) and self._made(run):
                nodes.hold_first(NODE_BLOCK)  # below every block: a run made and ended here costs no write
            self.persist(run)
        if start == 0:
            started(run)
        return run

    def _made(self, run: RunState) -> bool:
        """Save the first snapshot of a run none was stored of; True when it was written over none
        (a save over revision 0 succeeded): no other process made the run, nor ever will."""
        if _HELD.get() is not None:
            return False  # the caller saves it later: another process may make the run first
        with run.lock:
            return run.rev == 0 and self._save(run) and run.rev == 1

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
        if run.mark() == run.saved:
            return
        if run.label_mark() != run.saved_label and (held := _HELD.get()) is not None:
            held.append(run)  # saved by the caller of holding(), before it shows anything
            return
        with run.lock:  # one save of the run at a time: each is made over the revision before
            for _ in range(SAVE_ATTEMPTS):
                if self._save(run):
                    return
                stored = self.run_states.load(run.run_id)  # another process saved first: merge
                if stored is not None:
                    run.absorb(stored)
        raise RuntimeError(f"the state of run {run.run_id} kept changing in other processes while saved")

    def _save(self, run: RunState) -> bool:
        """Save the run's state over the revision it holds (False: another one was saved)."""
        mark, label, pins_version = run.mark(), run.label_mark(), run.pins_version
        if mark == run.saved:
            return True
        texts = run.flow.texts_since(run.texts_saved)  # each of the user's messages once
        state = run.snapshot()
        if label == run.saved_label:  # only call ids behind labels: joined to what is stored
            self._save_later(run.run_id, {**state, "rev": run.rev}, texts)
        elif (
            self._store_save(self.run_states.save, run.run_id, {**state, "rev": run.rev + 1}, texts) is False
        ):
            return False
        else:
            run.rev += 1
            run.pinned_here.clear()  # stored now: a newer snapshot's pins of them win from here on
            run.base = (state["turn"], pins_version)
            run.base_messages = state["flow"]["user_count"]
            run.saved_label = label
        run.saved = mark
        if texts:
            run.texts_saved = texts[-1][0]
        return True

    @contextmanager
    def holding(self) -> Iterator[list[RunState]]:
        """Within the block, :meth:`persist` on this thread (or task) does not wait for a save: it
        lists the run instead, and the caller saves it with :meth:`persist` before it shows the
        model anything that depends on it (an async offer does so on a worker thread)."""
        held: list[RunState] = []
        token = _HELD.set(held)
        try:
            yield held
        finally:
            _HELD.reset(token)

    @property
    def defers_appends(self) -> bool:
        """The trace store's appends return without waiting for its file (SQLite) or memory."""
        return self.in_memory or self._defers

    def must_save(self, run: RunState) -> bool:
        """True when :meth:`persist` would wait for the store."""
        return run.label_mark() != run.saved_label and run.mark() != run.saved

    def _save_later(self, run_id: str, state: dict[str, Any], texts: list[tuple[int, str]]) -> None:
        later = getattr(self.run_states, "save_later", None)
        self._store_save(later or self.run_states.save, run_id, state, texts)

    def _store_save(
        self, save: Callable[..., Any], run_id: str, state: dict[str, Any], texts: list[tuple[int, str]]
    ) -> Any:
        """``save(run_id, state, texts)``, with ``join=`` when it takes it: the call ids one process
        saved without waiting survive another's save (:mod:`actionspace.ledger.run_state`). Not
        for a store in memory, which no other process writes."""
        if self.in_memory:
            return save(run_id, state, texts)
        func = getattr(save, "__func__", save)
        joins = _JOINS.get(func)
        if joins is None:
            if len(_JOINS) > 256:
                _JOINS.clear()
            joins = _JOINS[func] = "join" in inspect.signature(save).parameters
        return save(run_id, state, texts, join=join_call_ids) if joins else save(run_id, state, texts)

    def flush(self, rec: Recorder, sink: RecordSink, *, clean: bool = False) -> None:
        """Hand a call's events to ``sink``, the run's state saved first if it changed; a failing
        trace store never turns into a failed call (a failing run-state save raises: the call's
        observation must not outrun its label). ``clean``: the caller knows no event of ``rec``
        is an error observation (nothing for the run's errors seen to note).

        When another process already stored events under the same numbers (several workers run
        nodes of one run), the batch is renumbered after the stored events instead of being lost.
        """
        owner = rec.run
        if isinstance(owner, RunState):
            seen = owner.errors_seen
            if seen is not None and not clean and rec.records and note_errors(rec.records, seen):
                owner.errors_mark += 1  # a new category is saved before the error is stored
            if owner.mark() != owner.saved:
                self.persist(owner)
        try:
            try:
                held = rec.records
                if clean and held and rec.call is None and not rec.nodes:
                    flow = owner.flow
                    context = flow.context
                    if not flow.pending and context.confidentiality != "secret" and context.readers is None:
                        # Recorder.flush of plain records that need no label, without its calls
                        if _crash._target is not None:
                            point("during_observation_write")
                        rec.records = []
                        try:
                            sink(owner.run_id, held)
                        except BaseException:
                            rec.records = held  # nothing was written: renumbered and retried below
                            raise
                        return
                rec.flush(sink)
                return
            except ValueError:
                self._renumbered(rec, sink)
        except Exception:
            _log.exception(
                "actionspace: the trace store rejected %d events of run %s", len(rec.records), rec.run_id
            )
            rec.records = []

    def _renumbered(self, rec: Recorder, sink: RecordSink) -> None:
        """Flush ``rec`` again after another process took its event numbers: renumbered after
        the events stored, at most :data:`TRACE_RENUMBER_ATTEMPTS` times."""
        for attempt in range(1, TRACE_RENUMBER_ATTEMPTS + 1):
            start = self.trace.next_seq(rec.run_id)
            rec.records = [(start + i, k, t, c, d) for i, (_, k, t, c, d) in enumerate(rec.records)]
            self.renumber(rec.run_id, start + len(rec.records))
            try:
                rec.flush(sink)
                return
            except ValueError:
                if attempt == TRACE_RENUMBER_ATTEMPTS:
                    raise

    def flush_blocks(self, rec: Recorder) -> bool:
        """Whether :meth:`flush` of ``rec`` may wait for store I/O (async callers then run it on a
        worker thread): the stores are not in memory, and the trace store writes on the calling
        thread or what a later call of the run may do changed (the run's state is saved, and
        waited for, before the events: :meth:`must_save`)."""
        if self.in_memory:
            return False
        if not self._defers:
            return True
        owner = rec.run
        if not isinstance(owner, RunState):
            return False
        seen = owner.errors_seen
        return self.must_save(owner) or (seen is not None and _new_error(rec.records, seen))

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


# not itertools.count[int]: the type is not subscriptable at run time
class ReservedNodes(itertools.count):  # type: ignore[type-arg]
    """A run's node numbers on a store other processes share: handed out in memory from blocks of
    :data:`NODE_BLOCK` that the run-state store reserved for this process (``reserve_nodes``, one
    write per block; :mod:`actionspace.ledger.run_nodes`), so no two processes, nor a process
    continuing the run after another ended, name two calls alike."""

    __slots__ = ("_end", "_floor", "_lock", "_next", "_reserve", "_run_id")
    _reserve: Callable[[str, int, int], int]
    _run_id: str
    _floor: int
    _next: int
    _end: int
    _lock: threading.Lock

    def __new__(cls, reserve: Callable[[str, int, int], int], run_id: str, floor: int) -> ReservedNodes:
        self = cast("ReservedNodes", super().__new__(cls))
        self._reserve, self._run_id, self._floor = reserve, run_id, floor
        self._next = self._end = 0
        self._lock = threading.Lock()
        return self

    def hold_first(self, count: int) -> None:
        """Hand out 1 to ``count`` first: the run's maker holds them, no block is reserved below
        :data:`NODE_BLOCK` + 1 (see :meth:`RunRegistry.open`); nothing when a block was taken."""
        with self._lock:
            if self._end == 0:
                self._next, self._end = 1, count + 1

    def __next__(self) -> int:
        """The next node number; raises :class:`_Unreserved` when the store did not answer the
        reservation of a new block (:func:`unreserved` reads it as ``transient``), and nothing
        was handed out: the next call asks the store again."""
        with self._lock:
            number = self._next
            if number >= self._end:
                try:
                    number = self._reserve(self._run_id, self._floor, NODE_BLOCK)
                except Exception as exc:
                    if store_unavailable(exc):
                        raise _Unreserved(self._run_id, exc) from exc
                    raise
                self._end = number + NODE_BLOCK
            self._next = number + 1
            return number


class _Unreserved(Exception):
    """The run-state store did not answer a reservation of node numbers (a store outage)."""

    def __init__(self, run_id: str, cause: Exception) -> None:
        super().__init__(run_id, cause)
        self.run_id = run_id
        self.cause = cause


def unreserved(exc: BaseException) -> ActionError | None:
    """The error of a call that ended on ``exc`` when ``exc`` is a node-number reservation the
    run-state store did not answer: ``transient`` (retry with the same key; nothing was sent or
    written, the call had no node yet), the driver's error as its ``vendor_code``. None otherwise:
    another failure is a bug of ours (``internal``)."""
    if not isinstance(exc, _Unreserved):
        return None
    cause = exc.cause
    return ActionError.of(
        "transient",
        f"the run-state store did not answer while node numbers of run {exc.run_id} were reserved "
        f"({type(cause).__name__}: {said_safely(cause, 200)}); ask again",
        vendor_code=type(cause).__name__,
        details={"sent": False},
    )


def _new_error(records: Sequence[EventRecord], seen: set[str]) -> bool:
    """An error observation among ``records`` has a category not in ``seen`` (its save waits)."""
    for record in records:
        if record[1] == "observation":
            category = error_category(record[1], record[4])
            if category is not None and category not in seen:
                return True
    return False


def note_errors(records: Sequence[EventRecord], seen: set[str]) -> bool:
    """Add to ``seen`` the category of each error observation among ``records``, as
    ``errors_in_trace`` reads them back (a compact record is never an error); True when one
    was not in it yet."""
    added = False
    for record in records:
        if record[1] == "observation":  # the only kind error_category reads (most are not)
            category = error_category("observation", record[4])
            if category is not None and category not in seen:
                seen.add(category)
                added = True
    return added


def check_id(what: str, value: str) -> None:
    """Raise TypeError for an id not text; ValueError for an empty run id, a lone surrogate, U+0000."""
    if not isinstance(value, str):
        raise TypeError(f"a {what} must be text (str), not {type(value).__name__}: {value!r:.80}")
    if not value and what == "run id":
        raise ValueError("the run id is empty: name the run, or pass None for the default (or a new) run")
    if "\x00" in value:
        raise ValueError(f"the {what} {value!r} holds U+0000, which PostgreSQL cannot store")
    if not value.isascii() and text_for_utf8(value) != value:
        raise ValueError(f"the {what} {value!r} holds an unpaired surrogate, which no store can write")
