"""Running plans on the DBOS backend: from a Runtime, or submitted by any process through a client."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Collection, Mapping
from typing import TYPE_CHECKING, Any, cast

from actionspace._json_values import MAX_DEPTH
from actionspace.durable.config import PLAN_QUEUE, DurableConfig
from actionspace.durable.engine import (
    launch,
    launched_for,
    plan_result,
    plan_workflow_id,
    system_url,
)
from actionspace.errors import ActionError, ConfigurationError, FieldError
from actionspace.pipeline.runs import check_id
from actionspace.plan.control import CancelScope
from actionspace.plan.model import Plan, PlanResult
from actionspace.plan.refs import nested_past
from actionspace.policy.principal import Principal

if TYPE_CHECKING:
    from dbos import DBOSClient, WorkflowHandle

    from actionspace.runtime import Runtime

__all__ = ["PlanClient", "arun_plan_durable", "plan_request"]

_log = logging.getLogger("actionspace.durable")

RESULT_POLL_S = 0.05
"""Seconds between two looks at a plan workflow's status while waiting for its result."""
CARRIED_DEPTH = MAX_DEPTH + 5
"""Most levels of objects and arrays a plan may nest to reach its workflow as it is written: a node
alternative's arguments (plan, nodes, node, ``first_of``, alternative) at the most arguments may nest.
A deeper plan is rejected at its checks whatever else it holds, so its workflow is given that
rejection instead of the plan (too deep to serialize, or to log)."""


def plan_request(
    plan: Plan | Mapping[str, Any],
    *,
    run_id: str,
    principal: Principal | None = None,
    max_concurrency: int | None = None,
) -> dict[str, Any]:
    """The input of a plan workflow. Raises ConfigurationError for verifiers (JSON cannot carry them)
    and for a ``max_concurrency`` that is not an integer.

    A plan that is not an object goes as it is: its workflow rejects it as the in-process checks do.
    """
    if isinstance(plan, Plan):
        if any(node.verify is not None for node in plan.nodes):
            raise ConfigurationError(
                "node verifiers are Python callables; the dbos backend cannot carry them"
            )
        plan = plan.to_dict()
    if max_concurrency is not None and (type(max_concurrency) is not int):
        raise ConfigurationError(f"max_concurrency must be an integer or None, got {max_concurrency!r}")
    from actionspace.durable.nodes import principal_to_dict

    carried: Any = dict(plan) if isinstance(plan, Mapping) else plan
    request: dict[str, Any] = {
        "run_id": run_id,
        "plan": carried,
        "principal": principal_to_dict(principal),
        "max_concurrency": max_concurrency,
    }
    deep = nested_past(carried, CARRIED_DEPTH)
    if deep is not None:
        why = f"nests objects and arrays deeper than {CARRIED_DEPTH} levels"
        error = ActionError.of(
            "invalid_arguments",
            f"the plan is malformed: {deep}: {why}",
            field_errors=[FieldError(path=deep, message=why)],
        )
        request["plan"], request["rejected"] = None, error.to_dict()
    return request


async def arun_plan_durable(
    rt: Runtime,
    plan: Plan | Mapping[str, Any],
    *,
    run_id: str | None,
    principal: Principal | None,
    max_concurrency: int | None,
    config: DurableConfig | None = None,
    cancel: CancelScope | None = None,
) -> PlanResult:
    """Run ``plan`` as a DBOS workflow started in this process (launched for ``rt`` if needed).

    The workflow id derives from the run id, so calling again with the same ``run_id`` attaches to
    the same plan (its stored result once it has ended) instead of running it twice. ``cancel``
    cancels the plan or some of its nodes as :meth:`PlanClient.cancel` does, while this call waits
    for it; what it asked before the plan began is applied before any node starts.
    """
    if not launched_for(rt):  # launching blocks (DBOS, database): off the loop, once
        await asyncio.to_thread(launch, rt, config)
    if run_id is None:
        run_id = rt.new_run(principal=principal)
    check_id("run id", run_id)  # as an in-process plan's run: text, not empty
    request = plan_request(plan, run_id=run_id, principal=principal, max_concurrency=max_concurrency)
    return plan_result(await asyncio.to_thread(_run, request, cancel))


def _run(request: dict[str, Any], cancel: CancelScope | None = None) -> dict[str, Any]:
    """Start (or attach to) the plan workflow of the request's run and wait for its result.

    DBOS runs an async workflow started from sync code on its own event loop, so the plan goes on
    whatever becomes of the caller's loop. A plan started here is awaited on its own future; one
    that runs elsewhere is polled for every :data:`RESULT_POLL_S`.
    """
    from dbos import DBOS, SetWorkflowID

    from actionspace.durable.nodes import cancel_message
    from actionspace.durable.workflows import plan_workflow

    run_id: str = request["run_id"]
    asked = [] if cancel is None else cancel._take()
    if asked:  # part of the plan's input: applied before its first wave
        request["cancel"] = [cancel_message(nodes, reason) for nodes, reason in asked]
    workflow = cast(Callable[[dict[str, Any]], dict[str, Any]], plan_workflow)
    with SetWorkflowID(plan_workflow_id(run_id)):
        handle = DBOS.start_workflow(workflow, request)
    # sent too: a plan of this run already under way (attached to, not started) has its own input
    forward = None if cancel is None else _Forward(run_id, cancel, asked)
    try:
        return _outcome(run_id, lambda: handle.get_result(polling_interval_sec=RESULT_POLL_S))
    finally:
        if forward is not None:
            forward.close()


class _Forward:
    """Sends what a :class:`CancelScope` asks to the plan workflow of a run, while it runs.

    ``CancelScope.cancel`` may be called from any thread, an event loop's included: the message
    leaves from a thread of its own, in the order the cancels were asked.
    """

    def __init__(self, run_id: str, scope: CancelScope, asked: list[tuple[Any, str]]) -> None:
        self._workflow_id = plan_workflow_id(run_id)
        self._scope = scope
        self._asked = asked
        self._lock = threading.Lock()
        if scope._bind(self._wake) or asked:  # asked since the plan's input was made, or before
            self._wake()

    def _wake(self) -> None:
        threading.Thread(target=self._send, name="actionspace-plan-cancel", daemon=True).start()

    def _send(self) -> None:
        from dbos import DBOS

        from actionspace.durable.nodes import NODE_TOPIC, cancel_message

        with self._lock:
            asked, self._asked = self._asked, []
            for nodes, reason in [*asked, *self._scope._take()]:
                try:
                    DBOS.send(self._workflow_id, cancel_message(nodes, reason), NODE_TOPIC)
                except Exception:  # the database is gone: the plan ends as it would have
                    _log.warning("actionspace: could not cancel %s", self._workflow_id, exc_info=True)

    def close(self) -> None:
        """The plan ended: later cancels of the scope ask nothing of it."""
        self._scope._bind(None)


def _outcome(run_id: str, wait: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """What ``wait`` returns (a plan workflow's result), or, for a workflow that ended without
    one, a result that says why: ``cancelled`` when it was cancelled through DBOS, ``internal``
    when it failed or gave up (its nodes' actions are in the ledger, settled or settling)."""
    from dbos._error import DBOSAwaitedWorkflowCancelledError, DBOSAwaitedWorkflowMaxRecoveryAttemptsExceeded

    try:
        return wait()
    except DBOSAwaitedWorkflowCancelledError:
        error = ActionError.of(
            "cancelled",
            f"the workflow of the plan of run {run_id} was cancelled; what its nodes committed before "
            "stays committed (see the ledger)",
            details={"phase": "workflow"},
        )
    except DBOSAwaitedWorkflowMaxRecoveryAttemptsExceeded as exc:
        error = ActionError.of("internal", f"the workflow of the plan of run {run_id} gave up: {exc}")
    return PlanResult(run_id=run_id, status="error", error=error).to_dict()


class PlanClient:
    """Submit plans to the workers of a store and read their results, without running any.

    ``store``: the ``postgresql://`` URL the workers use. Close it (or use ``with``) when done.
    """

    def __init__(self, store: str, *, config: DurableConfig | None = None) -> None:
        from dbos import DBOSClient

        config = config or DurableConfig()
        self._client: DBOSClient = DBOSClient(
            system_database_url=system_url(store),
            dbos_system_schema=config.system_schema,
            application_name=config.app_name,
        )

    def submit(
        self,
        plan: Plan | Mapping[str, Any],
        *,
        run_id: str,
        principal: Principal | None = None,
        max_concurrency: int | None = None,
    ) -> str:
        """Put the plan of ``run_id`` on the plan queue; returns its workflow id (idempotent per run)."""
        from actionspace.durable.workflows import PLAN_WORKFLOW

        request = plan_request(plan, run_id=run_id, principal=principal, max_concurrency=max_concurrency)
        workflow_id = plan_workflow_id(run_id)
        self._client.enqueue(
            {"queue_name": PLAN_QUEUE, "workflow_name": PLAN_WORKFLOW, "workflow_id": workflow_id}, request
        )
        return workflow_id

    def status(self, run_id: str) -> str | None:
        """The DBOS status of the plan of ``run_id`` (``PENDING``, ``SUCCESS``, …), None if unknown."""
        found = self._client.list_workflows(workflow_ids=[plan_workflow_id(run_id)], load_output=False)
        return found[0].status if found else None

    def statuses(self, run_ids: list[str]) -> dict[str, str]:
        """The DBOS status of each known plan among ``run_ids``, in one query."""
        ids = {plan_workflow_id(r): r for r in run_ids}
        found = self._client.list_workflows(workflow_ids=list(ids), load_input=False, load_output=False)
        return {ids[w.workflow_id]: w.status for w in found}

    def result(self, run_id: str) -> PlanResult:
        """Wait for the plan of ``run_id`` to end and return its result."""
        handle: WorkflowHandle[dict[str, Any]] = self._client.retrieve_workflow(plan_workflow_id(run_id))
        return plan_result(_outcome(run_id, lambda: handle.get_result(polling_interval_sec=RESULT_POLL_S)))

    def cancel(self, run_id: str, nodes: Collection[str] | None = None, *, reason: str = "cancelled") -> bool:
        """Cancel ``nodes`` (None: every node) of the plan of ``run_id`` and the nodes after them.

        Nodes not dispatched yet are removed (``cancelled``, ``phase: not_dispatched``), nodes
        already calling their tool end as their call does, committed ones stay committed; the plan
        then ends with its result as usual. True when the plan was queued or running and was told;
        False when it has ended or is unknown.
        """
        from actionspace.durable.nodes import NODE_TOPIC, cancel_message

        if self.status(run_id) not in ("PENDING", "ENQUEUED"):
            return False
        self._client.send(plan_workflow_id(run_id), cancel_message(nodes, reason), NODE_TOPIC)
        return True

    def send(self, workflow_id: str, message: Any, topic: str) -> None:
        self._client.send(workflow_id, message, topic)

    def close(self) -> None:
        self._client.destroy()

    def __enter__(self) -> PlanClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
