"""What a run of the service makes of a tool that raised past its own failures.

A tool may raise ``SystemExit`` (a library calling ``sys.exit()``) or ``KeyboardInterrupt``: under
the library's own callers these go on up to the caller, as if the tool had run in its thread
(docs/errors.md). In the service the caller is a run on a lane, and nobody above it may stop: the
server goes on. So the call ends typed here, as the model and the API are told of any failure: a
tool with side effects may have acted before it stopped (its ledger entry was left ``dispatched``
or ``unknown``, and is never sent again on its own): ``unknown_commit``; a read ``unclassified``,
as any exception nobody classified. The run then goes on with its next calls, as after any failed
call; a plan that stopped this way ends ``error``, its writes caught in flight ``unknown_commit``.
A cancel (the runner closing) is never taken for one: it goes on up.

Such an exception raised in a task of its own (a plan's node) would end that task, leave the plan
waiting for the node forever, and escape the lane's ``run_forever``: every task a lane makes is
:func:`watched_task`, which hands it to the run that task belongs to (:class:`RunStop`, its root
task cancelled, the run then ends typed: :meth:`RunStop.taken`), and ends the task cancelled.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
from collections.abc import Coroutine, Mapping
from typing import Any

from actionspace.errors import ActionError
from actionspace.policy.principal import Principal
from actionspace.runtime import Runtime
from actionspace.types import Observation, ToolCall

__all__ = ["RunStop", "acall_typed", "begin_run", "in_flight_nodes", "stops", "taken", "watched_task"]

_IN_FLIGHT = ("dispatched", "unknown", "unknown_commit")


class RunStop:
    """What a tool of one run raised in a task of the run's own: the run's root task is cancelled
    with it noted here, for the run to end typed rather than be taken for cancelled."""

    __slots__ = ("_raised", "_root")

    def __init__(self, root: asyncio.Task[Any]) -> None:
        self._root, self._raised = root, None

    _raised: BaseException | None

    def __call__(self, exc: BaseException) -> None:
        if self._raised is None and not self._root.done():
            self._raised = exc
            self._root.cancel()

    def taken(self, exc: BaseException) -> BaseException | None:
        """What a tool raised, when ``exc`` is the cancel this stop made (then taken back)."""
        if not isinstance(exc, asyncio.CancelledError) or self._raised is None:
            return None
        raised, self._raised = self._raised, None
        self._root.uncancel()
        return raised


_RUN_STOP: contextvars.ContextVar[RunStop | None] = contextvars.ContextVar("actionspace_stop", default=None)
"""The :class:`RunStop` of the run the current task belongs to (a run's tasks inherit it)."""


def begin_run() -> RunStop:
    """In a run's root task: its :class:`RunStop`, which the tasks it makes inherit."""
    task = asyncio.current_task()
    assert task is not None
    stop = RunStop(task)
    _RUN_STOP.set(stop)
    return stop


def taken(exc: BaseException) -> BaseException | None:
    """What a tool raised, when ``exc`` is it, or the cancel a task of this run made for it: the
    run ends that call or plan typed; None for anything else (a real cancel goes on up)."""
    if stops(exc):
        return exc
    stop = _RUN_STOP.get()
    return None if stop is None else stop.taken(exc)


def watched_task(loop: asyncio.AbstractEventLoop, coro: Any, /, **kwargs: Any) -> asyncio.Task[Any]:
    """A lane's task factory: a task that hands a tool's ``SystemExit`` / ``KeyboardInterrupt`` to
    its run (:data:`RUN_STOP`) and ends cancelled, instead of ending with it. A task cancelled
    before its first step never began ``coro``: it is closed then, not left to the collector
    unawaited."""
    task = asyncio.Task(_watched(coro), loop=loop, **kwargs)
    task.add_done_callback(lambda _task: _close_unbegun(coro))
    return task


def _close_unbegun(coro: Any) -> None:
    if inspect.iscoroutine(coro) and inspect.getcoroutinestate(coro) == inspect.CORO_CREATED:
        coro.close()


async def _watched(coro: Coroutine[Any, Any, Any]) -> Any:
    try:
        return await coro
    except (KeyboardInterrupt, SystemExit) as exc:
        stop = _RUN_STOP.get()
        if stop is None:  # no run's: it goes on up (the lane's loop lives through it, loop.py)
            raise
        stop(exc)
        raise asyncio.CancelledError from exc


def stops(exc: BaseException) -> bool:
    """``exc`` is what a tool let out past its own failures (not an ``Exception``, not a cancel,
    not the close of a coroutine)."""
    return not isinstance(exc, Exception | asyncio.CancelledError | GeneratorExit)


async def acall_typed(
    rt: Runtime, call: ToolCall, *, run_id: str, node_id: str, principal: Principal
) -> Observation:
    """``rt.acall(call)``, ended typed (and traced) when its tool raised past its own failures."""
    try:
        return await rt.acall(call, run_id=run_id, node_id=node_id, principal=principal)
    except BaseException as exc:
        raised = taken(exc)
        if raised is None:
            raise
        obs = _stopped(rt, call, f"{run_id}:{node_id}", raised)
    assert obs.error is not None
    error = obs.error
    shown = {"status": "error", "tool": obs.tool, "version": obs.tool_version, "category": error.category}
    await asyncio.to_thread(rt.record, run_id, "observation", {**shown, "raised": error.details["raised"]})
    return obs


def _stopped(rt: Runtime, call: ToolCall, call_id: str, exc: BaseException) -> Observation:
    name, _, asked = call.name.partition("@")
    spec = rt.catalog.find(call.name) if asked else rt.catalog.current(name)
    raised = type(exc).__name__
    if spec is None or spec.has_side_effects:
        error = ActionError.of(
            "unknown_commit",
            f"{name} raised {raised} while it ran; it may have acted: query its status",
            details={"raised": raised},
        )
    else:
        error = ActionError.of("unclassified", f"{name} raised {raised}", details={"raised": raised})
    version = spec.version if spec is not None else (asked or None)
    return Observation.failure(error, call_id=call_id, tool=name, tool_version=version)


async def in_flight_nodes(rt: Runtime, run_id: str, plan: Mapping[str, Any]) -> dict[str, str]:
    """The nodes of ``plan`` whose writes a stop caught in flight (their entries not settled):
    ``unknown_commit`` each, as the run's failures say."""
    nodes = plan.get("nodes")
    if not isinstance(nodes, list):
        return {}
    ids = [n["id"] for n in nodes if isinstance(n, Mapping) and isinstance(n.get("id"), str)]
    try:
        found = await asyncio.to_thread(rt.ledger.entries_of, run_id, ids)
    except Exception:  # the ledger cannot answer: the run still ends, its reason says why
        return {}
    return {k: "unknown_commit" for k, entry in found.items() if entry.state in _IN_FLIGHT}
