"""Redaction of trace events by label: what a viewer of a trace may see.

While a run's context label is secret or has a reader set, every event the run records carries
that label under ``data["label"]`` (the Recorder adds it). A viewer who may not read the label
(:func:`~actionspace.policy.labels.may_read`: in the readers, or holding ``labels:secret``) sees
such an event with every value-bearing field replaced by :data:`REDACTED`; the structural fields
(kind, tool, verdict, category, hashes, ids) stay so the timeline still reads.

A mark that is no label (a trace imported from elsewhere: a reader set that is no list of ids, an
unknown confidentiality, a text) reads as the most restricted label (:func:`mark_of`): only a
holder of ``labels:secret`` sees the event's values, and nothing raises.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import Field
from typing import Any, ClassVar, Protocol, TypeVar

from actionspace.policy.labels import Label, may_read
from actionspace.policy.principal import Principal

__all__ = ["KEPT_FIELDS", "REDACTED", "mark_of", "redact_event", "redact_events"]

REDACTED = "[redacted]"
KEPT_FIELDS: frozenset[str] = frozenset(
    {
        "tool", "version", "verdict", "status", "category", "decision", "node_id", "node", "attempt",
        "idempotency_key", "content_hash", "schema_hash", "principal", "request_id", "args_digest",
        "recovery", "format", "label", "rule", "by", "state", "chars", "output", "input_label",
    }
)  # fmt: skip
"""Event fields kept as they are in a redacted event (they name things; they carry no values)."""

_UNREADABLE = Label(confidentiality="secret", readers=frozenset())
"""What a mark that is no label reads as: secret, readable by no reader set."""


def mark_of(data: Mapping[str, Any]) -> Label | None:
    """The label an event's ``data`` is marked with (``data["label"]``); None when it has no mark.

    A mark that is no well-formed label reads as secret with an empty reader set, never raises.
    """
    if "label" not in data:
        return None
    mark = data["label"]
    if not isinstance(mark, Mapping):
        return _UNREADABLE
    readers = mark.get("readers")
    if readers is not None and not (
        isinstance(readers, list | tuple) and all(isinstance(r, str) for r in readers)
    ):
        return _UNREADABLE
    try:
        return Label.from_dict(mark)
    except (TypeError, ValueError):  # an unknown (or unhashable) confidentiality or integrity
        return _UNREADABLE


def redact_event(data: Mapping[str, Any], viewer: Principal | None) -> Mapping[str, Any]:
    """``data`` itself when ``viewer`` may read it, else a copy with the values redacted."""
    label = mark_of(data)
    if label is None or may_read(label, viewer):
        return data
    out: dict[str, Any] = {}
    for key, value in data.items():
        if key in KEPT_FIELDS:
            out[key] = value
        elif key == "arguments" and isinstance(value, Mapping):
            out[key] = {name: REDACTED for name in value}
        else:
            out[key] = REDACTED
    out["redacted"] = True
    return out


class Event(Protocol):
    """A dataclass event with a ``data`` payload (:class:`actionspace.trace.events.TraceEvent` is one)."""

    __dataclass_fields__: ClassVar[dict[str, Field[Any]]]

    @property
    def data(self) -> Mapping[str, Any]: ...


E = TypeVar("E", bound=Event)


def redact_events(events: Iterable[E], viewer: Principal | None) -> list[E]:
    """The events as ``viewer`` may see them (see :func:`redact_event`); ``data`` alone changes."""
    out = []
    for event in events:
        data = redact_event(event.data, viewer)
        out.append(event if data is event.data else dataclasses.replace(event, data=data))
    return out
