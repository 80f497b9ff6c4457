"""Around the stages: a model's raw output into calls (:mod:`actionspace.pipeline._raw`, named here
too), the dispatched event, grouped observations, and the calls in flight that ``Runtime.close()``
cuts (:class:`InFlight`)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from actionspace.catalog.spec import ToolSpec
from actionspace.errors import ActionError
from actionspace.execution.executor import NOT_BEGUN, Executor
from actionspace.execution.ready import Ready
from actionspace.pipeline._raw import parse_raw, per_call_id, per_position, positioned, well_identified
from actionspace.pipeline.observe import fail
from actionspace.trace.recorder import Recorder
from actionspace.types import Observation, ObservationStatus

__all__ = [
    "CLOSED_WHILE_RUNNING",
    "CUT_SEEN_S",
    "Cut",
    "Ended",
    "InFlight",
    "dispatched_event",
    "group",
    "parse_raw",
    "per_call_id",
    "per_position",
    "positioned",
    "well_identified",
]

CLOSED_WHILE_RUNNING = "the Runtime was closed while this call ran"
CUT_SEEN_S = 0.5
"""How long ``close()`` waits for a call's loop to take the cut: a loop held longer by a call it
cannot interrupt (a sync tool run on it) ends the call after the stores closed (seconds)."""


def dispatched_event(ready: Ready, spec: ToolSpec) -> dict[str, Any]:
    data: dict[str, Any] = {
        "tool": spec.name,
        "version": spec.version,
        "node_id": ready.node_id,
        "attempt": 1,
    }
    if ready.key is not None:
        data["idempotency_key"] = ready.key
    return data


def group(items: Sequence[Observation], run_id: str) -> Observation:
    failed = sum(1 for o in items if o.status == "error")
    status: ObservationStatus = "ok" if failed == 0 else ("error" if failed == len(items) else "partial")
    return Observation(
        call_id=f"{run_id}:group",
        tool="*",
        status=status,
        error=_all_failed(items) if status == "error" else None,
        items=tuple(items),
        complete=all(o.complete for o in items),
        diagnostics={"failed": [o.call_id for o in items if o.status == "error"]},
    )


def _all_failed(items: Sequence[Observation]) -> ActionError:
    """The error of a group none of whose calls succeeded (an error observation always carries its
    error): the first call's category and recovery, every call's category in ``details``."""
    errors = [o.error for o in items if o.error is not None]
    failed = {o.call_id: o.error.category if o.error is not None else "unclassified" for o in items}
    first = errors[0] if errors else ActionError.of("unclassified", "no call answered")
    return ActionError.of(
        first.category,
        f"none of the {len(items)} calls succeeded; the first: {first.message[:300]}",
        details={"failed": failed},
    )


class Ended(threading.Event):
    """An event that also runs the callbacks in ``then`` once set (on the thread that sets it)."""

    def __init__(self) -> None:
        super().__init__()
        self.then: list[Callable[[], object]] = []

    def set(self) -> None:
        super().set()
        then, self.then = self.then, []
        for call in then:
            call()


class Cut:
    """``Runtime.close()`` cutting one call: ``seen`` once the call's loop took the cut, ``ended``
    once what the call recorded is stored (or it had ended already)."""

    __slots__ = ("asked", "ended", "seen")

    def __init__(self) -> None:
        self.seen = threading.Event()
        self.ended = Ended()
        self.asked = False
        """Its task was cancelled (the cancel is taken back where the call ends)."""


_OPEN = object()
"""The state of a task inside a message whose events are not stored yet, waiting for no tool."""


class InFlight:
    """The calls of one engine waiting for their tools, by the task that awaits them.

    ``tasks`` maps a task to its state: the key of the write it runs (a ``str``), another marker
    of a call that may be cut, ``_OPEN`` (a message not stored yet; nothing to cut), or the
    :class:`Cut` of the close that cut it. A call is registered only where it may wait (a call
    answered at once costs one insert and one removal). ``Runtime.close()`` (any thread) notes
    the writes unknown (:meth:`writes`), then :meth:`cut` cancels each such task on its own loop;
    the call ends typed where it was awaited (:meth:`cuttable`): a read ``cancelled``, a write
    ``unknown_commit``; :meth:`wait` waits (bounded) until what those calls recorded is stored.
    """

    def __init__(self, executor: Executor) -> None:
        self.executor = executor
        self.tasks: dict[asyncio.Task[Any], object] = {}
        self.calls: dict[Recorder, asyncio.Task[Any] | Cut] = {}
        """Precompiled calls whose tool waits (:meth:`waits`), by their recorder: their task, or
        the :class:`Cut` that cut it (read by :meth:`settled`)."""
        self.cuts: list[tuple[Cut, asyncio.AbstractEventLoop]] = []
        self.sync: dict[int, int] = {}
        """Sync calls running now (:meth:`enter`), by the thread running them: how many."""
        self._sync_ended = threading.Condition()
        self._waiting = False
        """``close()`` waits for the sync calls (:meth:`wait_sync`): :meth:`leave` tells it."""
        self.stores_open = True
        """False once ``close()`` closes (or is about to close) the stores: a call that reads it
        True after it stored its events had them stored."""
        self.quiet: Callable[[], object] | None = None
        """Set by ``close()`` while calls it could not end still run (they may still save their
        run's state): called where one of them leaves (:meth:`leave`, :meth:`done`, a cut's end),
        to close the run-state store once none is left (``_closing.close_when_nothing_runs``)."""

    # ------------------------------------------------------------------ the closing thread
    def writes(self) -> list[str]:
        """From any thread: the ledger keys of the writes in flight now."""
        return [state for state in list(self.tasks.values()) if type(state) is str]

    def cut(self) -> None:
        """From any thread, once ``Executor.closed`` is set: cut every call in flight on its loop."""
        for task in list(self.tasks):
            self._schedule(task.get_loop(), self._cut, task)
        for rec, waiting in list(self.calls.items()):
            if isinstance(waiting, asyncio.Task):
                self._schedule(waiting.get_loop(), self._cut_call, rec)

    def _schedule(self, loop: asyncio.AbstractEventLoop, cut_it: Any, which: Any) -> None:
        cut = Cut()
        cut.ended.then.append(self._left)
        try:
            loop.call_soon_threadsafe(cut_it, which, cut)
        except RuntimeError:  # its loop is closed: the call ended with it
            return
        self.cuts.append((cut, loop))

    def _left(self) -> None:
        """A call, message or plan left (or stored what it recorded): tell :attr:`quiet`."""
        quiet = self.quiet
        if quiet is not None:
            quiet()

    def _cut_call(self, rec: Recorder, cut: Cut) -> None:
        cut.seen.set()
        task = self.calls.get(rec)
        if not isinstance(task, asyncio.Task) or task.done():  # it ended meanwhile
            cut.ended.set()
            return
        self.calls[rec] = cut
        cut.asked = True
        task.cancel()

    def waits(self, rec: Recorder) -> None:
        """A precompiled call (``rec``) whose tool waits, on the running task: ``close()`` may cut it
        until :meth:`settled` (already closed: cut once it waits)."""
        task = current_task()
        if task is None:
            return
        self.calls[rec] = task
        if self.executor.closed:  # closed before close() could see it
            self._schedule(task.get_loop(), self._cut_call, rec)

    def settled(self, rec: Recorder, raised: bool) -> Cut | None:
        """The end of :meth:`waits`: the :class:`Cut` when ``close()`` cut the call (its cancel
        taken back; tell ``ended`` once its records are stored), else None; also None when its
        caller cancelled it too (``raised``: it ended raising)."""
        cut = self.calls.pop(rec, None)
        if not isinstance(cut, Cut):
            return None
        if cut.asked:
            cut.asked = False
            task = current_task()
            if task is not None and task.uncancel() > 0 and raised:
                cut.ended.set()
                return None
        return cut

    def _cut(self, task: asyncio.Task[Any], cut: Cut) -> None:
        cut.seen.set()
        state = self.tasks.get(task, cut)
        if state is cut or isinstance(state, Cut) or task.done():  # it ended meanwhile
            cut.ended.set()
            return
        self.tasks[task] = cut
        if state is not _OPEN:  # waiting for its tool: ends where it was awaited (cuttable)
            cut.asked = True
            task.cancel()

    def wait(self, deadline: float) -> None:
        """Wait, until ``deadline`` (``time.monotonic()``), for the calls :meth:`cut` cut to store
        what they recorded; not for those on the calling thread's own loop (they end after it)."""
        try:
            here: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            here = None
        for cut, loop in self.cuts:
            left = deadline - time.monotonic()
            if loop is here or left <= 0:
                continue
            if cut.seen.wait(min(left, CUT_SEEN_S)):
                cut.ended.wait(max(0.0, deadline - time.monotonic()))

    def ending_here(self) -> list[Cut]:
        """The cuts of calls on the calling thread's running loop that have not ended: they end
        only once the closing code on that loop returned (none without a running loop)."""
        try:
            here = asyncio.get_running_loop()
        except RuntimeError:
            return []
        return [cut for cut, loop in self.cuts if loop is here and not cut.ended.is_set()]

    def wait_sync(self, deadline: float) -> None:
        """Wait, until ``deadline`` (``time.monotonic()``), for the sync calls other threads run
        to end: nothing can cut a tool running on its caller's thread, or a thread the caller
        waits for, so a call ending within the wait settles its entry and stores its events
        before the stores close; one running on after it ends typed when its tool returns."""
        here = threading.get_ident()
        with self._sync_ended:
            self._waiting = True  # before the first look: a leave after that look notifies
            try:
                self._sync_ended.wait_for(
                    lambda: not self.sync.keys() - {here}, timeout=max(0.0, deadline - time.monotonic())
                )
            finally:
                self._waiting = False

    # ------------------------------------------------------------------ the calling thread
    def enter(self) -> int:
        """Register a sync call on the calling thread until :meth:`leave` (``close()`` waits for
        it, bounded); returns the thread's id. No lock: a thread changes only its own key, and one
        dict operation is atomic. ``with in_flight:`` is the same pair (``__enter__`` and
        ``__exit__`` are these functions): the one place a thread's count changes."""
        ident = threading.get_ident()
        sync = self.sync
        sync[ident] = sync.get(ident, 0) + 1
        return ident

    def leave(self, *_: object) -> None:
        """The end of :meth:`enter`, on the thread that entered (its arguments, an id or what
        ``__exit__`` is given, are not read): the call settled its entry and stored its events.
        The key is gone before ``_waiting`` is read, so a close that looked before sees it notified."""
        ident = threading.get_ident()
        sync = self.sync
        left = sync.pop(ident, 1) - 1
        if left:
            sync[ident] = left
            return
        if self._waiting:
            with self._sync_ended:
                self._sync_ended.notify_all()
        if self.quiet is not None:
            self._left()

    __enter__ = enter
    __exit__ = leave

    # ------------------------------------------------------------------ the calling task
    def open(self) -> asyncio.Task[Any] | None:
        """Register the calling task until :meth:`done` (a message whose events ``close()`` waits
        to be stored); None when it is registered already, or runs in no task."""
        task = current_task()
        if task is None or task in self.tasks:
            return None
        self.tasks[task] = _OPEN
        return task

    def done(self, task: asyncio.Task[Any] | None) -> None:
        """The end of :meth:`open`: what the task recorded is stored."""
        if task is not None:
            state = self.tasks.pop(task, None)
            if isinstance(state, Cut):
                state.ended.set()
            if self.quiet is not None:
                self._left()

    async def cuttable(
        self,
        aw: Coroutine[Any, Any, Observation],
        rec: Recorder,
        spec: ToolSpec,
        call_id: str | None,
        key: str | None,
        *,
        begins: bool = True,
    ) -> Observation:
        """``aw``'s observation; if ``close()`` cuts it, a read ``cancelled``, a write (``key``)
        ``unknown_commit``, recorded in ``rec``. A call that ``begins`` a tool after the runtime
        closed is not sent (``cancelled``, ``details["sent"]`` False)."""
        task = current_task()
        tasks = self.tasks
        prev = _GONE if task is None else tasks.get(task, _GONE)
        if task is None or not (prev is _GONE or prev is _OPEN or isinstance(prev, Cut)):
            return await aw  # no task, or inside a call of this task that is cut as a whole
        if isinstance(prev, Cut) and begins:
            aw.close()
            return _refused(rec, spec, call_id)
        if not isinstance(prev, Cut):
            tasks[task] = key if key is not None else rec
        try:
            if begins and self.executor.closed:  # closed before it could be cut: not sent
                aw.close()
                return _refused(rec, spec, call_id)
            obs = await aw
        except BaseException as exc:
            cut = tasks.get(task)
            if not isinstance(cut, Cut):
                raise
            if cut.asked and task.uncancel() > 0 and isinstance(exc, asyncio.CancelledError):
                raise  # cancelled by its caller too
            cut.asked = False
            return ended_by_cut(rec, spec, call_id, key)
        else:
            cut = tasks.get(task)
            if isinstance(cut, Cut) and cut.asked:  # its tool swallowed the cancel
                cut.asked = False
                task.uncancel()
            return obs
        finally:
            state = tasks.get(task)
            if prev is _GONE:
                tasks.pop(task, None)
                if isinstance(state, Cut):
                    state.ended.set()
                if self.quiet is not None:
                    self._left()
            elif not isinstance(state, Cut):
                tasks[task] = prev


_GONE = object()


def current_task() -> asyncio.Task[Any] | None:
    """The running task, or None (no running event loop)."""
    try:
        return asyncio.current_task()
    except RuntimeError:
        return None


def ended_by_cut(rec: Recorder, spec: ToolSpec, call_id: str | None, key: str | None) -> Observation:
    """The observation of a call ``close()`` cut while its tool ran, recorded in ``rec``."""
    call_id = call_id or rec.call_id or f"{rec.run_id}:closed"
    if key is None and not spec.has_side_effects:
        return fail(rec, ActionError.of("cancelled", CLOSED_WHILE_RUNNING), call_id, spec.name, spec.version)
    error = ActionError.of(
        "unknown_commit",
        f"{CLOSED_WHILE_RUNNING}; the write may have committed",
        resource_ids=(key,) if key is not None else (),
        details={"idempotency_key": key} if key is not None else {},
    )
    return fail(rec, error, call_id, spec.name, spec.version)


def _refused(rec: Recorder, spec: ToolSpec, call_id: str | None) -> Observation:
    error = ActionError.of("cancelled", NOT_BEGUN, details={"sent": False})
    return fail(rec, error, call_id or rec.call_id or f"{rec.run_id}:closed", spec.name, spec.version)
