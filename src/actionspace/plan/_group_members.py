"""A member's observation once its atomic group ended: undone by the rollback, left unsettled by a
commit that is not established, or taken from the group's (ledger-replayed) observation."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from actionspace.errors import ActionError
from actionspace.types import Observation

if TYPE_CHECKING:
    from actionspace.plan.atomic import GroupAttempt
    from actionspace.plan.check import CheckedNode

__all__ = ["member_of", "rolled_back", "unsettled"]


def rolled_back(
    obs: Observation, group: str, cause: ActionError | None, attempt: GroupAttempt
) -> Observation:
    why = f": {cause.message}" if cause is not None else ""
    details: dict[str, Any] = {"rolled_back": True, "group": group}
    if attempt.rollback_pending:  # never committed: undone once its member's worker thread returns
        details = {"rolled_back": False, "committed": False, "rollback_pending": True, "group": group}
        why += "; its transaction is rolled back once the member still running on its worker thread returns"
    elif not attempt.rolled_back:  # never committed all the same, but the undo did not report success
        details = {"rolled_back": False, "committed": False, "group": group}
        why += f"; the rollback raised {attempt.rollback_error}"
    error = ActionError.of("cancelled", f"rolled back with group {group}{why}", details=details)
    return Observation.failure(error, call_id=obs.call_id, tool=obs.tool, tool_version=obs.tool_version)


def unsettled(member: CheckedNode, group: Observation, group_id: str) -> Observation:
    """A member of a group whose commit is not established: it may stand, it was never undone."""
    spec = member.specs[0]
    cause = group.error.message if group.error is not None else "the group's commit is not established"
    error = ActionError.of(
        "unknown_commit",
        f"node {member.id} ran inside group {group_id}, whose commit is not established ({cause}); "
        "query the group's status before acting on it again",
        details={"group": group_id, "phase": "commit"},
    )
    call_id = _member_call_id(group, member.id, group_id)
    return Observation.failure(error, call_id=call_id, tool=spec.name, tool_version=spec.version)


def _member_call_id(group: Observation, member: str, group_id: str) -> str:
    """``<run>:<member>``, the run taken from the group's call id ``<run>:<group>`` (ids may hold ':')."""
    suffix = f":{group_id}"
    call_id = group.call_id
    run = call_id[: -len(suffix)] if call_id.endswith(suffix) else call_id.rsplit(":", 1)[0]
    return f"{run}:{member}"


def member_of(group: Observation, member: CheckedNode, group_id: str) -> Observation:
    """A member's observation taken from its group's (ledger-replayed) observation."""
    call_id = _member_call_id(group, member.id, group_id)
    for item in group.items:
        if item.call_id == call_id:
            return item
    spec = member.specs[0]
    if group.status == "ok":  # committed, found by the environment's status query: no member details
        return Observation(
            call_id=call_id,
            tool=spec.name,
            tool_version=spec.version,
            diagnostics={"group_committed": True, "resolved_by": group.diagnostics.get("resolved_by")},
        )
    if group.error is not None and group.error.category == "unknown_commit":
        return unsettled(member, group, group_id)
    cause = group.error.message if group.error is not None else "the group failed"
    error = ActionError.of(
        "cancelled",
        f"node {member.id} did not run: its atomic group failed ({cause})",
        details={
            "phase": "not_dispatched",
            "group": group_id,
        },
    )
    return Observation.failure(error, call_id=call_id, tool=spec.name, tool_version=spec.version)
