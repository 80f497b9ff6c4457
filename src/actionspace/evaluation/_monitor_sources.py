"""Which calls consumed which results, read from event payloads a trace may hold in any shape.

Two marks name a consumed result: a value the runtime found in a call's result (a ``proposed``
event's inferred provenance, ``tool_result(<call_id>, …)`` or ``untrusted(<call_id>, …)``) and a
plan reference (the ``refs`` of a ``plan_started`` node; without them, the plan's declared edges).
A payload field of an unexpected type is read as absent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["inferred_sources", "items", "plan_links"]


def inferred_sources(values: Sequence[Any]) -> set[str]:
    """Call ids in a ``proposed`` event's provenance: ``tool_result(<id>, <path>)`` and
    ``untrusted(<id>, <path>)`` (a value the runtime found in that call's result)."""
    found: set[str] = set()
    for value in values:
        source = value.get("source") if isinstance(value, Mapping) else None
        if not isinstance(source, str):
            continue
        for kind in ("tool_result(", "untrusted("):
            if source.startswith(kind) and source.endswith(")"):
                call_id = source[len(kind) : -1].rpartition(", ")[0]
                if call_id and call_id != "user":
                    found.add(call_id)
    return found


def items(value: Any) -> Sequence[Any]:
    """``value`` when it is a list, else no items."""
    return value if isinstance(value, list | tuple) else ()


def plan_links(run_id: str, data: Mapping[str, Any], sources: dict[str, set[str]]) -> None:
    """Record which plan node consumed which: a node's ``refs`` when given, else the plan's edges."""
    prefix = f"{run_id}:"
    nodes = [n for n in items(data.get("nodes")) if isinstance(n, Mapping) and "id" in n]
    if any("refs" in n for n in nodes):
        pairs = [(_id(ref), _id(n["id"])) for n in nodes for ref in items(n.get("refs"))]
    else:
        added = {
            (_id(a.get("from")), _id(a.get("to")))
            for a in items(data.get("added_edges"))
            if isinstance(a, Mapping)
        }
        edges = [(_id(e[0]), _id(e[1])) for e in items(data.get("edges")) if len(items(e)) == 2]
        pairs = [edge for edge in edges if edge not in added]
    for source, consumer in pairs:
        if source is not None and consumer is not None:
            sources.setdefault(prefix + consumer, set()).add(prefix + source)


def _id(value: Any) -> str | None:
    """A node id as text: a number as it reads; None for a container (read as absent: its repr
    may be enormous, or raise when nested deep enough)."""
    if isinstance(value, str):
        return value
    if value is None or isinstance(value, int | float):
        try:
            return str(value)
        except ValueError:  # an int of more digits than Python converts
            return None
    return None
