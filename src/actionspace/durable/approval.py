"""Waking a durable plan's node when its approval is decided.

A node waiting for approval looks at its request now and then on its own (``approval_poll_s``,
doubling up to ``approval_poll_max_s``), so deciding the request in the store (API, CLI, console)
is enough. :func:`wake` makes it look at once: it sends the node's workflow a message. The node
files its request inside its plan's step and gets its own workflow just after; its first act
there is a look at the request, so a decision taken before that workflow exists is seen at once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from actionspace.approval.requests import ApprovalRequest
from actionspace.durable.engine import legacy_node_workflow_id, node_workflow_id

if TYPE_CHECKING:
    from actionspace.durable.backend import PlanClient
    from actionspace.durable.config import DurableConfig

__all__ = ["wake", "wake_decided"]


def wake(client: PlanClient, request: ApprovalRequest) -> bool:
    """Make the node of ``request`` look at its decision now.

    True when the node's workflow was told, or has yet to start (its plan still runs) and so
    looks first thing; False when no plan of the request's run is running.
    """
    from dbos._error import DBOSException, DBOSNonExistentWorkflowError

    from actionspace.durable.nodes import APPROVAL_TOPIC

    # a node workflow begun before its id was escaped goes by the earlier form
    for workflow_id in (node_workflow_id(request.run_id, request.node_id), _legacy_id(request)):
        try:
            client.send(workflow_id, request.status, APPROVAL_TOPIC)
        except DBOSNonExistentWorkflowError:
            continue
        except DBOSException:
            return False
        return True
    return client.status(request.run_id) in ("PENDING", "ENQUEUED")


def _legacy_id(request: ApprovalRequest) -> str:
    return legacy_node_workflow_id(request.run_id, request.node_id or "")


def wake_decided(store: str, request: ApprovalRequest, config: DurableConfig | None = None) -> bool:
    """After a decision taken in ``store`` (CLI, API, console): wake the durable node waiting on it.

    Best effort and cheap to skip: only a request of a plan node, in a PostgreSQL store, can have a
    durable node behind it, and a node that is not woken still finds the decision at its next look
    (within ``approval_poll_max_s``). False when nothing was woken.
    """
    if not request.node_id or not store.startswith(("postgresql://", "postgres://")):
        return False
    from actionspace.durable.backend import PlanClient

    try:
        with PlanClient(store, config=config) as client:
            return wake(client, request)
    except Exception:  # no DBOS tables in this store, or the database is gone: the poll remains
        return False
