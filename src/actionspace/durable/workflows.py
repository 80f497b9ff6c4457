"""The DBOS workflows of a durable plan: one plan workflow, one node workflow per node.

The plan workflow checks the plan (the same checks as the in-process scheduler), enqueues every
ready node as a child workflow on its node queue, and waits for the nodes' messages with
``DBOS.recv`` — checkpointed, so a plan resumed on another worker replays the same completions in
the same order and makes the same decisions. A failed node blocks only its descendants.

A node workflow runs its call through the normal pipeline in one DBOS step, with the plan node id
as ``node_id``, so the ledger key is the same on every attempt. DBOS steps are at-least-once: a
step cut short by a crash runs again, and before it does, an action the ledger holds as
``dispatched`` or ``unknown`` is settled through the tool's status query (``native`` tools are
asked again with the same key, ``none`` tools end ``unknown_commit``) — never a blind re-send.
A node that needs approval waits durably (``DBOS.recv`` with a timeout, then a look at the request)
until a person decides, on whichever worker holds it by then.
"""

from __future__ import annotations

import time
import uuid
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, cast

from dbos import DBOS, SetWorkflowID

from actionspace.durable.engine import bound, node_workflow_id
from actionspace.errors import ActionError
from actionspace.ledger.entries import LedgerEntry, LedgerStore
from actionspace.ledger.recover import recover
from actionspace.observation import shape
from actionspace.plan.model import PlanResult
from actionspace.plan.run import DEFAULT_CONCURRENCY, preflight
from actionspace.plan.scheduler import Scheduler, _status
from actionspace.policy.principal import Principal
from actionspace.trace.recorder import Recorder
from actionspace.types import Observation, ToolCall

if TYPE_CHECKING:
    from actionspace.runtime import Runtime

__all__ = ["APPROVAL_TOPIC", "NODE_TOPIC", "PLAN_WORKFLOW", "node_workflow", "plan_workflow", "register"]

PLAN_WORKFLOW: Final = "actionspace.plan"
NODE_WORKFLOW: Final = "actionspace.node"
NODE_TOPIC: Final = "actionspace.node_done"
APPROVAL_TOPIC: Final = "actionspace.approval"
_ENDED: Final = frozenset({"ERROR", "CANCELLED", "MAX_RECOVERY_ATTEMPTS_EXCEEDED"})
SETTLE_GUARD_S: Final = 10.0
"""An earlier attempt's executor counts as alive while it beat within max(this, 2 × dead_after_s)."""
MAX_HOLDER_WAIT_S: Final = 600.0
"""Longest wait (seconds) for a live earlier attempt to settle the action itself."""
HOLDER_POLL_S: Final = 0.2
_running: set[str] = set()
"""Attempt ids of the node steps running in this process."""


def register() -> None:
    """Importing this module registers the workflows with DBOS; called before ``DBOS.launch``."""


def principal_to_dict(principal: Principal | None) -> dict[str, Any] | None:
    if principal is None:
        return None
    return {"id": principal.id, "scopes": list(principal.scopes), "tenant": principal.tenant}


def _principal(data: Mapping[str, Any] | None) -> Principal | None:
    if data is None:
        return None
    return Principal(id=data["id"], scopes=tuple(data["scopes"]), tenant=data.get("tenant"))


# ---------------------------------------------------------------------- plan workflow
@DBOS.workflow(name=PLAN_WORKFLOW)
def plan_workflow(request: dict[str, Any]) -> dict[str, Any]:
    """Run one plan; ``request``: ``run_id``, ``plan`` (JSON form), ``principal``, ``max_concurrency``."""
    return _drive(request).to_dict()


def _drive(request: Mapping[str, Any]) -> PlanResult:
    rt = bound().runtime
    run_id: str = request["run_id"]
    principal = _principal(request.get("principal"))
    run = rt.run_state(run_id, principal)
    who = principal or run.principal
    checked = preflight(rt.engine, request["plan"], run, who, rt.environments)
    if isinstance(checked, ActionError):
        return _rejected(run_id, checked)
    unsupported = sorted(k for k, c in checked.nodes.items() if c.members or c.node.first_of)
    if unsupported:
        error = ActionError.of(
            "invalid_arguments",
            f"nodes {unsupported} use atomic groups or speculation, which only the in-process backend runs",
            details={"nodes": unsupported},
        )
        return _rejected(run_id, error)
    _trace_step(run_id, "plan_started", {"nodes": len(checked.nodes), "backend": "dbos"})
    limit = int(request.get("max_concurrency") or checked.max_concurrency or DEFAULT_CONCURRENCY)
    sched = Scheduler(
        rt.engine, run, who, checked, max_concurrency=limit, tool_limits=None, cancel=None, retry_of=None
    )
    started = _now_step()  # a step: a replay on another worker keeps the first start
    parent = cast(str, DBOS.workflow_id)
    ready: deque[str] = deque(k for k in checked.order if k in checked.nodes and sched.waiting[k] == 0)
    inflight: dict[str, str] = {}  # node id -> its workflow id
    max_parallel = 0

    def release() -> None:
        ready.extend(sched._newly_ready)
        sched._newly_ready.clear()

    while sched.settled < len(checked.nodes):
        while ready and len(inflight) < limit:
            k = ready.popleft()
            node = checked.nodes[k]
            arguments = sched._arguments(node, node.node.arguments)
            if isinstance(arguments, Observation):
                sched._settle(k, arguments)
                release()
                continue
            payload = {
                "parent": parent,
                "run_id": run_id,
                "node_id": k,
                "tool": node.node.tool,
                "arguments": dict(arguments),
                "provenance": dict(sched._provenance(node, node.node.arguments)),
                "principal": principal_to_dict(who),
            }
            inflight[k] = node_workflow_id(run_id, k)
            with SetWorkflowID(inflight[k]):
                DBOS.enqueue_workflow(bound().queue_of(node.specs[0].name), node_workflow, payload)
        max_parallel = max(max_parallel, len(inflight))
        if not inflight:
            break  # nothing runs and nothing can start: every remaining node was blocked above
        for k, obs in _next_done(inflight):
            del inflight[k]
            sched._settle(k, obs)
            release()
        sched._flush_pending(time.monotonic())
    nodes = {k: sched.results[k] for k in checked.order if k in sched.results}
    result = PlanResult(
        run_id=run_id,
        status=_status(nodes.values()),
        nodes=nodes,
        edges=list(checked.edges),
        added_edges=list(checked.added_edges),
        stats={"max_parallel": max_parallel, "backend": "dbos", "plan_workflow": parent},
    )
    result.stats["wall_s"] = round(_now_step() - started, 6)
    _trace_step(
        run_id,
        "plan_finished",
        {"status": result.status, "failed": {k: e.category for k, e in result.failed.items()}},
    )
    return result


def _next_done(inflight: Mapping[str, str]) -> Iterator[tuple[str, Observation]]:
    """The next finished node (from its message), or nodes whose workflow ended without one."""
    cfg = bound().config
    message = DBOS.recv(NODE_TOPIC, timeout_seconds=cfg.wait_poll_s)
    if message is not None:
        k = message["node"]
        if k in inflight:
            yield k, Observation.from_dict(message["observation"])
        return
    for k, status in _ended_children(dict(inflight)).items():
        error = ActionError.of("internal", f"the workflow of node {k} ended {status} without a result")
        yield k, Observation.failure(error, call_id=inflight[k], tool="")


@DBOS.step(name="actionspace.plan.ended_children")
def _ended_children(inflight: dict[str, str]) -> dict[str, str]:
    ids = list(inflight.values())
    by_id = {v: k for k, v in inflight.items()}
    statuses = DBOS.list_workflows(workflow_ids=ids, load_input=False, load_output=False)
    return {by_id[s.workflow_id]: s.status for s in statuses if s.status in _ENDED}


@DBOS.step(name="actionspace.plan.trace")
def _trace_step(run_id: str, kind: str, data: dict[str, Any]) -> None:
    bound().runtime.record(run_id, kind, data)


@DBOS.step(name="actionspace.plan.now")
def _now_step() -> float:
    return time.time()


def _rejected(run_id: str, error: ActionError) -> PlanResult:
    _trace_step(run_id, "plan_rejected", {"category": error.category, "message": error.message[:500]})
    return PlanResult(run_id=run_id, status="error", error=error)


# ---------------------------------------------------------------------- node workflow
@DBOS.workflow(name=NODE_WORKFLOW)
def node_workflow(payload: dict[str, Any]) -> dict[str, Any]:
    """Run one plan node to its final observation, then tell the plan workflow."""
    cfg = bound().config
    obs = _execute_step(payload)
    while _waiting_request(obs) is not None:
        request_id = cast(str, _waiting_request(obs))
        wait = cfg.approval_poll_s
        while _approval_status_step(request_id) == "pending":
            DBOS.recv(APPROVAL_TOPIC, timeout_seconds=wait)
            wait = min(wait * 2, cfg.approval_poll_max_s)
        obs = _execute_step(payload)
    DBOS.send(payload["parent"], {"node": payload["node_id"], "observation": obs}, topic=NODE_TOPIC)
    return obs


def _waiting_request(obs: Mapping[str, Any]) -> str | None:
    error = obs.get("error")
    if obs.get("status") != "error" or not error or error.get("category") != "needs_approval":
        return None
    request_id = (error.get("details") or {}).get("request_id")
    return request_id if isinstance(request_id, str) else None


@DBOS.step(name="actionspace.node.execute")
def _execute_step(payload: dict[str, Any]) -> dict[str, Any]:
    rt = bound().runtime
    run_id, node_id = payload["run_id"], payload["node_id"]
    engine = bound()
    attempt = uuid.uuid4().hex
    try:
        engine.heartbeat.begin_attempt(run_id, node_id, attempt)
        _running.add(attempt)
        settle_interrupted(rt, run_id, node_id)
        call = ToolCall(
            name=payload["tool"],
            arguments=dict(payload["arguments"]),
            id=f"{run_id}:{node_id}",
            provenance=payload.get("provenance") or {},
        )
        obs = rt.call(call, run_id=run_id, node_id=node_id, principal=_principal(payload.get("principal")))
    except Exception as exc:  # a bug of ours: a typed observation, and the plan goes on
        obs = rt.engine.internal(exc, Recorder(rt.engine.run(run_id), f"{run_id}:{node_id}"))
    finally:
        _running.discard(attempt)
    return obs.to_dict()


@DBOS.step(name="actionspace.node.approval_status")
def _approval_status_step(request_id: str) -> str:
    request = bound().runtime.approvals.get(request_id)
    return "gone" if request is None else request.status


def settle_interrupted(rt: Runtime, run_id: str, node_id: str) -> None:
    """Settle this node's action if an earlier attempt left it ``dispatched`` or ``unknown``.

    The attempt that last moved the entry is found by time among the node's attempts. While it may
    still run — its executor beats (a worker taken for dead during a long pause goes on with its
    step), or it is a live attempt of this process — its send may still land, so this attempt waits
    for it. Otherwise the entry goes through :func:`actionspace.ledger.recover.recover`: the status
    query decides; nothing is sent blindly.
    """
    engine = bound()
    guard_s = max(2 * engine.config.dead_after_s, SETTLE_GUARD_S)
    deadline = time.monotonic() + MAX_HOLDER_WAIT_S
    while True:
        entry = rt.ledger.get_node(run_id, node_id)
        if entry is None or entry.state not in ("dispatched", "unknown"):
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
