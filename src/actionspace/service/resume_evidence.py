"""What a held call's argument provenance was judged on, given back to a process that resumes it.

A run's flow state crosses processes (labels, the user's messages: ``FlowState.to_state``) but
the observations the model was shown do not. A process resuming an approved call would find the
values taken from earlier tool outputs in none of them: judged ``model``, a value copied from
untrusted mail could pass an ``ArgumentPolicy`` that refuses ``untrusted`` (laundering), and one
copied from a trusted lookup could be refused where it was allowed.

The provenance stage recorded, in the held call's ``proposed`` event, the call and path each value
was derived from. :func:`held_proposal` finds that event; :func:`restore` gives the run's flow
state, for each call named there that this process does not remember, an observation holding
only those values, under that call's label (its own where the run's sources list it; else the
context's confidentiality and readers with the trust the record states). The stage then finds
each value where it found it before, with the same trust: the same provenance, the same verdict.

A record that cannot be read back (an event the store cut short, arguments that differ from the
approved ones, a value it names that the arguments do not hold), or none at all (the request was
filed and the process stopped before its trace was written), is a ``policy_violation``: the call
is not sent on weaker evidence than it was judged on.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from actionspace.approval.requests import ApprovalRequest
from actionspace.errors import ActionError
from actionspace.policy.flow import USER, FlowState
from actionspace.policy.labels import Integrity, Label
from actionspace.policy.provenance import embedded, leaves
from actionspace.trace.events import TraceEvent
from actionspace.types import Observation

__all__ = ["HeldProposal", "held_proposal", "restore"]

_DERIVED = ("tool_result", "untrusted")
"""The provenance kinds that name the call a value was read from."""


@dataclass(frozen=True, slots=True, kw_only=True)
class HeldProposal:
    """The ``proposed`` event of the call an approval request holds."""

    call_id: str
    """The call id the held call was proposed under (the model's, when it gave one)."""
    provenance: Mapping[str, Any] | None
    """Per argument, the recorded provenance of its values; None when no stage recorded any."""
    known: frozenset[str]
    """Every call id the run's trace names (to read call ids that hold ``", "``)."""


def held_proposal(
    events: Iterable[TraceEvent], request: ApprovalRequest
) -> HeldProposal | ActionError | None:
    """The held call's proposal in its run's ``events``; None when no stage recorded one (the
    call was held without a ``proposed`` event), a ``policy_violation`` when the trace holds no
    ``approval_requested`` of the request (filed, its trace lost) or a record it cannot read."""
    events = list(events)
    known = frozenset(e.call_id for e in events if e.call_id is not None)
    asked = next(
        (
            e
            for e in reversed(events)
            if e.kind == "approval_requested" and e.data.get("request_id") == request.id and e.call_id
        ),
        None,
    )
    if asked is None or asked.call_id is None:
        # filed, but its trace never written (the process stopped in between): what the call was
        # judged on is unknown
        return _why(request.id, None, "the trace holds no record of the held call")
    call_id = asked.call_id
    found = next(
        (e for e in reversed(events) if e.kind == "proposed" and e.call_id == call_id and e.seq < asked.seq),
        None,
    )
    if found is None:
        return None
    data = found.data
    if "$truncated" in data:
        return _why(request.id, call_id, "the store cut the record of the held call short")
    provenance = data.get("provenance")
    if provenance is None:
        return HeldProposal(call_id=call_id, provenance=None, known=known)
    if not isinstance(provenance, Mapping) or data.get("arguments") != dict(request.arguments):
        return _why(request.id, call_id, "the recorded proposal is not the approved call")
    return HeldProposal(call_id=call_id, provenance=provenance, known=known)


def restore(
    flow: FlowState, held: HeldProposal, arguments: Mapping[str, Any], request_id: str
) -> ActionError | None:
    """Give ``flow`` the values of each call ``held`` derives arguments from (see the module doc)."""
    if held.provenance is None:
        return None
    values: dict[str, list[Any]] = {}
    kinds: dict[str, str] = {}
    for name, recorded in held.provenance.items():
        if name not in arguments or not isinstance(recorded, list):
            return _why(request_id, held.call_id, f"the provenance of {str(name)[:60]!r} is not readable")
        at = _values_at(arguments[name])
        for entry in recorded:
            source = _source(entry, held.known)
            if source is None:
                continue  # user, model, default: not read from a call
            kind, call_id = source
            key = (str(entry.get("path", "")), bool(entry.get("key", False)))
            if key not in at:
                return _why(
                    request_id, held.call_id, f"the provenance of {str(name)[:60]!r} names no value of it"
                )
            found = values.setdefault(call_id, [])
            if at[key] not in found:
                found.append(at[key])
            if kinds.get(call_id) != "untrusted":
                kinds[call_id] = kind
    labels = _labels(flow)
    for call_id, shown in values.items():
        if call_id in flow.seen:
            continue  # this process remembers what the model was shown: the stage reads that
        label = labels.get(call_id) or _from_context(flow.context, kinds[call_id])
        if kinds[call_id] == "untrusted" and not label.untrusted:
            label = label.join(Label(integrity="untrusted"))
        flow.observed_as(Observation(call_id=call_id, tool="", data=shown), label)
    return None


def _values_at(value: Any) -> dict[tuple[str, bool], Any]:
    """(pointer, is-a-key) → scalar of an argument, as the provenance stage names them."""
    out: dict[tuple[str, bool], Any] = {}
    for path, leaf, is_key in leaves(value):
        out.setdefault((path, is_key), leaf)
        if isinstance(leaf, str):
            for entity in embedded(leaf):
                out.setdefault((f"{path}#{entity}", is_key), entity)
    return out


def _source(entry: Any, known: frozenset[str]) -> tuple[str, str] | None:
    """(kind, call id) of a recorded value read from a call; None for any other provenance."""
    text = str(entry.get("source", "")) if isinstance(entry, Mapping) else ""
    kind, _, rest = text.partition("(")
    if kind not in _DERIVED or not rest.endswith(")"):
        return None
    inner = rest[:-1]
    cuts = [i for i in range(len(inner)) if inner.startswith(", ", i)]
    call_id = next((inner[:i] for i in cuts if inner[:i] in known), None)
    if call_id is None:
        call_id = inner.rpartition(", ")[0]
    if not call_id or (kind == "untrusted" and call_id == USER):
        return None  # the user's untrusted messages cross processes with the run
    return kind, call_id


def _labels(flow: FlowState) -> dict[str, Label]:
    """Call id → the join of the labels the run's sources list it under."""
    out: dict[str, Label] = {}
    for call_id, label in flow.origins():
        out[call_id] = out[call_id].join(label) if call_id in out else label
    return out


def _from_context(context: Label, kind: str) -> Label:
    """A call the run's sources do not list: at most the context's confidentiality and readers."""
    integrity: Integrity = "untrusted" if kind == "untrusted" else "trusted"
    return Label(confidentiality=context.confidentiality, integrity=integrity, readers=context.readers)


def _why(request_id: str, call_id: str | None, why: str) -> ActionError:
    return ActionError.of(
        "policy_violation",
        f"the approved call cannot be resumed here: {why}, so its arguments' provenance cannot be "
        "established again",
        details={"rule": "resume_provenance", "request_id": request_id, "call_id": call_id},
    )
