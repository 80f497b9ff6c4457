"""Waking a durable plan's node when its approval is decided.

A node waiting for approval looks at its request now and then on its own (``approval_poll_s``,
doubling up to ``approval_poll_max_s``), so deciding the request in the store (API, CLI, console)
is enough. :func:`wake` makes it look at once: it sends the node's workflow a message.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from actionspace.approval.requests import ApprovalRequest
from actionspace.durable.engine import node_workflow_id

if TYPE_CHECKING:
    from actionspace.durable.backend import PlanClient
    from actionspace.durable.config import DurableConfig

__all__ = ["wake", "wake_decided"]


def wake(client: PlanClient, request: ApprovalRequest) -> bool:
    """Tell the node workflow of ``request`` to look at its decision now; False if there is none."""
    from dbos._error import DBOSException

    from actionspace.durable.workflows import APPROVAL_TOPIC

    try:
        client.send(node_workflow_id(request.run_id, request.node_id), request.status, APPROVAL_TOPIC)
    except DBOSException:
        return False
    return True


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
