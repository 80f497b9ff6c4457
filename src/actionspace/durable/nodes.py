"""One node of a durable plan: its DBOS step, and the child workflow of a node that has to wait.

A node runs its call through the normal pipeline in one async DBOS step
(:func:`execute_step`), with the plan node id as ``node_id``, so the ledger key is the same on
every attempt. DBOS steps are at-least-once: a step cut short by a crash runs again, and before it
does, an action the ledger holds as ``dispatched`` or ``unknown`` is settled through the tool's
status query (``native`` tools are asked again with the same key, ``none`` tools end
``unknown_commit``) — never a blind re-send.

Most nodes are steps of the plan workflow itself. A node gets a child workflow
(:func:`node_workflow`, id :func:`~actionspace.durable.engine.node_workflow_id`) only when it has
to wait: for a person's approval (``DBOS.recv`` with a timeout, then a look at the request, on
whichever worker holds it by then), or for a cluster-wide slot of a limited tool (it then goes
through that tool's queue). The child tells the plan its final observation in a message.

A plan cancelled while its node's child waits sends the child a cancel message (:func:`cancel_message`):
a child that has not called its tool yet ends ``cancelled`` (``phase: not_dispatched``) without calling
it; one already calling it ends as the call does. A child whose plan workflow was cancelled through
DBOS itself (no message) finds that out at its next look and does not call its tool either.
"""

from __future__ import annotations

import asyncio
import time
import uuid
import weakref
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Final, cast

from dbos import DBOS

from actionspace.durable.engine import bound
from actionspace.errors import ActionError
from actionspace.execution.ready import Ready
from actionspace.ledger.entries import LedgerEntry, LedgerStore
from actionspace.ledger.recover import recover
from actionspace.observation import shape
from actionspace.policy.flow import Binding
from actionspace.policy.labels import Label
from actionspace.policy.principal import Principal
from actionspace.trace.recorder import Recorder
from actionspace.types import Observation, ToolCall

if TYPE_CHECKING:
    from actionspace.runtime import Runtime

__all__ = [
    "APPROVAL_TOPIC",
    "NODE_TOPIC",
    "NODE_WORKFLOW",
    "begin_attempts",
    "bound_from_dict",
    "bound_to_dict",
    "cancel_message",
    "cancel_request",
    "execute_step",
    "node_slots",
    "node_workflow",
    "principal_from_dict",
    "principal_to_dict",
    "running",
    "settle_interrupted",
    "waiting_request",
]

NODE_WORKFLOW: Final = "actionspace.node"
NODE_TOPIC: Final = "actionspace.node_done"
APPROVAL_TOPIC: Final = "actionspace.approval"
SETTLE_GUARD_S: Final = 10.0
"""An earlier attempt's executor counts as alive while it beat within max(this, 2 × dead_after_s)."""
MAX_HOLDER_WAIT_S: Final = 600.0
"""Longest wait (seconds) for a live earlier attempt to settle the action itself."""
HOLDER_POLL_S: Final = 0.2
_PLAN_ENDED: Final = frozenset({"SUCCESS", "ERROR", "CANCELLED", "MAX_RECOVERY_ATTEMPTS_EXCEEDED"})
"""DBOS statuses of a plan workflow that will read no more node results."""
_INTERRUPTED: Final = frozenset({"dispatched", "unknown"})
"""Ledger states an interrupted attempt can leave that the next attempt settles before sending."""
_running: set[str] = set()
"""Attempt ids of the node steps running in this process."""
_Slots = weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore]
_slots: _Slots = weakref.WeakKeyDictionary()


def principal_to_dict(principal: Principal | None) -> dict[str, Any] | None:
    if principal is None:
        return None
    return {"id": principal.id, "scopes": list(principal.scopes), "tenant": principal.tenant}


def principal_from_dict(data: Mapping[str, Any] | None) -> Principal | None:
    if data is None:
        return None
    return Principal(id=data["id"], scopes=tuple(data["scopes"]), tenant=data.get("tenant"))


def waiting_request(obs: Mapping[str, Any]) -> str | None:
    """The approval request id an observation (dict form) waits on, None when it waits on none."""
    error = obs.get("error")
    if obs.get("status") != "error" or not error or error.get("category") != "needs_approval":
        return None
    request_id = (error.get("details") or {}).get("request_id")
    return request_id if isinstance(request_id, str) else None


def cancel_message(nodes: Collection[str] | None, reason: str) -> dict[str, Any]:
    """The message that cancels ``nodes`` (None: every node) of a plan, or a waiting node's child."""
    return {"cancel": None if nodes is None else sorted(nodes), "reason": reason}


def cancel_request(message: Any) -> tuple[list[str] | None, str] | None:
    """(nodes or None for all, reason) when ``message`` asks to cancel, else None."""
    if not isinstance(message, Mapping) or "cancel" not in message:
        return None
    nodes, reason = message.get("cancel"), message.get("reason")
    if nodes is not None and not (isinstance(nodes, list) and all(isinstance(k, str) for k in nodes)):
        return None
    return nodes, reason if isinstance(reason, str) and reason else "cancelled"


def cancelled_observation(payload: Mapping[str, Any], reason: str) -> dict[str, Any]:
    """The observation (dict form) of a waiting node removed before its tool was called."""
    node_id = payload["node_id"]
    error = ActionError.of(
        "cancelled", f"node {node_id} was cancelled: {reason}", details={"phase": "not_dispatched"}
    )
    call_id = f"{payload['run_id']}:{node_id}"
    return Observation.failure(error, call_id=call_id, tool=payload["tool"]).to_dict()


def node_slots() -> asyncio.Semaphore:
    """This process's node slots on the running loop: ``worker_concurrency`` calls at once."""
    loop = asyncio.get_running_loop()
    slots = _slots.get(loop)
    if slots is None:
        slots = _slots[loop] = asyncio.Semaphore(bound().config.worker_concurrency)
    return slots


# ---------------------------------------------------------------------- the step
@DBOS.step(name="actionspace.node.execute")
async def execute_step(payload: dict[str, Any]) -> dict[str, Any]:
    """Run one node's call (settling an interrupted earlier attempt first); its observation dict."""
    rt = bound().runtime
    run_id, node_id = payload["run_id"], payload["node_id"]
    attempt = uuid.uuid4().hex
    async with node_slots():
        with running([attempt]):
            try:
                await asyncio.to_thread(begin_attempts, rt, run_id, {node_id: attempt})
                obs = await _node_call(rt, payload)
            except Exception as exc:  # a bug of ours: a typed observation, and the plan goes on
                rec = Recorder(rt.engine.run(run_id), f"{run_id}:{node_id}")
                obs = rt.engine.internal(exc, rec)
    return obs.to_dict()


async def _node_call(rt: Runtime, payload: Mapping[str, Any]) -> Observation:
    """The node's call as the in-process scheduler makes it: its ``$ref`` arguments carry the
    labels of what they point at (``payload["bound"]``), whatever this process knows of the run,
    and its result is shown to the model with the plan's, when the plan ends."""
    run_id, node_id = payload["run_id"], payload["node_id"]
    principal = principal_from_dict(payload.get("principal"))
    run = await asyncio.to_thread(rt.run_state, run_id, principal)
    call = ToolCall(
        name=payload["tool"],
        arguments=dict(payload["arguments"]),
        id=f"{run_id}:{node_id}",
        provenance=payload.get("provenance") or {},
    )
    rec = Recorder(run, call.id)
    try:
        ready = await rt.engine.aprepare(
            run,
            call,
            principal=principal or run.principal,
            rec=rec,
            node_id=node_id,
            bound=bound_from_dict(payload.get("bound")),
        )
        return await rt.engine.aexecute(ready, rec) if isinstance(ready, Ready) else ready
    except Exception as exc:  # a bug of ours: typed, with what the call recorded before it
        return rt.engine.internal(exc, rec, call)
    finally:
        await rt.engine.aflush(rec)


def bound_to_dict(bound: Mapping[str, Binding]) -> dict[str, Any]:
    """The labels of a node's ``$ref`` arguments (:func:`~actionspace.policy.flow.bindings`), as
    a node workflow's input carries them."""
    return {
        name: {
            "label": b.label.to_dict(),
            "origins": [[source, label.to_dict()] for source, label in b.origins],
            "mixed": b.mixed,
        }
        for name, b in bound.items()
    }


def bound_from_dict(data: Mapping[str, Any] | None) -> dict[str, Binding] | None:
    """The bindings :func:`bound_to_dict` wrote; None when the node has no ``$ref`` argument."""
    if not data:
        return None
    return {
        name: Binding(
            Label.from_dict(b["label"]),
            tuple((str(source), Label.from_dict(label)) for source, label in b["origins"]),
            bool(b["mixed"]),
        )
        for name, b in data.items()
    }


@contextmanager
def running(attempts: Collection[str]) -> Iterator[None]:
    """Count ``attempts`` as running in this process while the context lasts."""
    _running.update(attempts)
    try:
        yield
    finally:
        _running.difference_update(attempts)


def begin_attempts(rt: Runtime, run_id: str, attempts: Mapping[str, str]) -> None:
    """Note the attempts (node id → attempt id) in one write, then settle what earlier ones left.

    The wave's ledger entries are read in one query; only an entry an earlier attempt left
    ``dispatched`` or ``unknown`` is looked at again, by :func:`settle_interrupted`.

    Blocking (database, and waits for a live earlier attempt): run it off the event loop.
    """
    bound().heartbeat.begin_attempts(run_id, list(attempts.items()))
    for node_id, entry in rt.ledger.entries_of(run_id, list(attempts)).items():
        if entry.state in _INTERRUPTED:
            settle_interrupted(rt, run_id, node_id, entry)


# ---------------------------------------------------------------------- the child workflow
@DBOS.workflow(name=NODE_WORKFLOW)
async def node_workflow(payload: dict[str, Any]) -> dict[str, Any]:
    """Run one node to its final observation, waiting for approvals, then tell the plan workflow.

    ``payload["request_id"]``, when given, is the approval request the node already waits on.
    A cancel message (:func:`cancel_message`) that arrives before the tool is called ends the node
    ``cancelled`` instead.
    """
    cfg = bound().config
    request_id: str | None = payload.get("request_id")
    obs: dict[str, Any] | None = None
    cancelled: str | None = None
    if request_id is None:  # queued for a slot: a cancel sent meanwhile is read before the call
        cancelled = _cancel_reason(await DBOS.recv_async(APPROVAL_TOPIC, timeout_seconds=0.0))
        if cancelled is None:
            obs = await execute_step(payload)
    while cancelled is None and (obs is None or (request_id := waiting_request(obs)) is not None):
        wait = cfg.approval_poll_s
        status = await _approval_status_step(cast(str, request_id), payload["parent"])
        while status == "pending":
            cancelled = _cancel_reason(await DBOS.recv_async(APPROVAL_TOPIC, timeout_seconds=wait))
            if cancelled is not None:
                break
            wait = min(wait * 2, cfg.approval_poll_max_s)
            status = await _approval_status_step(cast(str, request_id), payload["parent"])
        if status == "plan_ended":
            cancelled = "its plan's workflow ended while it waited"
        if cancelled is None:
            obs = await execute_step(payload)
    if cancelled is not None or obs is None:
        obs = cancelled_observation(payload, cancelled or "cancelled")
    message = {"node": payload["node_id"], "observation": obs}
    await DBOS.send_async(payload["parent"], message, topic=NODE_TOPIC)
    return obs


def _cancel_reason(message: Any) -> str | None:
    """The reason of a cancel message; None for anything else (a wake-up, a decision, nothing)."""
    asked = cancel_request(message)
    return None if asked is None else asked[1]


@DBOS.step(name="actionspace.node.approval_status")
async def _approval_status_step(request_id: str, parent: str) -> str:
    """The request's status; ``plan_ended`` when the plan workflow will not read the node's result
    (cancelled through DBOS, say): the node then never calls its tool."""
    plan = await DBOS.get_workflow_status_async(parent)
    if plan is not None and plan.status in _PLAN_ENDED:
        return "plan_ended"
    request = await asyncio.to_thread(bound().runtime.approvals.get, request_id)
    return "gone" if request is None else request.status


# ---------------------------------------------------------------------- settling
def settle_interrupted(
    rt: Runtime,
    run_id: str,
    node_id: str,
    entry: LedgerEntry | None = None,
) -> None:
    """Settle this node's action if an earlier attempt left it ``dispatched`` or ``unknown``.

    The attempt that last moved the entry is found by time among the node's attempts. While it may
    still run — its executor beats (a worker taken for dead during a long pause goes on with its
    step), or it is a live attempt of this process — its send may still land, so this attempt waits
    for it. Otherwise the entry goes through :func:`actionspace.ledger.recover.recover`: the status
    query decides; nothing is sent blindly. ``entry``, when given, is the node's entry as just
    read (it is not read once more).
    """
    engine = bound()
    guard_s = max(2 * engine.config.dead_after_s, SETTLE_GUARD_S)
    deadline = time.monotonic() + MAX_HOLDER_WAIT_S
    while True:
        if entry is None:
            entry = rt.ledger.get_node(run_id, node_id)
        if entry is None or entry.state not in _INTERRUPTED:
            return
        holder = engine.heartbeat.attempt_at(run_id, node_id, entry.updated_at)
        if holder is None or time.monotonic() > deadline:
            break
        executor, attempt = holder
        if executor == engine.executor_id:
            if attempt not in _running:
                break
        elif not engine.heartbeat.is_alive(executor, within_s=guard_s):
            break
        time.sleep(HOLDER_POLL_S)
        entry = None
    recover(cast(LedgerStore, _OneEntry(rt.ledger, entry)), rt.catalog, rt.record, shape=shape)


class _OneEntry:
    """The ledger seen through one entry: what ``recover`` lists is that entry only."""

    def __init__(self, ledger: LedgerStore, entry: LedgerEntry) -> None:
        self._ledger = ledger
        self._entry = entry

    def list(self, *, state: str | None = None, limit: int = 100) -> list[LedgerEntry]:
        return [self._entry] if state in (None, self._entry.state) else []

    def transition(self, key: str, expected: Sequence[str], entry: LedgerEntry) -> LedgerEntry | None:
        return self._ledger.transition(key, expected, entry)

    def get(self, key: str) -> LedgerEntry | None:
        return self._ledger.get(key)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ledger, name)
