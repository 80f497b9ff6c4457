"""Starting plan nodes: waves of ready nodes, begun inline, each that waits in a task of its own.

A *wave* is every ready node the limits admit at one moment; its nodes count as running from
then on (``max_parallel`` and the concurrency limits see them together), in the ready queue's
order. A driver task steps the wave's nodes one after the other in itself. A plain node (one call
on the precompiled path, no cancel scope) that ends without waiting (a memory store, a tool that
answers at once) settles there, with no task of its own. The first node that waits keeps the
driver's task — whatever its tool bound to the current task (its own ``asyncio.timeout``, a
``TaskGroup``) and the timeout we armed after its first step belong to that node alone. Once a
node of a tool waited in the plan, the tool's next nodes each get a task of their own, made
before anything of the node runs, as under ``asyncio.gather``: the rest of the wave of a node
that waits gets those tasks at once, and a new driver task takes its other nodes
(:meth:`Driver._hand_on`). A plain node's call begins at once, its first step taken by the driver
with the node's task current and in the task's context, as Python 3.12's eager tasks begin
(:meth:`Driver._task_for`, :meth:`Driver._own`): every call of a wave has begun, and armed its
tool's own timers, before the loop turns, and the task continues it from its first run. Any
other node begins when its task first runs (:meth:`Driver._solo`), the wave's head (the longest
chain ahead) then stepped by the driver after the others got theirs. A task whose node ended
takes the next wave; a wave that ran inline hands the next one over after one turn of the loop,
so the loop runs other tasks in between.

Once the runtime closes (``Executor.closed``, read before each node begins), a node not begun yet
is not sent: it ends ``cancelled``, ``details["sent"]`` False, and its successors are blocked.

Nodes stepped inline by a driver share its context variables; a node in a task of its own, and a
new driver, get a copy of what was current when their wave began (what the driver's first node
made current does not reach them), as ``asyncio.gather`` copies its caller's.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import gc
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, cast

from actionspace.errors import ActionError
from actionspace.execution.executor import NOT_BEGUN, resumed
from actionspace.plan._instant import SETTLED
from actionspace.plan._waves import Waves
from actionspace.plan.check import CheckedNode
from actionspace.plan.control import CancelScope, abort_outcome
from actionspace.plan.node import FLUSH_RECORDS, FLUSH_S, Started, _monotonic, _no_refs, is_plain
from actionspace.plan.refs import substitute
from actionspace.trace.recorder import Recorder
from actionspace.types import Observation

__all__ = ["Driver", "is_safe"]

_SAFE_TO_ABORT = frozenset({"none", "read"})

_Swap = Callable[[asyncio.AbstractEventLoop, "asyncio.Task[Any]"], None]
_swap: tuple[_Swap, _Swap] | None
try:  # what makes a task current while a step of it runs (Python 3.12's eager tasks use them too)
    from asyncio.tasks import _enter_task, _leave_task

    _swap = (_enter_task, _leave_task)
except ImportError:  # pragma: no cover - every CPython from 3.7 has them
    _swap = None


class _Hop(tuple[None]):
    """Awaited, one bare yield with no frame of its own (its ``__await__`` is ``tuple.__iter__``):
    a node's first step, taken by the driver, ends there, and its task's own first step resumes
    after it."""

    __slots__ = ()
    __await__ = tuple.__iter__


_HOP = cast("Awaitable[None]", _Hop((None,)))  # an iterator's one step is what ``await`` takes


class Driver(Waves):
    """The half of the scheduler that starts nodes; settling and cancelling are the subclass's."""

    # (the state the waves and the instant path read is declared in Waves and Instant)
    cancel_scope: CancelScope | None
    abort_answers: dict[str, asyncio.Future[str]]
    _all_settled: asyncio.Future[None]
    _waits: set[str]
    """Tools a node of which waited in this plan: their next nodes get a task at once."""

    # ------------------------------------------------------------------ the subclass's part
    def _settle(self, k: str, obs: Observation, node: CheckedNode | None = None) -> None:
        raise NotImplementedError

    def _apply_cancel(self) -> None:
        raise NotImplementedError

    async def _node(self, node: CheckedNode) -> Observation:
        raise NotImplementedError

    # ------------------------------------------------------------------ waves
    def _pump(self) -> None:
        """Hand the next wave to a new driver task; resolve the plan when everything has settled."""
        if not self._closed:
            wave = self._take_wave()
            if wave:
                self._spawn(wave)
        self._check_settled()

    def _spawn(self, wave: list[str], context: contextvars.Context | None = None) -> None:
        # not kept: once the plan ended (``_closed``) a driver that had not begun steps nothing
        self._loop.create_task(self._drive(wave), context=context)

    def _check_settled(self) -> None:
        done = self.settled == len(self.plan.nodes) or not (
            self.running or self._ready or self._newly_ready or self._deferred or self._timer
        )
        if done and not self._all_settled.done():
            self._all_settled.set_result(None)

    # ------------------------------------------------------------------ a driver task
    async def _drive(self, wave: list[str]) -> None:
        """Step ``wave`` inline; keep the first node that waits, hand the rest on; repeat."""
        task, runs = _current(), self.engine.runs
        running, nodes, waits = self.running, self.plan.nodes, self._waits
        executor = self.engine.executor
        obs: Observation
        while wave and not self._closed:
            if not runs.in_memory:  # another process may have saved the run meanwhile (a secret it read)
                await runs.arefresh(self.run_state)
            waited = False
            # nothing can ask to cancel a node of this wave meanwhile (aborts come from a cancel
            # scope alone): its plain nodes' calls begin here, at once
            quiet = self.cancel_scope is None and not self.abort_requested
            every = quiet and self.plan.plain  # every node plain: none of them asked
            # what the wave's nodes find current: no node's first step (stepped here) changes it
            # for the tasks the others get
            base = contextvars.copy_context()
            head = nodes[wave[0]]
            if len(wave) > 1 and head.specs[0].name in waits and not self._begins_at_once(head):
                # the wave's first node (the longest chain ahead) will wait in a task that begins
                # it on the loop's next turn: the others get theirs first and it starts here, now
                wave = [*wave[1:], wave[0]]
            for i, k in enumerate(wave):
                if self._closed:
                    break
                if k not in running:
                    continue  # settled while it waited for its turn
                if executor.closed:  # the runtime closed while the plan ran: nothing more begins
                    self._finish(k, self._not_begun(k))
                    continue
                node = nodes[k]
                if waits and node.specs[0].name in waits and i + 1 < len(wave):
                    self._task_for(k, node, base, task)  # its tool waited: a task of its own
                    continue
                coro: Coroutine[Any, Any, Observation]
                if every or (quiet and is_plain(node)):
                    running[k] = task
                    now = self._instant(k, node)  # begun, and settled when it answered ok at once
                    if now is SETTLED:
                        continue
                    if isinstance(now, Observation):
                        self._finish(k, now, node)
                        continue
                    if now is not None and node.specs[0].is_async:
                        # its tool waits (stepped to its first wait): as a node that waits below
                        waited = True
                        waits.add(node.specs[0].name)
                        self._hand_on(wave[i + 1 :], base, task)
                        rec, pending = now
                        try:
                            obs = await pending
                        except BaseException as exc:
                            obs = self._failed(k, rec, exc)
                        else:
                            self._buffer(rec)
                        if k in running:
                            self._finish(k, obs)
                        break
                    # a sync tool's call, not begun yet, is stepped below
                    coro = self._body(k, node) if now is None else self._started(k, now)
                else:
                    coro = self._body(k, node)
                running[k] = task
                try:
                    yielded = coro.send(None)
                except StopIteration as stop:
                    obs = stop.value
                else:
                    # it waits: what its tool bound to the current task (its own timeout, a task
                    # group) is bound to this one, so it keeps it; the rest of the wave gets another
                    waited = True
                    waits.add(node.specs[0].name)
                    blocking = getattr(yielded, "_asyncio_future_blocking", None)
                    if blocking:  # taken while the rest begins: a node of it may await it too
                        yielded._asyncio_future_blocking = False
                    self._hand_on(wave[i + 1 :], base, task)
                    if blocking:  # handed to this task now, awaited (fast_nodes.py _resumed)
                        yielded._asyncio_future_blocking = True
                    obs = await resumed(coro, yielded)
                    if k in running:
                        self._finish(k, obs)
                    break
                if k in running:
                    self._finish(k, obs)
            if task.cancelling():  # a cancel of an aborted read that landed on this task
                self._pump()  # is not carried further: the next wave gets a new task
                return
            wave = [] if self._closed else self._take_wave()
            if not waited and wave:
                # A wave that ran inline lets the loop turn once before the next one, so other
                # tasks run in between (one wave per turn, as one task per node had).
                await asyncio.sleep(0)
        self._check_settled()

    def _begins_at_once(self, node: CheckedNode) -> bool:
        """A task made for ``node`` (:meth:`_task_for`) begins its call at once: it is plain and
        nothing can ask to cancel it (its call takes the precompiled path)."""
        return _swap is not None and self.cancel_scope is None and not self.abort_requested and is_plain(node)

    def _task_for(
        self, k: str, node: CheckedNode, base: contextvars.Context, driver: asyncio.Task[Any]
    ) -> None:
        """A task of its own for node ``k`` of a wave, in a copy of ``base`` (what was current when
        the wave began), made by ``driver`` (the current task). A plain node's call begins at once,
        as that task (:meth:`_own`); any other node begins when its task first runs
        (:meth:`_solo`)."""
        context = base.copy()
        if not (
            self.cancel_scope is None and not self.abort_requested and (self.plan.plain or is_plain(node))
        ):
            self._loop.create_task(self._solo(k), context=context)
            return
        loop = self._loop
        own = self._own(k, node)
        task = self.running[k] = loop.create_task(own, context=context)
        if _swap is None:  # no way to make it current here: it begins when its task first runs
            return
        # its first step, up to _HOP, taken now with its task current, as an eager task's is
        enter, leave = _swap
        leave(loop, driver)
        enter(loop, task)
        try:
            context.run(own.send, None)
        finally:
            leave(loop, task)
            enter(loop, driver)

    def _hand_on(self, rest: list[str], base: contextvars.Context, driver: asyncio.Task[Any]) -> None:
        """The rest of a wave whose node keeps ``driver``'s task (the current one): a task of its
        own for each node of a tool that waited in this plan, and a new driver for the others, each
        in a copy of ``base``.

        The cyclic collector pauses while they begin: each task and its call's first step leave a
        score of tracked objects alive (about 2,000 for a hundred nodes), so a young collection
        fell two or three times between the first call's start and the last one's, each walking
        objects just made, none of them garbage. Resumed, it collects once, at the next
        allocation: while the calls wait."""
        waits, nodes, others = self._waits, self.plan.nodes, []
        collecting = gc.isenabled()
        gc.disable()
        try:
            for k in rest:
                if k not in self.running:
                    continue  # settled while it waited for its turn
                node = nodes[k]
                if node.specs[0].name in waits:
                    self._task_for(k, node, base, driver)
                else:
                    others.append(k)
        finally:
            if collecting:
                gc.enable()
        if others:
            self._spawn(others, base.copy())

    async def _own(self, k: str, node: CheckedNode) -> None:
        """A plain node of a tool that waited in the plan, as a task of its own: the call begins
        (the tool's first step, its task current), the rest waits for the task's own first step
        (``_HOP``), then the call ends here and the task drives what is ready.

        :meth:`_plain_now`, :meth:`_started` and :meth:`_then` written out in one frame (the task
        resumes it at every wait of the tool): a call begun is its recorder and ``pending``, with
        no tuple of the two and no frame of its own."""
        begun = not self._closed and k in self.running  # (settled, cancelled, before it began)
        engine = self.engine
        now: Observation | None = None  # its observation when it did not wait
        pending: Awaitable[Observation] | None = None  # its call, begun and waiting (with ``rec``)
        if not begun:
            pass
        elif engine.executor.closed:
            now = self._not_begun(k)
        elif not node.node.provenance:  # (provenance: not on the precompiled path, _body takes it)
            spec = node.node
            raw = spec.arguments
            # a copy when nested: a tool that mutates its arguments must not change the plan
            arguments = raw if node.scalar_arguments else substitute(raw, _no_refs)
            run = self.run_state
            spare = self._spare  # an emptied recorder of a node that answered at once, or a new one
            if spare is None:
                rec = Recorder(run, f"{run.run_id}:{k}")
            else:
                rec, self._spare = spare, None
                rec.call_id = f"{run.run_id}:{k}"
            try:
                quick = engine.plain_node(run, spec.tool, dict(arguments), k, self.principal, rec, self.kept)
            except asyncio.CancelledError:  # the tool's first step raised it: as _plain, then _body
                rec.add("plan_node_cancelled", {"node": k, "phase": "running"})
                self._buffer(rec)
                now = self._aborted_read(k, "abort requested; the read was cancelled")
            except Exception as exc:
                now = self._at_once(rec, engine.internal(exc, rec))
            else:
                if quick is None or type(quick) is Observation:
                    now = self._at_once(rec, quick)
                else:
                    pending = quick  # type: ignore[assignment]  # (an Observation is taken above)
        cancelled = False
        try:
            await _HOP
        except asyncio.CancelledError:  # before its task ran: the plan ended, or the tool asked
            cancelled = True
        if not begun:
            self._check_settled()
            return
        if cancelled and now is None:
            _current().cancel()  # asked again, so the call sees it where its tool waits next
        if pending is not None:
            try:
                obs = await pending
            except BaseException as exc:
                obs = self._failed(k, rec, exc)
            else:
                nodes = rec.nodes
                if nodes is None or rec.records:
                    self._buffer(rec)
                else:  # _buffer for the one compact record of a node whose tool waited, written out
                    held = self.pending_nodes
                    held += nodes  # (the list itself, extended in place)
                    rec.nodes = None
                    at = _monotonic()
                    if (
                        at - self.flushed_at >= FLUSH_S
                        or len(self.pending) + 5 * len(held) >= FLUSH_RECORDS
                        or self._closed
                    ):
                        self._flush_pending(at)
        elif now is not None:  # it answered at once
            obs = now
        else:  # not on the precompiled path
            obs = await self._body(k, node)
        if cancelled and now is None:
            _current().uncancel()  # the cancel asked again above, delivered
        # _then, written out
        if k in self.running:
            self._finish(k, obs, node)
        if self.cancel_scope is not None and _current().cancelling():
            self._pump()  # as in _drive: an aborted read's cancel is not carried further
            return
        if not self._closed and (self._newly_ready or self._deferred or self._ready.queued):
            wave = self._take_wave()
            if wave:
                await self._drive(wave)
                return
        if self.settled == len(self.plan.nodes) or not self.running:
            self._check_settled()  # (nothing to check while another node runs: see _then)

    def _at_once(self, rec: Recorder, quick: Observation | None) -> Observation | None:
        """What :meth:`_plain_now` makes of a plain node's call that did not wait: None (nothing
        recorded: ``rec`` serves the next node), or its observation, its records buffered."""
        if quick is None:
            self._spare = rec
            return None
        self._buffer(rec)
        if rec.call is None:  # emptied, and held by nothing else: the next node's
            self._spare = rec
        return quick

    async def _started(self, k: str, started: Started) -> Observation:
        """The observation of a plain node's call :meth:`_plain_now` began."""
        rec, pending = started
        try:
            obs = await pending
        except BaseException as exc:
            return self._failed(k, rec, exc)
        self._buffer(rec)
        return obs

    def _failed(self, k: str, rec: Recorder, exc: BaseException) -> Observation:
        """The observation of a plain node's begun call that raised ``exc``, its records
        buffered: a cancel of its task ends it as an aborted read, a failure of ours is typed,
        anything else is raised again."""
        if isinstance(exc, asyncio.CancelledError):
            rec.add("plan_node_cancelled", {"node": k, "phase": "running"})
            self._buffer(rec)
            return self._aborted_read(k, "abort requested; the read was cancelled")
        if isinstance(exc, Exception):
            obs = self.engine.internal(exc, rec)
            self._buffer(rec)
            return obs
        self._buffer(rec)
        raise exc

    async def _solo(self, k: str) -> None:
        """A node of a tool that waited before (one :meth:`_drive` does not begin itself), in a
        task of its own. Then the task drives what is ready."""
        if self._closed or k not in self.running:  # settled (cancelled) before its task began
            self._check_settled()
            return
        self.running[k] = asyncio.current_task()
        closed = self.engine.executor.closed
        wave = self._then(k, self._not_begun(k) if closed else await self._body(k, self.plan.nodes[k]))
        if wave:
            await self._drive(wave)

    def _then(self, k: str, obs: Observation) -> list[str]:
        """Settle ``k`` with ``obs`` in the node's own task; the wave that task drives next (none:
        the plan was told whether it settled)."""
        if k in self.running:
            self._finish(k, obs)
        if self.cancel_scope is not None:  # only its aborts cancel a node's task
            task = asyncio.current_task()
            assert task is not None
            if task.cancelling():  # as in _drive: an aborted read's cancel is not carried further
                self._pump()
                return []
        if self._closed or not (self._newly_ready or self._deferred or self._ready.queued):
            wave = []  # what _take_wave would find: nothing released, nothing queued
        else:
            wave = self._take_wave()
        if not wave and (self.settled == len(self.plan.nodes) or not self.running):
            self._check_settled()  # (nothing to check while another node runs: see there)
        return wave

    async def _body(self, k: str, node: CheckedNode) -> Observation:
        """One node's final observation (aborts and the cancel hook's answer applied)."""
        if k in self.abort_requested and is_safe(node):  # aborted in its wave, before its turn
            return self._aborted_read(k, "abort requested; the read was cancelled")
        try:
            obs = await (self._plain(node) if is_plain(node) else self._node(node))
        except asyncio.CancelledError:
            obs = self._aborted_read(k, "abort requested; the read was cancelled")
        except Exception as exc:  # a bug of ours: typed, and the plan goes on
            rec = Recorder(self.run_state, self._call_id(k))
            obs = self.engine.internal(exc, rec)
            self._buffer(rec)
        if self.cancel_scope is not None and self.cancel_scope._pending() and k in self.running:
            self._apply_cancel()  # asked while a read ran inline (it could not be interrupted)
        if self.abort_requested:
            if k in self.abort_requested and obs.status == "ok" and is_safe(node):
                why = "abort requested while it ran; its result was discarded"
                obs = self._aborted_read(k, why)
            answer = self.abort_answers.pop(k, None)
            if answer is not None:
                obs = abort_outcome(obs, await answer)
        return obs

    def _not_begun(self, k: str) -> Observation:
        """Node ``k``'s observation when the runtime closed before it began: ``cancelled``, not
        sent (``details["sent"]`` False), recorded as cancelled before it was dispatched."""
        self._record(None, "plan_node_cancelled", {"node": k, "phase": "not_dispatched", "reason": "closed"})
        spec = self.plan.nodes[k].specs[0]
        error = ActionError.of("cancelled", NOT_BEGUN, details={"sent": False, "phase": "not_dispatched"})
        return Observation.failure(error, call_id=self._call_id(k), tool=spec.name, tool_version=spec.version)

    def _finish(self, k: str, obs: Observation, node: CheckedNode | None = None) -> None:
        """Settle running node ``k`` (``node``: its checked node, when at hand) with ``obs``."""
        del self.running[k]
        if node is None:
            node = self.plan.nodes[k]
        if self.tool_limits:
            self.per_tool[node.specs[0].name] -= 1
        if k in self.abort_requested and obs.status == "ok":
            cancel = {**obs.diagnostics.get("cancel", {}), "phase": "committed", "undone": False}
            obs = dataclasses.replace(obs, diagnostics={**obs.diagnostics, "cancel": cancel})
        self._settle(k, obs, node)
        newly = self._newly_ready
        if newly:  # queued now, so a cancel arriving before the next wave finds them
            self._ready.extend(newly)
            newly.clear()


def _current() -> asyncio.Task[Any]:
    task = asyncio.current_task()
    assert task is not None
    return task


def is_safe(node: CheckedNode) -> bool:
    """Every tool of ``node`` may be stopped mid-call (no side effects, or reads only)."""
    return all(spec.effect in _SAFE_TO_ABORT for spec in node.specs)
