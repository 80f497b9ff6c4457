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
proposed it (recorded in the request), never as the runtime's default principal.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import inspect
import logging
import threading
import time
from collections.abc import Coroutine, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from actionspace.approval.requests import ApprovalRequest
from actionspace.errors import ActionError
from actionspace.execution.ready import Ready
from actionspace.parse import ParseResult, call_ids, parse
from actionspace.plan.model import PlanResult
from actionspace.policy.flow import Binding
from actionspace.policy.principal import Principal
from actionspace.runtime import Runtime
from actionspace.service.held_nodes import HELD_KIND, held_bindings, held_event
from actionspace.service.lanes import DEFAULT_LANES, PROCESSES, Lanes, off_loop
from actionspace.service.resume_evidence import held_proposal, restore
from actionspace.trace.recorder import Recorder
from actionspace.trace.store_encoding import bounded_raw
from actionspace.types import Observation, ToolCall

__all__ = ["BackgroundRuns", "LiveState", "RunnerConfig"]

_log = logging.getLogger("actionspace.service")

LiveState = Literal["running", "waiting_approval"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RunnerConfig:
    """How background runs wait for people."""

    approval_poll_s: float = 0.5
    """Seconds between reads of the approval store while a call waits; default 0.5."""
    approval_wait_s: float = 24 * 3600.0
    """Seconds a call waits for a decision before its run goes on without it; default 24 h."""
    max_rounds: int = 32
    """Most times one call or plan is sent again after decisions; default 32 (bounds every loop)."""
    resume_orphans: bool = True
    """Run approved calls that no run of this process waits on (see the module docstring); default on."""
    lanes: int = DEFAULT_LANES
    """Event loops the runs are spread over by principal (see ``service/lanes.py``); default 4."""
    parse_timeout_s: float = 10.0
    """Seconds parsing one raw model output may take, off the runs' loops; default 10. Past it the
    output is answered ``parse_error`` and nothing of it runs."""


class BackgroundRuns:
    """Starts, tracks and wakes the runs of one API server."""

    def __init__(self, rt: Runtime, config: RunnerConfig | None = None) -> None:
        self.rt = rt
        self.config = config or RunnerConfig()
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
        self._closed = False

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
        """Run ``plan`` (Plan JSON) in the background; the run must have been created already."""
        self._submit(run_id, self._plan(dict(plan), run_id, principal), lane=principal.id)

    def start_calls(self, calls: Sequence[Any], *, run_id: str, principal: Principal) -> None:
        """Run raw model outputs one after another in the background."""
        self._submit(run_id, self._calls(list(calls), run_id, principal), lane=principal.id)

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
        future = asyncio.run_coroutine_threadsafe(self._guarded(live, coro, owned=live_id is None), loop)
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

    async def _guarded(self, run_id: str, coro: Coroutine[Any, Any, str], *, owned: bool) -> str:
        try:
            return await coro
        except Exception:
            _log.exception("actionspace: background run %s failed", run_id)
            if owned:  # a resumed call's run belongs to the process that started it
                self.rt.finish(run_id, status="error", reason="the service's runner failed")
            return "error"
        finally:
            self._forget(run_id)

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
        result = await self.rt.arun_plan(plan, run_id=run_id, principal=principal)
        for _ in range(self.config.max_rounds):
            held = [r for o in result.nodes.values() if (r := _request_id(o)) is not None]
            if held:
                await asyncio.to_thread(self._note_held, plan, result)
            if not held or not await self._decided(run_id, held):
                break
            result = await self.rt.arun_plan(plan, run_id=run_id, principal=principal, retry_of=result)
        failed = {k: e.category for k, e in result.failed.items()}
        self.rt.finish(run_id, status=result.status, nodes=len(result.nodes), failed=failed)
        return result.status

    def _note_held(self, plan: Mapping[str, Any], result: PlanResult) -> None:
        """Record the labels each held node's references carried (see ``service/held_nodes.py``)."""
        for node_id, obs in result.nodes.items():
            request_id = _request_id(obs)
            if request_id is not None:
                event = held_event(plan, result, node_id, request_id)
                self.rt.record(result.run_id, HELD_KIND, event, call_id=obs.call_id)

    async def _calls(self, raws: list[Any], run_id: str, principal: Principal) -> str:
        observations: list[Observation] = []
        for index, raw in enumerate(raws, start=1):
            parsed = await self._parse(raw)
            self.rt.record(run_id, "model_output", bounded_raw(raw, self.rt.artifacts))
            if isinstance(parsed, ActionError) or parsed.error is not None or not parsed.calls:
                observations.extend(self._unparsed(run_id, parsed, await self._call_ids(raw)))
                continue
            self.rt.record(run_id, "parsed", _parsed_event(parsed))
            if len(parsed.calls) == 1:
                call = parsed.calls[0]
                first = await self.rt.acall(call, run_id=run_id, node_id=f"c{index}", principal=principal)
                observations.append(await self._until_decided(first, call, run_id, f"c{index}", principal))
                continue
            for sub, call in enumerate(parsed.calls, start=1):
                node = f"c{index}.{sub}"
                first = await self.rt.acall(call, run_id=run_id, node_id=node, principal=principal)
                observations.append(await self._until_decided(first, call, run_id, node, principal))
        status = _calls_status(observations)
        errors = {o.call_id: o.error.category for o in observations if o.error is not None}
        self.rt.finish(run_id, status=status, calls=len(observations), failed=errors)
        return status

    async def _parse(self, raw: Any) -> ParseResult | ActionError:
        """``parse(raw)`` off the runs' loops; a parse past ``parse_timeout_s`` is a parse_error."""
        timeout = self.config.parse_timeout_s
        try:
            if _size(raw) <= _INLINE_PARSE_CHARS:
                return await off_loop(lambda: parse(raw), timeout_s=timeout)
            return await PROCESSES.run(parse, raw, timeout_s=timeout)
        except TimeoutError:
            return ActionError.of(
                "parse_error",
                f"parsing the output took longer than {timeout:g} s; emit a shorter output",
                details={"reason": "parse_timeout", "timeout_s": timeout},
            )

    async def _call_ids(self, raw: Any) -> tuple[str, ...]:
        """``call_ids(raw)`` off the runs' loops, under ``parse_timeout_s`` (none known past it)."""
        timeout = self.config.parse_timeout_s
        try:
            if _size(raw) <= _INLINE_PARSE_CHARS:
                return await off_loop(lambda: call_ids(raw), timeout_s=timeout)
            return await PROCESSES.run(call_ids, raw, timeout_s=timeout)
        except TimeoutError:
            return ()

    def _unparsed(
        self, run_id: str, parsed: ParseResult | ActionError, ids: Sequence[str]
    ) -> list[Observation]:
        """The parse_error observations of an output none of whose calls runs, as the engine
        answers it: one per call id the output gave (``ids``), else one under ``<run id>:parse``."""
        if isinstance(parsed, ActionError):
            error, event = parsed, {"format": "unknown", "calls": [], "error": parsed.message[:300]}
        elif parsed.error is not None:
            error, event = parsed.error, {**_parsed_event(parsed), "error": parsed.error.message[:300]}
        else:
            content = (parsed.content or "")[:200]
            error = ActionError.of(
                "parse_error",
                "the output contains no tool call",
                details={"format": parsed.format, "content": content},
            )
            event = _parsed_event(parsed)
        self.rt.record(run_id, "parsed", event)
        observed = {"status": "error", "category": error.category, "recovery": list(error.recovery)}
        if not ids:
            self.rt.record(run_id, "observation", observed)
            return [Observation.failure(error, call_id=f"{run_id}:parse", tool="")]
        for call_id in ids:
            self.rt.record(run_id, "observation", observed, call_id=call_id)
        return [Observation.failure(error, call_id=call_id, tool="") for call_id in ids]

    async def _until_decided(
        self, obs: Observation, call: ToolCall | None, run_id: str, node: str, principal: Principal
    ) -> Observation:
        for _ in range(self.config.max_rounds):
            request_id = _request_id(obs)
            if request_id is None or call is None or not await self._decided(run_id, [request_id]):
                return obs
            obs = await self.rt.acall(call, run_id=run_id, node_id=node, principal=principal)
        return obs

    async def _resume(self, request: ApprovalRequest) -> str:
        proposed_by = request.details.get("proposed_by")
        # re-authorized as whoever proposed it (never as this process's default principal), read
        # as this runtime recorded it: an empty id stays empty, no other principal's
        principal = None
        if isinstance(proposed_by, Mapping):
            principal = Principal.from_dict(proposed_by, allow_empty_id=True)
        events = await asyncio.to_thread(self.rt.trace.events, request.run_id)
        held = held_proposal(events, request)
        found = None if isinstance(held, ActionError) else held_bindings(events, request)
        node = None if isinstance(found, ActionError) else found
        if isinstance(found, ActionError):
            held = found
        elif held is not None and not isinstance(held, ActionError):
            # the values the held call was judged on, where this process never saw them
            run = await asyncio.to_thread(self.rt.run_state, request.run_id, principal)
            held = restore(run.flow, held, request.arguments, request.id) or held
        if isinstance(held, ActionError):
            observed = {"status": "error", "category": held.category, "recovery": list(held.recovery)}
            observed["message"] = held.message[:300]
            self.rt.record(request.run_id, "observation", observed, call_id=held.details.get("call_id"))
            return "error"
        call_id = held.call_id if held is not None else None
        if node is not None:  # a plan node: its references' labels, as its plan gave them
            call = ToolCall(name=request.tool, arguments=dict(request.arguments), id=node[0])
            return await self._node(call, request, principal, node[1])
        call = ToolCall(name=request.tool, arguments=dict(request.arguments), id=call_id)
        obs = await self.rt.acall(
            call,
            run_id=request.run_id,
            node_id=request.node_id,
            provenance=dict(request.provenance),
            principal=principal,
        )
        return obs.status

    async def _node(
        self, call: ToolCall, request: ApprovalRequest, principal: Principal | None, bound: dict[str, Binding]
    ) -> str:
        """Send an approved plan node as its plan does (``bound``: its ``$ref`` arguments' labels),
        then show its result to the model as a call's is."""
        engine = self.rt.engine
        run = await asyncio.to_thread(self.rt.run_state, request.run_id, principal)
        rec = Recorder(run, call.id)
        try:
            ready = await engine.aprepare(
                run,
                call,
                principal=principal or run.principal,
                rec=rec,
                node_id=request.node_id,
                provenance=dict(request.provenance),
                bound=bound,
            )
            obs = await engine.aexecute(ready, rec) if isinstance(ready, Ready) else ready
        except Exception as exc:  # a bug of ours: typed, with what the call recorded before it
            obs = engine.internal(exc, rec, call)
        run.flow.observed(obs)
        await engine.aflush(rec)
        return obs.status

    async def _decided(self, run_id: str, request_ids: list[str]) -> bool:
        """Wait until one of the requests is decided (True) or the wait runs out (False)."""
        deadline = time.monotonic() + self.config.approval_wait_s
        with self._lock:
            self._state[run_id] = "waiting_approval"
            self._waiting.update(dict.fromkeys(request_ids, run_id))
            wake = self._wake.setdefault(run_id, asyncio.Event())
        try:
            while True:
                wake.clear()
                if any(self._settled(r) for r in request_ids):
                    return True
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
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

        def cancel_all() -> None:
            for task in asyncio.all_tasks():
                task.cancel()

        for loop in self._lanes.loops():
            loop.call_soon_threadsafe(cancel_all)
        with self._lock:
            futures = list(self._futures.values())
        concurrent.futures.wait(futures, timeout=timeout)
        self._lanes.stop(timeout=timeout)


_INLINE_PARSE_CHARS = 65_536
"""Raw outputs up to this size are parsed on a thread; longer ones in a worker process."""


def _size(raw: Any) -> int:
    """Characters of a raw text output (a structured one is already parsed JSON: cheap to read)."""
    return len(raw) if isinstance(raw, str) else 0


def _parsed_event(parsed: ParseResult) -> dict[str, Any]:
    return {"format": parsed.format, "calls": [{"name": c.name, "id": c.id} for c in parsed.calls]}


def _request_id(obs: Observation) -> str | None:
    if obs.error is None or obs.error.category != "needs_approval":
        return None
    request_id = obs.error.details.get("request_id")
    return str(request_id) if request_id is not None else None


def _calls_status(observations: Sequence[Observation]) -> str:
    if all(o.status == "ok" for o in observations):
        return "ok"
    if all(o.status == "error" for o in observations):
        return "error"
    return "partial"
