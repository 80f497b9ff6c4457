"""The labels a plan node held for approval carried, kept for a process that resumes it alone.

Inside its plan, a node's ``$ref`` arguments carry exactly the output labels of the nodes they
point at (:func:`~actionspace.policy.flow.bindings`); every other argument carries the run's
context label. A process that resumes the approved node after a restart runs it on its own,
without the plan's results: judged on the context alone, a contact's account read beside a
secret could no longer be paid, and, had the process stopped before the plan's results joined the
run's context, an account read from the secret could leave.

So when a round of a plan ends with nodes held, the runner records, per held node, a
``plan_node_held`` event (:func:`held_event`): the request id and each ``$ref`` argument's label
and origins, as the plan computed them. :func:`held_bindings` reads them back for the resumed
call. A plan node whose references' labels are not recorded (a stop before the event was
written, a ``first_of`` node, a record that cannot be read) is not sent alone: its arguments'
labels cannot be established again. A server that takes its run over runs it inside its plan
instead (:func:`labels_lost`), where they are computed again. Nor is a member of an atomic group
(``plan_started`` lists a group's ``members``): alone, its write would commit without its group's,
so it too runs only inside its plan, with its group (rule ``resume_group`` where it cannot).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from actionspace.approval.requests import ApprovalRequest
from actionspace.errors import ActionError
from actionspace.plan.model import PlanResult
from actionspace.plan.refs import RefError, parse_ref
from actionspace.policy.flow import Binding, bindings
from actionspace.policy.labels import Label
from actionspace.policy.stamped import label_of
from actionspace.runtime import Runtime
from actionspace.trace.events import TraceEvent
from actionspace.types import Observation

__all__ = ["HELD_KIND", "held_bindings", "held_event", "held_request", "labels_lost", "note_held"]

HELD_KIND = "plan_node_held"


def held_request(obs: Observation) -> str | None:
    """The id of the approval request ``obs`` waits on (None: it is not held for one)."""
    if obs.error is None or obs.error.category != "needs_approval":
        return None
    request_id = obs.error.details.get("request_id")
    return str(request_id) if request_id is not None else None


def note_held(rt: Runtime, plan: Mapping[str, Any], result: PlanResult) -> None:
    """Record, for each node of ``result`` held for approval, the labels its references carried."""
    for node_id, obs in result.nodes.items():
        request_id = held_request(obs)
        if request_id is not None:
            event = held_event(plan, result, node_id, request_id)
            rt.record(result.run_id, HELD_KIND, event, call_id=obs.call_id)


def held_event(plan: Mapping[str, Any], result: PlanResult, node_id: str, request_id: str) -> dict[str, Any]:
    """The ``plan_node_held`` payload of ``node_id`` (held under ``request_id``) after a round that
    ended with ``result``; ``bound`` is absent when the node's raw arguments are not at hand."""
    event: dict[str, Any] = {"node": node_id, "request_id": request_id}
    raw = _raw_arguments(plan, node_id)
    if raw is None:
        return event

    def source(text: str) -> tuple[str, Label] | None:
        try:
            obs = result.nodes.get(parse_ref(text).node)
        except RefError:
            return None
        return None if obs is None or obs.status != "ok" else (obs.call_id, label_of(obs))

    bound = bindings(raw, source)
    event["bound"] = {
        name: {
            "label": b.label.to_dict(),
            "origins": [[call_id, label.to_dict()] for call_id, label in b.origins],
            "mixed": b.mixed,
        }
        for name, b in bound.items()
    }
    return event


def _raw_arguments(plan: Mapping[str, Any], node_id: str) -> Mapping[str, Any] | None:
    """The arguments the plan wrote for ``node_id``, references and all (None for a ``first_of``
    node, whose arguments are its alternatives')."""
    nodes = plan.get("nodes")
    for node in nodes if isinstance(nodes, list) else ():
        if isinstance(node, Mapping) and node.get("id") == node_id:
            arguments = node.get("arguments", {})
            if "first_of" in node or not isinstance(arguments, Mapping):
                return None
            return arguments
    return None


def held_bindings(
    events: Iterable[TraceEvent], request: ApprovalRequest
) -> tuple[str, dict[str, Binding]] | ActionError | None:
    """(call id, bindings) of the held plan node of ``request``; None when the held call is no
    plan node with references (it is resumed as a call), a ``policy_violation`` when it is one
    and its references' labels cannot be read back, or when it is a member of an atomic group
    (rule ``resume_group``: it runs only with its group)."""
    events = list(events)
    call_id = f"{request.run_id}:{request.node_id}"
    asked = any(
        e.kind == "approval_requested" and e.call_id == call_id and e.data.get("request_id") == request.id
        for e in events
    )
    if not asked:
        return None
    group = _group_of(events, request.node_id)
    if group is not None:  # sent alone, its write would be committed without its group's
        return ActionError.of(
            "policy_violation",
            f"the approved plan node cannot be resumed here: it is a member of the atomic group "
            f"{group[:100]!r}, whose members commit together or not at all, so it runs only with its "
            "group, inside its plan",
            details={"rule": "resume_group", "request_id": request.id, "call_id": call_id, "group": group},
        )
    if not _with_references(events, request.node_id):
        return None
    bound = _recorded(events, request)
    if bound is None:
        return ActionError.of(
            "policy_violation",
            "the approved plan node cannot be resumed here: the labels of its references are not "
            "recorded, so its arguments' labels cannot be established again",
            details={"rule": "resume_labels", "request_id": request.id, "call_id": call_id},
        )
    return call_id, bound


def labels_lost(events: Iterable[TraceEvent], request: ApprovalRequest) -> bool:
    """True when the held call of ``request`` is a node with references of a plan run whose
    ``plan_node_held`` record cannot be read back (the server that held it stopped before writing
    it): sent alone it would be refused, so a server that takes the run over runs it inside its
    plan, where its references' labels are computed again (see ``service/runner.py``). True as
    well for a member of an atomic group: it is never sent alone, only with its group."""
    events = list(events)
    if _group_of(events, request.node_id) is not None:
        return True
    return _with_references(events, request.node_id) and _recorded(events, request) is None


def _group_of(events: list[TraceEvent], node_id: str) -> str | None:
    """The atomic group a ``plan_started`` of the run lists ``node_id`` among the members of."""
    for event in events:
        nodes = event.data.get("nodes") if event.kind == "plan_started" else None
        for listed in nodes if isinstance(nodes, list) else ():
            members = listed.get("members") if isinstance(listed, Mapping) else None
            if isinstance(members, list) and node_id in members:
                return str(listed.get("id"))
    return None


def _with_references(events: list[TraceEvent], node_id: str) -> bool:
    planned = [e for e in events if e.kind == "plan_started"]
    return bool(planned) and any(_refers(e, node_id) for e in planned)


def _recorded(events: list[TraceEvent], request: ApprovalRequest) -> dict[str, Binding] | None:
    """The bindings the last ``plan_node_held`` of ``request`` recorded (None: none readable)."""
    call_id = f"{request.run_id}:{request.node_id}"
    found = next(
        (
            e
            for e in reversed(events)
            if e.kind == HELD_KIND
            and e.call_id == call_id
            and e.data.get("request_id") == request.id
            and e.data.get("node") == request.node_id
        ),
        None,
    )
    return None if found is None else _read(found.data.get("bound"), request.arguments)


def _refers(event: TraceEvent, node_id: str) -> bool:
    """True unless ``event`` (a ``plan_started``) lists ``node_id`` without references (a node it
    does not list, past its cap, may have some)."""
    nodes = event.data.get("nodes")
    if not isinstance(nodes, list):
        return True
    listed = next((n for n in nodes if isinstance(n, Mapping) and n.get("id") == node_id), None)
    if listed is None:
        return len(nodes) >= 1000
    return bool(listed.get("refs"))


def _read(data: Any, arguments: Mapping[str, Any]) -> dict[str, Binding] | None:
    """The bindings of a recorded ``bound``; None when any part is not what :func:`held_event` writes."""
    if not isinstance(data, Mapping):
        return None
    out: dict[str, Binding] = {}
    try:
        for name, b in data.items():
            origins = b["origins"]
            if name not in arguments or not isinstance(origins, list) or not isinstance(b["mixed"], bool):
                return None
            pairs = tuple((_text(o[0]), _label(o[1])) for o in origins)
            out[name] = Binding(_label(b["label"]), pairs, b["mixed"])
    except (KeyError, TypeError, ValueError, IndexError):
        return None
    return out


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError("a call id is a string")
    return value


def _label(value: Any) -> Label:
    if not isinstance(value, Mapping):
        raise TypeError("a label is an object")
    return Label.from_dict(value)
