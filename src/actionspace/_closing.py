"""What a closed Runtime answers.

Every entry point used after ``Runtime.close()`` raises :class:`ConfigurationError` (misuse of the
API, DESIGN §4) before it touches a store. A call already running when the runtime closes ends as
a typed observation: a read ``cancelled`` (one that finished while the stores were open keeps its
own answer, which the trace holds); a write that may have been sent ``unknown_commit`` unless its
ledger entry still answers what happened. Before the stores close, the ledger entry of every write
whose send began is moved from ``dispatched`` to ``unknown``, with the reason noted (recovery or
``ledger resolve`` settles it). ``unknown`` says a write was sent and its outcome is not known
(DESIGN §6): a write whose intent is written but whose send had not begun (``LedgerDriver.sending``
says which began) is never sent after the close began, so it is not noted; its call ends it
``failed`` (``cancelled``, not sent), and until then it reads ``dispatched``, its intent durable as
every write's is before its send. The same holds for every call of a message (``call_all``,
``acall_all``), every node of a plan (an atomic group is one write: its send begins when its
members begin to run in its transaction, and ``LedgerDriver.sending`` holds its key from then), and
the final observation of a stream; a call the closed ledger refused before anything was
sent ends ``cancelled``, as does a call that had not begun when the runtime closed
(``Executor.closed`` is read before every send) and a plan node that never ran.

A plan running in process is not left to run on (:func:`end_running_plans`, right after
``Executor.closed`` is set): its running writes are noted ``unknown`` first, then its loop
cancels every running node's call and settles every queued node as not sent; before the stores
close, the closing thread waits (at most :data:`PLAN_END_WAIT_S`) for each such plan to record
its ``plan_finished``, unless the plan runs on the closing thread's own loop: then it ends after
``close()`` returned, and the stores stay open until it stored its end (:func:`plan_run`).

A single call (``acall``), a message (``acall_all``) or a stream (``astream``) waiting for its
tool is cut the same way (:func:`end_running_calls`, :class:`~actionspace.pipeline.calls.InFlight`):
its write's ledger entry noted ``unknown`` first, then its task cancelled on its own loop where it
awaits the tool; it returns typed at once (a sync tool's worker thread goes on: its late answer is
settled as any abandoned attempt's). The closing thread waits (bounded) for what it recorded to be
stored, unless it runs on that loop itself: then the call ends after ``close()`` returned (its
ledger entry was noted before), and the stores stay open until each such call and plan stored
its events (:func:`close_stores`, at most :data:`TRACE_KEPT_S`). A write cut while its intent was
being written on a worker thread is not sent: its entry ends ``failed`` (``cancelled``, not sent)
before the call ends (``pipeline.commit.LedgerDriver``).

A sync call (``rt.call``, ``rt.call_all``, a session's ``handle``) runs its tool on its caller's
thread, or on a worker thread its caller waits for: nothing can cut it. Before the stores close,
the closing thread waits for such calls of other threads (at most :data:`SYNC_CALL_WAIT_S`): one
that ends meanwhile settles its entry, stores its events and answers what it answered; one that
runs on ends typed when its tool returns (its entry noted ``unknown`` first if its send began, its
later events lost with the closed store, so a read ends ``cancelled``). A call (sync or async)
whose blocking tool still waited for a worker thread is withdrawn as the runtime closes: never
sent, it ends ``cancelled`` (not sent), its entry ``failed``, never ``unknown`` on the way.

Whether a write's send began is decided by its :class:`~actionspace.execution._sends.SendGate`,
noted in ``LedgerDriver.sending`` before the write reads ``Executor.closed``: the close withdraws
each gate it can (:func:`_sending`) and notes ``unknown`` only the writes whose gate had opened, so
a close landing between the write's read and its send withdraws it rather than miss it.

The run-state store closes with the others unless a call or plan still runs (one the close could
not end, which may still save its run's state): then it closes once the last of them left
(:func:`close_when_nothing_runs`), its saves kept.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import threading
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, NoReturn, Protocol

from actionspace.catalog.registry import Catalog
from actionspace.errors import CATEGORIES, ActionError, ConfigurationError
from actionspace.ledger.entries import LedgerEntry, LedgerStore
from actionspace.pipeline.calls import CLOSED_WHILE_RUNNING, group
from actionspace.pipeline.runs import CLOSED
from actionspace.plan.groups import GROUP_TOOL_PREFIX
from actionspace.plan.model import PlanResult, PlanStatus
from actionspace.plan.scheduler import running_plans
from actionspace.types import Observation

if TYPE_CHECKING:
    from actionspace.pipeline.engine import Engine

__all__ = [
    "answered",
    "close_stores",
    "close_when_nothing_runs",
    "closed_error",
    "end_running_calls",
    "end_running_plans",
    "ended_by_close",
    "ended_stream",
    "note_cut_writes",
    "plan_ended_by_close",
    "plan_run",
    "refuse_closed",
]

_CUT = CLOSED_WHILE_RUNNING
_DECIDED_BEFORE_SENDING = frozenset(CATEGORIES[: CATEGORIES.index("conflict")])
"""Errors the stages answer before a tool runs (DESIGN §4: the categories before ``conflict``):
they stay as they are after a close."""
_NOT_THE_TOOLS = frozenset({"cancelled", "internal"})
"""Errors of a read that are not its tool's answer (a cut, or a store closed under it): the read
ends ``cancelled`` after a close, whatever it answered."""

_log = logging.getLogger("actionspace")

PLAN_END_WAIT_S = 2.0
"""How long ``close()`` waits, in all, for the plans it ended to record their end (seconds)."""
TRACE_KEPT_S = 5.0
"""How long, at most, the stores stay open after a ``close()`` called on the loop of calls or
plans it cut, for those to store their events and their writes' ledger steps (seconds)."""
SYNC_CALL_WAIT_S = 2.0
"""How long ``close()`` waits, in all, for the sync calls other threads run (``rt.call``,
``rt.call_all``, a session's ``handle``) to end before the stores close: their tools run on their
callers' threads, or on threads their callers wait for, which nothing can cut (seconds)."""
PLAN_CUT_SEEN_S = 0.5
"""How long ``close()`` waits for a plan's loop to take the cut: a loop held longer by a call it
cannot interrupt (a tool run on it) ends the plan after the stores closed (seconds)."""


def closed_error() -> ConfigurationError:
    """The exception every entry point of a closed Runtime raises."""
    return ConfigurationError(CLOSED)


class Closing(Protocol):
    """What :func:`ended_by_close` reads of a Runtime."""

    catalog: Catalog
    ledger: LedgerStore

    @property
    def engine(self) -> Engine:
        """Its call engine (``engine.runs.closed`` is set when the runtime closes)."""
        ...


def refuse_closed() -> NoReturn:
    """Raise :func:`closed_error` (``rt._closed and refuse_closed()``: one attribute read per call)."""
    raise closed_error()


def answered(out: Sequence[Observation], rt: Closing, run_id: str) -> Observation:
    """The one observation answering a call of ``rt.call`` (several calls: grouped in ``items``),
    each as :func:`ended_by_close` ends it."""
    out = ended_by_close(out, rt, run_id)
    return out[0] if len(out) == 1 else group(out, run_id)


def ended_by_close(out: Sequence[Observation], rt: Closing, run_id: str) -> list[Observation]:
    """``out`` as it is while ``rt`` is open; else the observations of calls that were running
    when their runtime closed: what the stages refused stays; a call the closed ledger refused
    before sending is ``cancelled``; a write whose ledger entry still answers its outcome stays;
    any other write (an atomic group is one) is ``unknown_commit``, any other read ``cancelled``.
    ``out`` empty (the call broke on a closed store before it had any): one ``cancelled``
    observation."""
    if not rt.engine.runs.closed:
        return list(out)
    if not out:
        return [Observation.failure(ActionError.of("cancelled", _CUT), call_id=f"{run_id}:closed", tool="")]
    stored = rt.engine.messages.in_flight.stores_open  # read after the calls stored their events
    return [_ended(obs, rt.catalog, rt.ledger, stored) for obs in out]


async def plan_run(run: Awaitable[PlanResult], rt: Closing, *, in_process: bool) -> PlanResult:
    """``run``'s result as :func:`plan_ended_by_close` ends it. A plan ``in_process`` is
    registered with the calls in flight meanwhile (``InFlight.open``), so a ``close()`` on its
    own loop keeps the stores open until it ended (:func:`close_stores`) and one on another
    thread waits (bounded) for its result."""
    in_flight = rt.engine.messages.in_flight
    opened = in_flight.open() if in_process else None
    try:
        return plan_ended_by_close(await run, rt)
    finally:
        in_flight.done(opened)


def plan_ended_by_close(result: PlanResult, rt: Closing) -> PlanResult:
    """``result`` with every node observation as :func:`ended_by_close` ends it, when ``rt`` closed
    while the plan ran (else ``result`` as it is)."""
    if not rt.engine.runs.closed or result.error is not None:
        return result
    stored = rt.engine.messages.in_flight.stores_open
    nodes = {k: _ended(obs, rt.catalog, rt.ledger, stored) for k, obs in result.nodes.items()}
    statuses = {obs.status for obs in nodes.values()}
    status: PlanStatus = "ok" if statuses <= {"ok"} else ("partial" if statuses - {"error"} else "error")
    return dataclasses.replace(result, nodes=nodes, status=status)


async def ended_stream(
    stream: AsyncGenerator[Observation, None], rt: Closing
) -> AsyncGenerator[Observation, None]:
    """``stream``'s observations; a final one that came after ``rt`` closed as :func:`ended_by_close`
    ends it (provisional ones are never authoritative, so they pass as they are)."""
    try:
        async for obs in stream:
            if rt.engine.runs.closed and not obs.provisional:
                obs = _ended(obs, rt.catalog, rt.ledger, rt.engine.messages.in_flight.stores_open)
            yield obs
    finally:
        await stream.aclose()


def _ended(obs: Observation, catalog: Catalog, ledger: LedgerStore, stored: bool) -> Observation:
    """``obs`` of a call that ended while its runtime closed; ``stored``: the stores were still open
    when it ended, so the events it recorded are stored (a read's own answer is then kept)."""
    if obs.error is not None and obs.error.category in _DECIDED_BEFORE_SENDING:
        return obs
    if obs.error is not None and obs.error.category == "cancelled" and _never_sent(obs.error):
        return obs  # not begun (the runtime closed first, or a plan node blocked): it says so already
    if obs.error is not None and obs.error.details.get("sent") is False:  # the closed ledger refused it
        error = ActionError.of("cancelled", f"{_CUT}; it was not sent", details={"sent": False})
        return Observation.failure(error, call_id=obs.call_id, tool=obs.tool, tool_version=obs.tool_version)
    spec = catalog.current(obs.tool)
    writes = obs.tool.startswith(GROUP_TOOL_PREFIX) if spec is None else spec.has_side_effects
    if not writes:
        if stored and (obs.error is None or obs.error.category not in _NOT_THE_TOOLS):
            return obs  # a read that finished: safe to, and its answer is in the trace
        error = ActionError.of("cancelled", _CUT)
        return Observation.failure(error, call_id=obs.call_id, tool=obs.tool, tool_version=obs.tool_version)
    key = obs.diagnostics.get("idempotency_key")
    if isinstance(key, str) and _settled_as_answered(obs, ledger, key):
        return obs
    if obs.error is not None and obs.error.category == "unknown_commit":
        return obs
    error = ActionError.of(
        "unknown_commit",
        f"{_CUT}; the write may have committed",
        resource_ids=(key,) if isinstance(key, str) else (),
        details={"idempotency_key": key} if isinstance(key, str) else {},
    )
    return Observation.failure(error, call_id=obs.call_id, tool=obs.tool, tool_version=obs.tool_version)


def _never_sent(error: ActionError) -> bool:
    """``error`` ends a call that was never sent: not begun, or a plan node that never ran."""
    return error.details.get("sent") is False or error.details.get("phase") == "not_dispatched"


def _settled_as_answered(obs: Observation, ledger: LedgerStore, key: str) -> bool:
    """The ledger (when it can still be read) holds the outcome ``obs`` reports."""
    try:
        entry = ledger.get(key)
    except Exception:  # the store is closed: nothing confirms the outcome
        return False
    if entry is None:
        return False
    return entry.state == ("committed" if obs.error is None else "failed")


def end_running_plans(engine: Engine) -> None:
    """End every plan running in process over ``engine`` (``Executor.closed`` is set): the ledger
    entries of its running writes noted ``unknown`` (as :func:`note_cut_writes` notes them), then
    its loop told to cut its calls (``Scheduler.end_by_close``); then every other call in flight
    (:func:`end_running_calls`)."""
    ledger = engine.ledger
    for plan in running_plans(engine):
        run_id = plan.run_state.run_id
        for node_id in plan.cut_writes():
            _note_unknown(ledger, functools.partial(ledger.get_node, run_id, node_id), node_id, engine)
        plan.end_by_close()
    end_running_calls(engine)


def end_running_calls(engine: Engine) -> None:
    """End every single call, message and stream of ``engine`` waiting for its tool now (async
    callers): the ledger entries of its writes noted ``unknown``, then each cut on its own loop
    (``InFlight.cut``): it ends there ``cancelled`` (a read) or ``unknown_commit`` (a write)."""
    ledger = engine.ledger
    in_flight = engine.messages.in_flight
    for key in in_flight.writes():
        _note_unknown(ledger, functools.partial(ledger.get, key), key, engine)
    in_flight.cut()


def note_cut_writes(engine: Engine) -> None:
    """Wait for the plans :func:`end_running_plans` ended to record their end (bounded), then move
    the ledger entries of the writes ``engine`` still runs (atomic groups included) from
    ``dispatched`` to ``unknown``, noting that the runtime closed under them (a write that settled
    meanwhile is left as it settled)."""
    _wait_for_plans(engine)
    ledger = engine.ledger
    for key in list(engine.writing):
        _note_unknown(ledger, functools.partial(ledger.get, key), key, engine)


def close_stores(engine: Engine, close: Callable[[], object]) -> None:
    """``close`` (the stores') now, or, when ``close()`` runs on the loop of calls or plans it cut
    (they end only once it returned), once each of them stored what it recorded: every event of
    a call or plan that began reaches the trace, every step of its writes the ledger. Bounded: at
    :data:`TRACE_KEPT_S` after the call the stores close whatever still runs (the loop must be
    running for that; at the interpreter's exit the deferred writes are committed anyway).
    ``InFlight.stores_open`` turns False just before they close."""
    in_flight = engine.messages.in_flight
    pending = in_flight.ending_here()
    if not pending:
        in_flight.stores_open = False
        close()
        return
    loop = asyncio.get_running_loop()
    left = [len(pending)]
    closed: list[bool] = []

    def once() -> None:
        if not closed:
            closed.append(True)
            in_flight.stores_open = False
            try:
                close()
            except Exception:  # a store already failing: its own close reports it
                _log.exception("actionspace: the stores could not be closed")

    def ended() -> None:
        left[0] -= 1
        if left[0] > 0:
            return
        try:  # once the task that ended last took its answer (ended_by_close reads stores_open)
            loop.call_soon_threadsafe(once)
        except RuntimeError:  # its loop is closed
            once()

    for cut in pending:
        cut.ended.then.append(ended)
    loop.call_later(TRACE_KEPT_S, once)


def nothing_runs(engine: Engine) -> bool:
    """No call or plan of ``engine`` runs now: none can save its run's state after the stores close."""
    in_flight = engine.messages.in_flight
    return not (in_flight.tasks or in_flight.calls or in_flight.sync or running_plans(engine))


def close_when_nothing_runs(engine: Engine, close: Callable[[], object]) -> None:
    """``close`` (the run-state store's) now if no call or plan of ``engine`` runs; else once the
    last of them left (``InFlight.quiet``, told by each as it leaves, on its thread), having
    saved its run's state: a call the close could not end (a sync tool running on past
    :data:`SYNC_CALL_WAIT_S`, a loop held past :data:`PLAN_CUT_SEEN_S`) may still save it, and
    that save is kept, yet the store does not outlive the last of them."""
    in_flight = engine.messages.in_flight
    lock = threading.Lock()
    closed: list[bool] = []

    def quiet() -> None:
        if closed or not nothing_runs(engine):
            return
        with lock:
            if closed:
                return
            closed.append(True)
        in_flight.quiet = None
        try:
            close()
        except Exception:  # a store already failing: its own close reports it
            _log.exception("actionspace: the run-state store could not be closed")

    in_flight.quiet = quiet
    quiet()  # after it is set: a call that left before is seen here, one that leaves after calls it


def _wait_for_plans(engine: Engine) -> None:
    deadline = time.monotonic() + PLAN_END_WAIT_S
    for plan in running_plans(engine):
        if plan.on_this_thread():  # its loop waits for this close to return: it ends after it
            continue
        left = deadline - time.monotonic()
        if left > 0 and plan.cut_seen.wait(min(left, PLAN_CUT_SEEN_S)):
            plan.ended.wait(max(0.0, deadline - time.monotonic()))
    in_flight = engine.messages.in_flight
    in_flight.wait(time.monotonic() + PLAN_END_WAIT_S)  # the calls it cut, stored
    in_flight.wait_sync(time.monotonic() + SYNC_CALL_WAIT_S)  # the sync calls it cannot cut


def _note_unknown(
    ledger: LedgerStore, read: Callable[[], LedgerEntry | None], name: str, engine: Engine
) -> None:
    """The entry ``read`` returns moved from ``dispatched`` to ``unknown``, the close noted, when
    its send began (``engine``'s ledger driver is sending it: a single write, or an atomic
    group's members running in their transaction or committing). ``unknown`` says a write was
    sent and its outcome is not known (DESIGN §6): an entry whose send had not begun is never
    sent after the close began, and its call ends it ``failed`` (not sent); until then it stays
    ``dispatched``, its intent durable, as every write's is before its send."""
    error = ActionError.of("unknown_commit", f"{_CUT}; the write may have committed").to_dict()
    try:
        entry = read()
        if entry is not None and entry.state == "dispatched" and _sending(engine, entry.key):
            ledger.transition(entry.key, ("dispatched",), entry.evolve(state="unknown", error=error))
    except Exception:  # a store already failing: recovery settles the entry from ``dispatched``
        _log.exception("actionspace: the write %s cut by close() could not be noted unknown", name)


def _sending(engine: Engine, key: str) -> bool:
    """The send of ``key`` began (``LedgerDriver.sending``): its gate could not be withdrawn. A
    gate withdrawn here is never opened after (``execution/_sends.py``): that write is not sent,
    and its call ends it ``failed`` (``cancelled``, not sent)."""
    driver = engine.driver
    gates = [gate for at, gate in list(driver.gates.items()) if driver.sending.get(at) == key]
    began = [not gate.withdraw() for gate in gates]  # every one withdrawn that can be
    return any(began)
