"""Runs started through the API: they run in the background, and wait for approvals.

A node or call the authorize stage holds for approval does not end the run: the runner polls
the approval store (and is woken at once by decisions taken through this process's API) until
the request is decided, then runs the call again. The gate lets the approved call through
exactly once, bound to its argument digest; a denied call ends ``permission_denied``. A request
still pending when ``approval_wait_s`` runs out leaves the node with its ``needs_approval`` error.

Runs execute on lanes, threads with their own event loops (one lane per group of principals, see
``service/lanes.py``), so they outlive the request that started them, do not depend on the web
server's loop, and a run of one principal does not hold up another's. Parsing a raw output runs
off the lanes under ``parse_timeout_s``. Approvals decided for calls no run here
is waiting on (for example a pending call the demo left in the store) can be *resumed*: the
approved call is sent again under the same run and node, re-authorized as the principal that
proposed it (recorded in the request), never as the runtime's default principal. When no live
server drives its run, the resuming server takes it over (see ``service/continuation.py``); a run
whose driver died while no call of it waited for a person is found by a scan (``service/leases.py``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import functools
import inspect
import logging
import threading
import time
from collections.abc import Coroutine, Mapping, Sequence
from typing import Any, Literal

from actionspace.approval.requests import ApprovalRequest
from actionspace.errors import ActionError
from actionspace.plan.model import PlanResult
from actionspace.policy.principal import Principal
from actionspace.runtime import Runtime
from actionspace.service._call_runs import CallRuns
from actionspace.service._stopped import begin_run, in_flight_nodes, taken
from actionspace.service.continuation import (
    SUBMITTED_KIND,
    Submission,
    outlast,
    release,
    submission_event,
    take_over,
    without,
)
from actionspace.service.finishing import finish_once
from actionspace.service.held_calls import proposer, refusal, send_held
from actionspace.service.held_nodes import held_request, labels_lost, note_held
from actionspace.service.lanes import Lanes
from actionspace.service.leases import Drives, settle_in_flight
from actionspace.service.quotas import HeldBytes, Holding, LiveRuns
from actionspace.service.runner_config import RunnerConfig
from actionspace.types import Observation

__all__ = ["BackgroundRuns", "LiveState", "RunnerConfig"]

_log = logging.getLogger("actionspace.service")

LiveState = Literal["running", "waiting_approval"]


class _HandedOver(Exception):
    """A run released while it waited for a person was taken over by another server."""


class BackgroundRuns(CallRuns):
    """Starts, tracks and wakes the runs of one API server."""

    def __init__(
        self,
        rt: Runtime,
        config: RunnerConfig | None = None,
        *,
        max_held_bytes: int | None = None,
        max_live_runs: int | None = None,
    ) -> None:
        """``max_held_bytes``: bytes of submissions one tenant's live runs here may hold, those
        taken over included (see :class:`~actionspace.service.quotas.HeldBytes`; None: unbounded);
        ``max_live_runs``: runs one principal may have live here, those taken over included (see
        :class:`~actionspace.service.quotas.LiveRuns`; None: unbounded)."""
        self.rt = rt
        self.config = config or RunnerConfig()
        self.held = HeldBytes(max_held_bytes, self.is_active)
        self.live_runs = LiveRuns(max_live_runs, self.is_active)
        self._lanes = Lanes(self.config.lanes)
        self._lock = threading.Lock()
        self._run_loop: dict[str, asyncio.AbstractEventLoop] = {}  # live run id → its lane's loop
        self._state: dict[str, LiveState] = {}
        self._futures: dict[str, concurrent.futures.Future[str]] = {}
        self._waiting: dict[str, str] = {}  # request id → run id
        self._wake: dict[str, asyncio.Event] = {}  # run id → event, set by notify()
        self._holders: dict[str, int] = {}  # live run id → its run and resumed calls on the lanes
        self._owned: set[str] = set()  # live run ids started here (not only resumed calls of them)
        self._claimed: set[str] = set()  # run ids a request is starting (see claim())
        scan = self._scan if self.config.resume_orphans else None
        self._drives = Drives(rt, self.config.driver_lease_s, scan)  # see service/continuation.py
        self._server = self._drives.server
        self._closed = False

    def start(self) -> None:
        """Renew this server's leases, and continue runs whose driver is gone while no call of
        theirs waited for a person (at once, then every lease; see ``service/leases.py``)."""
        self._drives.start()

    # ------------------------------------------------------------------ starting runs
    def claim(self, run_id: str) -> bool:
        """Reserve ``run_id`` for a run about to start here; False when a run or a resumed call of
        that id is live here, or another request claimed it first. :meth:`release` it afterwards
        (its run, once started, stays live until it ends)."""
        with self._lock:
            if run_id in self._state or run_id in self._claimed:
                return False
            self._claimed.add(run_id)
            return True

    def release(self, run_id: str) -> None:
        """Drop the claim of :meth:`claim`."""
        with self._lock:
            self._claimed.discard(run_id)

    def start_plan(self, plan: Mapping[str, Any], *, run_id: str, principal: Principal) -> None:
        """Run ``plan`` (Plan JSON) in the background; the run must have been created already.
        What it was given is recorded first, so that another server may continue it."""
        self._drive(run_id, submission_event("plan", dict(plan), self._server, self._drives.until()))
        self._submit(run_id, self._plan(dict(plan), run_id, principal), lane=principal.id)

    def start_calls(self, calls: Sequence[Any], *, run_id: str, principal: Principal) -> None:
        """Run raw model outputs one after another in the background (recorded as ``start_plan``)."""
        self._drive(run_id, submission_event("calls", list(calls), self._server, self._drives.until()))
        self._submit(run_id, self._calls(list(calls), run_id, principal), lane=principal.id)

    def _drive(self, run_id: str, submitted: Mapping[str, Any]) -> None:
        if self._closed:
            return  # refused by _submit, which closes the run's coroutine
        self.rt.record(run_id, SUBMITTED_KIND, submitted)
        self._drives.add(run_id)

    def _finish(self, run_id: str, **data: Any) -> None:
        """End ``run_id``, unless it ended already or another server took it over (that server
        ends it): one ``run_finished`` per run (``service/finishing.py``); its lease is no longer
        renewed."""
        self._drives.discard(run_id)
        finish_once(self.rt, run_id, self._server, data)

    def _scan(self) -> None:
        """Take over the runs whose driver is gone while no call of theirs waited for a person,
        those its tenant's runs here have room for (the others are left to a later scan)."""
        for run_id in self._drives.lapsed(self.is_active):
            if self._closed or not self.claim(run_id):
                continue
            holding, started = Holding(self.held, run_id, self.live_runs), False
            try:
                if (taken := self._drives.adopt(run_id, holding.admit)) is not None:
                    self._submit(run_id, self._adopted(run_id, *taken), lane=taken[1].id)
                    started = True
            except RuntimeError:  # closing: another server continues it
                self._drives.let_go(run_id)
            finally:
                holding.settle(started=started)
                self.release(run_id)
            if holding.refused:
                _log.info("actionspace: run %s left for a later scan: no room for it here", run_id)

    async def _adopted(self, run_id: str, taken: Submission, principal: Principal) -> str:
        """Run a run taken over again (what committed is replayed, what was in flight settled
        first as recovery does)."""
        await asyncio.to_thread(settle_in_flight, self.rt, run_id)
        if taken.mode == "plan":
            return await self._plan(dict(taken.body), run_id, principal)
        return await self._calls(list(taken.body), run_id, principal)

    def resume(self, request: ApprovalRequest) -> bool:
        """Send an approved call that no run here waits on; False when nothing was started."""
        if not self.config.resume_orphans or request.status != "approved":
            return False
        if self.rt.catalog.find(request.tool) is None:
            return False
        key = f"{request.run_id}#{request.id}"
        with self._lock:
            # a run started here sends its own held calls again; other resumed calls do not block
            if key in self._futures or request.run_id in self._owned or request.run_id in self._claimed:
                return False
        proposer = request.details.get("proposed_by")
        lane = str(proposer.get("id", "")) if isinstance(proposer, Mapping) else ""
        self._submit(key, self._resume(request), live_id=request.run_id, lane=lane)
        return True

    def _submit(
        self, key: str, coro: Coroutine[Any, Any, str], *, lane: str, live_id: str | None = None
    ) -> None:
        if self._closed:
            coro.close()
            raise RuntimeError("the background runner is closed")
        live = live_id or key
        loop = self._lanes.loop_for(lane)
        with self._lock:
            self._holders[live] = self._holders.get(live, 0) + 1
            if live_id is None:
                self._owned.add(live)
            self._state[live] = "running"
            self._wake.setdefault(live, asyncio.Event())
            self._run_loop.setdefault(live, loop)
        future = self._lanes.run(loop, self._guarded(live, coro))  # closed if its lane never runs it
        future.add_done_callback(lambda _done: self._never_begun(live, coro))
        with self._lock:
            self._futures[key] = future

    def _never_begun(self, run_id: str, coro: Coroutine[Any, Any, str]) -> None:
        """When a run's task is done: one cancelled before its first step (the runner closing)
        never entered :meth:`_guarded`, so its run's coroutine is closed and the run forgotten here
        (a coroutine that began was ended, and the run forgotten, by :meth:`_guarded`)."""
        if inspect.getcoroutinestate(coro) != inspect.CORO_CREATED:
            return
        coro.close()
        self._forget(run_id)

    async def _guarded(self, run_id: str, coro: Coroutine[Any, Any, str]) -> str:
        begin_run()  # a tool's SystemExit in a task of the run ends it typed (service/_stopped.py)
        try:
            status = await coro
        except _HandedOver:  # released while it waited, and taken over by another server
            status = "released"
        except BaseException as exc:  # a tool's SystemExit too (service/_stopped.py): the server goes on
            if (raised := exc if isinstance(exc, Exception) else taken(exc)) is None:
                raise
            _log.exception("actionspace: background run %s failed", run_id)
            if run_id in self._drives:  # a resumed call's run belongs to the server that drives it
                why = f"the service's runner failed ({type(raised).__name__})"
                self._finish(run_id, status="error", reason=why)
            status = "error"
        finally:
            self._forget(run_id)
        self._drives.discard(run_id)  # ended (not cancelled): finished, or driven elsewhere
        return status

    def _forget(self, run_id: str) -> None:
        """A task of the run ended: the run is no longer live here once none of its tasks runs."""
        with self._lock:
            left = self._holders.get(run_id, 0) - 1
            if left > 0:
                self._holders[run_id] = left
                return
            self._holders.pop(run_id, None)
            self._owned.discard(run_id)
            self._state.pop(run_id, None)
            self._wake.pop(run_id, None)
            self._run_loop.pop(run_id, None)

    # ------------------------------------------------------------------ what the API reads
    def live(self, run_id: str) -> LiveState | None:
        """``running`` or ``waiting_approval`` for a run this process drives, else None."""
        with self._lock:
            return self._state.get(run_id)

    def is_active(self, run_id: str) -> bool:
        with self._lock:
            return run_id in self._state

    def waiting_on(self, request_id: str) -> bool:
        """True when a run here waits on this approval request."""
        with self._lock:
            return request_id in self._waiting

    def notify(self, request_id: str) -> None:
        """Wake the run waiting on ``request_id`` (a decision was just taken)."""
        with self._lock:
            run_id = self._waiting.get(request_id)
            event = self._wake.get(run_id) if run_id is not None else None
            loop = self._run_loop.get(run_id) if run_id is not None else None
        if event is not None and loop is not None:
            loop.call_soon_threadsafe(event.set)

    def wait(self, run_id: str, timeout: float | None = None) -> str:
        """Block until the run started as ``run_id`` finished; its final status.

        Raises ``KeyError`` for a run this runner did not start, ``TimeoutError`` after ``timeout``.
        """
        with self._lock:
            future = self._futures.get(run_id)
        if future is None:
            raise KeyError(run_id)
        return future.result(timeout=timeout)

    def resumed(self, request_id: str, run_id: str) -> concurrent.futures.Future[str] | None:
        """The future of a resumed call (None when that request was not resumed)."""
        with self._lock:
            return self._futures.get(f"{run_id}#{request_id}")

    # ------------------------------------------------------------------ the runs themselves
    async def _plan(self, plan: dict[str, Any], run_id: str, principal: Principal) -> str:
        try:
            result = await self._rounds(plan, run_id, principal)
        except BaseException as stopped:  # a tool raised past its failures: its writes in flight unknown
            if (raised := taken(stopped)) is None:
                raise
            failed = await in_flight_nodes(self.rt, run_id, plan)
            self._finish(run_id, status="error", failed=failed, reason=f"{type(raised).__name__} raised")
            return "error"
        failed = {k: e.category for k, e in result.failed.items()}
        self._finish(run_id, status=result.status, nodes=len(result.nodes), failed=failed)
        return result.status

    async def _rounds(
        self,
        plan: dict[str, Any],
        run_id: str,
        principal: Principal,
        retry_of: PlanResult | None = None,
        skip: str | None = None,
    ) -> PlanResult:
        """Run ``plan`` (reusing ``retry_of``'s ok nodes), then again after each decision on its
        held nodes (at most ``max_rounds``); node ``skip`` is cancelled in every round."""
        result = await self.rt.arun_plan(
            plan, run_id=run_id, principal=principal, cancel=without(skip), retry_of=retry_of
        )
        for _ in range(self.config.max_rounds):
            held = [r for o in result.nodes.values() if (r := held_request(o)) is not None]
            if held:
                await asyncio.to_thread(note_held, self.rt, plan, result)
            if not held or not await self._decided(run_id, held):
                break
            result = await self.rt.arun_plan(
                plan, run_id=run_id, principal=principal, retry_of=result, cancel=without(skip)
            )
        return result

    async def _resume(self, request: ApprovalRequest) -> str:
        """Send an approved call no run here waits on; continue its run when this server may take
        it over (see ``service/continuation.py``), else send that call alone: then, when a lease
        holds the run, take it over once that lease ends unrenewed (its driver died). A plan node
        whose references' labels were not recorded waits for that take-over before it is sent. A
        run its tenant's held bytes leave no room for here is not taken over: ``"deferred"``, nothing
        sent (a scan continues it, and sends the call inside it, once there is room)."""
        principal = proposer(request)  # never as this process's default principal
        if principal is None:
            alone = await send_held(self.rt, request, principal)
            return alone.status if isinstance(alone, Observation) else "error"
        lease_s, holding = self.config.driver_lease_s, Holding(self.held, request.run_id, self.live_runs)
        admit = functools.partial(holding.admit, principal)  # counted as a start is
        taken = None
        try:
            taken = await asyncio.to_thread(
                take_over, self.rt, request, self._server, lease_s=lease_s, admit=admit
            )
        finally:
            holding.settle(started=taken is not None)  # this task keeps the run live here
        if holding.refused:  # a scan continues it (here or elsewhere) once there is room for it
            return "deferred"
        sent = None
        if taken is None:
            # a node whose labels are lost waits for its run instead (sent alone, it is refused)
            lost = labels_lost(await asyncio.to_thread(self.rt.trace.events, request.run_id), request)
            sent = None if lost else await send_held(self.rt, request, principal)
            poll, rounds = self.config.approval_poll_s, self.config.max_rounds
            try:
                taken = await outlast(
                    self.rt, request, self._server, lease_s=lease_s, poll_s=poll, rounds=rounds, admit=admit
                )
            finally:
                holding.settle(started=taken is not None)
            if taken is None and sent is None and holding.refused:
                return "deferred"
            if taken is None:
                sent = await send_held(self.rt, request, principal) if sent is None else sent
                return sent.status if isinstance(sent, Observation) else "error"
        with self._lock:
            self._owned.add(request.run_id)
        self._drives.add(request.run_id)
        return await self._continue(request, principal, taken, sent)

    async def _continue(
        self,
        request: ApprovalRequest,
        principal: Principal,
        taken: Submission,
        sent: Observation | ActionError | None,
    ) -> str:
        """Continue a run taken over: the approved call first, alone, on the evidence it was held
        on (unless ``sent`` already); then the plan again (what committed is replayed) or the
        outputs after that call. A plan node whose references' labels were not recorded (its
        server stopped before ``plan_node_held``) is not sent alone: the plan runs again with it,
        which judges it on its plan's evidence and consumes the approval there."""
        run_id = request.run_id
        if sent is None and taken.mode == "plan":
            events = await asyncio.to_thread(self.rt.trace.events, run_id)
            if labels_lost(events, request):  # judged inside its plan, its references' labels computed again
                return await self._plan(dict(taken.body), run_id, principal)
        if sent is None:
            sent = await send_held(self.rt, request, principal)
        sent = refusal(sent)
        if isinstance(sent, ActionError):
            failed = {request.node_id: sent.category}
            reason = "the approved call could not be sent on the evidence it was held on"
            self._finish(run_id, status="error", failed=failed, reason=reason)
            return "error"
        if taken.mode == "calls":
            return await self._continue_calls(request, principal, list(taken.body))
        plan, node = dict(taken.body), request.node_id
        # the plan again without the node just sent: never judged again, on other evidence than
        # it was held on; then, when it succeeded, again with it as that plan's result for it
        result = await self.rt.arun_plan(plan, run_id=run_id, principal=principal, cancel=without(node))
        if sent.status == "ok" and result.error is None:
            settled = dataclasses.replace(result, nodes={**result.nodes, node: sent})
            result = await self._rounds(plan, run_id, principal, retry_of=settled)
        else:
            result = await self._rounds(plan, run_id, principal, retry_of=result, skip=node)
        failed = {k: e.category for k, e in result.failed.items()}
        if sent.error is not None:
            failed[node] = sent.error.category
        self._finish(run_id, status=result.status, nodes=len(result.nodes), failed=failed)
        return result.status

    async def _decided(self, run_id: str, request_ids: list[str]) -> bool:
        """Wait until one of the requests is decided (True) or the wait runs out (False). A run
        this server drives is released after one lease of waiting, so that its lease is not renewed
        while a person decides, and claimed back when the wait ends: raises :class:`_HandedOver`
        when another server took it meanwhile (the server that took the decision)."""
        deadline = time.monotonic() + self.config.approval_wait_s
        let_go = time.monotonic() + self.config.driver_lease_s
        released = False
        with self._lock:
            self._state[run_id] = "waiting_approval"
            self._waiting.update(dict.fromkeys(request_ids, run_id))
            wake = self._wake.setdefault(run_id, asyncio.Event())
        try:
            while True:
                wake.clear()
                decided = any(self._settled(r) for r in request_ids)
                left = deadline - time.monotonic()
                if decided or left <= 0:
                    if released and not await asyncio.to_thread(self._drives.claim_back, run_id):
                        raise _HandedOver(run_id)
                    return decided
                if not released and time.monotonic() >= let_go:
                    released = await asyncio.to_thread(self._drives.let_go, run_id)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(wake.wait(), timeout=min(self.config.approval_poll_s, left))
        finally:
            with self._lock:
                self._state[run_id] = "running"
                for r in request_ids:
                    self._waiting.pop(r, None)

    def _settled(self, request_id: str) -> bool:
        try:
            request = self.rt.approvals.get(request_id)
        except Exception:  # a store that fails for a moment must not end a run that waits for a person
            _log.warning("actionspace: reading approval request %s failed; will read again", request_id)
            return False
        return request is None or request.status != "pending"

    # ------------------------------------------------------------------ shutdown
    def close(self, *, timeout: float = 5.0) -> None:
        """Cancel what still runs, then stop the runner's thread (waits at most ``timeout`` s)."""
        if self._closed:
            return
        self._closed = True
        self._drives.stop(timeout=timeout)

        def cancel_all() -> None:
            for task in asyncio.all_tasks():
                task.cancel()

        for loop in self._lanes.loops():
            loop.call_soon_threadsafe(cancel_all)
        with self._lock:
            futures = list(self._futures.values())
        concurrent.futures.wait(futures, timeout=timeout)
        self._lanes.stop(timeout=timeout)
        left = self._drives.take_all()  # cancelled before they ended: another server may continue them
        try:
            release(self.rt, left, self._server)
        except Exception:  # the store is gone: the runs stay driven, their calls resumed alone
            _log.warning("actionspace: could not record that %d runs were released", len(left))
