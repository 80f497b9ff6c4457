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
        pairs = [(str(ref), str(n["id"])) for n in nodes for ref in items(n.get("refs"))]
    else:
        added = {
            (str(a.get("from")), str(a.get("to")))
            for a in items(data.get("added_edges"))
            if isinstance(a, Mapping)
        }
        edges = [(str(e[0]), str(e[1])) for e in items(data.get("edges")) if len(items(e)) == 2]
        pairs = [edge for edge in edges if edge not in added]
    for source, consumer in pairs:
        sources.setdefault(prefix + consumer, set()).add(prefix + source)
