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

A field a :class:`~actionspace.policy.provenance.FieldTrust` vouches for is vouched for by tool
and field: such a call's observation names the tool the trace's ``observation`` events name for
the call id (exactly one), and holds each value at the path it was read from (a value read as a
piece of a field's text, as a piece again). Where the record does not say that exactly (no tool,
two tools, two values at one path, a path no output has), or the values put back would be found
otherwise than recorded, the call's values are put back as a plain list under no tool: nothing
is vouched for, as strict as a value of unknown origin.

A record that cannot be read back (an event the store cut short, arguments that differ from the
approved ones, a value it names that the arguments do not hold), or none at all (the request was
filed and the process stopped before its trace was written), is a ``policy_violation``: the call
is not sent on weaker evidence than it was judged on. So is a request whose ``proposed`` event is
missing where the resuming runtime judges provenance (:func:`judges_provenance`): its values would
be judged as the model's own, looser than held. Only a runtime that judges no provenance resumes
such a call, as one held without a provenance stage.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from actionspace.approval.requests import ApprovalRequest
from actionspace.errors import ActionError
from actionspace.policy.evidence_index import find, index, same
from actionspace.policy.flow import USER, FlowState
from actionspace.policy.labels import Integrity, Label
from actionspace.policy.matching import prepare, probe
from actionspace.policy.provenance import embedded, leaves
from actionspace.policy.provenance_stage import ProvenanceStage
from actionspace.trace.events import TraceEvent
from actionspace.types import Observation

__all__ = ["HeldProposal", "held_proposal", "judges_provenance", "restore"]

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
    tools: Mapping[str, str] = field(default_factory=dict)
    """Call id → the one tool the trace's ``observation`` events name for it (a call id they
    name with two tools, or with none, is not in it)."""


def judges_provenance(stages: Iterable[object]) -> bool:
    """Whether a runtime running ``stages`` (``Engine.ordered``) judges its calls' argument
    provenance: it has a provenance stage, which reads a held call's ``proposed`` event."""
    return any(isinstance(stage, ProvenanceStage) for stage in stages)


def held_proposal(
    events: Iterable[TraceEvent], request: ApprovalRequest, *, reads_provenance: bool = True
) -> HeldProposal | ActionError | None:
    """The held call's proposal in its run's ``events``; a ``policy_violation`` when the trace holds
    no ``approval_requested`` of the request (filed, its trace lost) or a record it cannot read.

    ``reads_provenance``: the resuming runtime judges provenance (:func:`judges_provenance`;
    default True). A call whose ``proposed`` event is missing (none before its request) is then a
    ``policy_violation`` too; without it, None (resumed as a call held without a provenance stage).
    """
    events = list(events)
    known = frozenset(e.call_id for e in events if e.call_id is not None)
    tools = _tools(events)
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
        if reads_provenance:  # judged here as the model's own values: looser than held
            return _why(request.id, call_id, "the trace holds no proposal of the held call")
        return None
    data = found.data
    if "$truncated" in data:
        return _why(request.id, call_id, "the store cut the record of the held call short")
    provenance = data.get("provenance")
    if provenance is None:
        return HeldProposal(call_id=call_id, provenance=None, known=known, tools=tools)
    if not isinstance(provenance, Mapping) or data.get("arguments") != dict(request.arguments):
        return _why(request.id, call_id, "the recorded proposal is not the approved call")
    return HeldProposal(call_id=call_id, provenance=provenance, known=known, tools=tools)


def _tools(events: Sequence[TraceEvent]) -> dict[str, str]:
    """Call id → the tool its ``observation`` events name, for call ids they name exactly one for."""
    named: dict[str, set[str]] = {}
    for e in events:
        tool = e.data.get("tool") if e.kind == "observation" and e.call_id is not None else None
        if isinstance(tool, str) and tool:
            named.setdefault(e.call_id or "", set()).add(tool)
    return {cid: next(iter(tools)) for cid, tools in named.items() if len(tools) == 1}


def restore(
    flow: FlowState, held: HeldProposal, arguments: Mapping[str, Any], request_id: str
) -> ActionError | None:
    """Give ``flow`` the values of each call ``held`` derives arguments from (see the module doc)."""
    if held.provenance is None:
        return None
    read: dict[str, list[_Read]] = {}
    weak: list[tuple[Any, str | None]] = []  # values judged untrusted, model or default, and their call
    for name, recorded in held.provenance.items():
        if name not in arguments or not isinstance(recorded, list):
            return _why(request_id, held.call_id, f"the provenance of {str(name)[:60]!r} is not readable")
        at = _values_at(arguments[name])
        for entry in recorded:
            source = _source(entry, held.known)
            key = (
                (str(entry.get("path", "")), bool(entry.get("key", False)))
                if isinstance(entry, Mapping)
                else None
            )
            if source is None:
                if key in at and not str(entry.get("source", "")).startswith("user"):
                    weak.append((at[key], None))
                continue  # user, model, default: not read from a call
            kind, call_id, path = source
            if key not in at:
                return _why(
                    request_id, held.call_id, f"the provenance of {str(name)[:60]!r} names no value of it"
                )
            read.setdefault(call_id, []).append((kind, path, at[key]))
            if kind == "untrusted":
                weak.append((at[key], call_id))
    labels = _labels(flow)
    for call_id, values in read.items():
        if call_id in flow.seen:
            continue  # this process remembers what the model was shown: the stage reads that
        untrusted = any(kind == "untrusted" for kind, _path, _value in values)
        label = labels.get(call_id) or _from_context(
            flow.context, "untrusted" if untrusted else "tool_result"
        )
        if untrusted and not label.untrusted:
            label = label.join(Label(integrity="untrusted"))
        flow.observed_as(_observation(call_id, held.tools.get(call_id), values, weak, label), label)
    return None


_Read = tuple[str, str, Any]
"""(kind, path in the call's output, value) of a value the record says was read from a call."""

MAX_DEPTH = 64
"""Levels of a path put back as recorded (deeper: the values are put back as a plain list)."""
MAX_INDEX = 1024
"""The highest index of a path put back in a list (a higher one is put back as an object's key)."""


def _observation(
    call_id: str, tool: str | None, values: list[_Read], weak: list[tuple[Any, str | None]], label: Label
) -> Observation:
    """The observation of ``call_id`` that gives each of its ``values`` its recorded provenance."""
    if tool:
        data, held = _rebuilt(values)
        if data is not _CLASH and _faithful(data, call_id, held, weak, label.untrusted):
            return Observation(call_id=call_id, tool=tool, data=data)
    plain: list[Any] = []
    for _kind, _path, value in values:
        if value not in plain:
            plain.append(value)
    return Observation(call_id=call_id, tool="", data=plain)


_CLASH: Any = object()
_HOLE: Any = object()
"""A place nothing was put at (``None`` once built)."""
_KEY: Any = object()
"""A key put without a value (``None`` once built, unless a value is put there too)."""


class _Piece(str):
    """A text put to hold values as pieces of it (several at one place make one text)."""

    __slots__ = ()


def _rebuilt(values: list[_Read]) -> tuple[Any, list[tuple[Any, str, str | None]]]:
    """An output holding each value at its path, and (value, path, holder) of each as
    :func:`~actionspace.policy.evidence_index.find` must find it there. A value read as
    ``untrusted`` is held by none: a piece of a text, the key's the path ends with or its own (it
    may have been a piece of a vouched field; a record never vouches for it). Any other is the
    key the path ends with (held by its object), else whole (held by its field). ``_CLASH`` when
    a path is not one an output may have, or a place is both a value and a list or object."""
    root: Any = _HOLE
    held: list[tuple[Any, str, str | None]] = []
    # a vouched value first: a key put before it on another path must not be found first
    for kind, path, value in sorted(values, key=lambda v: v[0] != "tool_result"):
        parts = _pointer(path)
        if parts is None:
            return _CLASH, held
        holder: str | None = path
        key = same(value, parts[-1])
        if kind == "untrusted":
            holder, piece = None, _Piece(f"« {value} »")
            if key:
                parts[-1] = piece
            key = key or str(value) in parts[-1]
            leaf: Any = _KEY if key else piece
        elif key:
            leaf = _KEY  # a key comes before its value: a key it was, whole
            holder = path.rsplit("/", 1)[0]
        else:
            leaf = value
        root = _put(root, parts, leaf, key)
        if root is _CLASH:
            return _CLASH, held
        held.append((value, path, holder))
    return _filled(root), held


def _pointer(path: str) -> list[str] | None:
    """The parts of a JSON pointer as a value's path names them; None for the root, which a
    source names as ``/`` like the key ``""``, and for a pointer deeper than :data:`MAX_DEPTH`."""
    if not path.startswith("/") or path == "/":
        return None
    parts = path[1:].split("/")
    if len(parts) > MAX_DEPTH:
        return None
    return [p.replace("~1", "/").replace("~0", "~") for p in parts]


def _put(node: Any, parts: list[str], leaf: Any, key: bool) -> Any:
    """``node`` with ``leaf`` put at ``parts``, or ``_CLASH``. A part of digits is a list's index,
    unless it is the last and ``key``, it is past :data:`MAX_INDEX`, or an object is there (an
    object's keys it was then, as they are where a list is met by a part that is no index)."""
    if not parts:  # two values at one place: the first stays, and _faithful judges the second
        if type(node) is _Piece and type(leaf) is _Piece:
            return _Piece(f"{node} {leaf}")  # pieces of one text
        return leaf if node is _HOLE or node is _KEY else node
    if node is _KEY:
        node = _HOLE
    head, rest = parts[0], parts[1:]
    index = head.isascii() and head.isdigit() and str(int(head)) == head and not (key and not rest)
    if index and int(head) <= MAX_INDEX and (node is _HOLE or isinstance(node, list)):
        i = int(head)
        items: list[Any] = [] if node is _HOLE else node
        items.extend([_HOLE] * (i + 1 - len(items)))
        items[i] = _put(items[i], rest, leaf, key)
        return _CLASH if items[i] is _CLASH else items
    if isinstance(node, list):
        node = {str(i): v for i, v in enumerate(node) if v is not _HOLE}
    if not (node is _HOLE or isinstance(node, dict)):
        return _CLASH
    fields: dict[str, Any] = {} if node is _HOLE else node
    fields[head] = _put(fields.get(head, _HOLE), rest, leaf, key)
    return _CLASH if fields[head] is _CLASH else fields


def _filled(node: Any) -> Any:
    if isinstance(node, list):
        return [_filled(v) for v in node]
    if isinstance(node, dict):
        return {str(k): _filled(v) for k, v in node.items()}  # a key may be a _Piece
    if type(node) is _Piece:
        return str(node)
    return None if node is _HOLE or node is _KEY else node


def _faithful(
    data: Any,
    call_id: str,
    held: list[tuple[Any, str, str | None]],
    weak: list[tuple[Any, str | None]],
    untrusted: bool,
) -> bool:
    """True when ``data``, read as the stage reads an observation, holds each value where and as
    ``held`` says (:func:`_rebuilt`; one held by none, anywhere as a piece), and holds as a whole
    none of the ``weak`` values (judged untrusted, model or default) it does not hold as recorded:
    a vouched field would vouch for it."""
    flat = [
        (p, v, prepare(v, loose=untrusted) if isinstance(v, str) else None, k) for p, v, k in leaves(data)
    ]
    indexed = index(flat, loose=untrusted)

    def hit(value: Any) -> tuple[str, str | None] | None:
        loose = untrusted and isinstance(value, str) and not value.isascii()
        return find(value, probe(value, loose=loose), indexed)

    for value, path, holder in held:
        found = hit(value)
        # read as a piece, any piece will do: no field vouches for it (a piece of another field
        # may be found before the one the record names)
        if found is None or found[1] != holder or (holder is not None and found[0] != path):
            return False
    for value, source in weak:
        if source != call_id and untrusted:
            found = hit(value)
            if found is not None and found[1] is not None:
                return False
    return True


def _values_at(value: Any) -> dict[tuple[str, bool], Any]:
    """(pointer, is-a-key) → scalar of an argument, as the provenance stage names them."""
    out: dict[tuple[str, bool], Any] = {}
    for path, leaf, is_key in leaves(value):
        out.setdefault((path, is_key), leaf)
        if isinstance(leaf, str):
            for entity in embedded(leaf):
                out.setdefault((f"{path}#{entity}", is_key), entity)
    return out


def _source(entry: Any, known: frozenset[str]) -> tuple[str, str, str] | None:
    """(kind, call id, path) of a recorded value read from a call; None for any other provenance.
    The path is ``""`` (no path) when the text may be read with two call ids the trace names."""
    text = str(entry.get("source", "")) if isinstance(entry, Mapping) else ""
    kind, _, rest = text.partition("(")
    if kind not in _DERIVED or not rest.endswith(")"):
        return None
    inner = rest[:-1]
    cuts = [i for i in range(len(inner)) if inner.startswith(", /", i)]  # a path starts with "/"
    named = [inner[:i] for i in cuts if inner[:i] in known]
    call_id = named[0] if named else inner.rpartition(", ")[0]
    if not call_id or (kind == "untrusted" and call_id == USER):
        return None  # the user's untrusted messages cross processes with the run
    return kind, call_id, inner[len(call_id) + 2 :] if len(named) < 2 else ""


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
