"""The memory trace store's records as it keeps them: compact call and plan-node records with their
shapes replaced by an index, a run's call records laid flat (:class:`CallLog`), and what
pending records weigh before they are packed."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, cast

from actionspace.trace._node_rows import Rows
from actionspace.trace.events import CallShape, CompactCall, CompactNode, EventRecord

__all__ = [
    "CALL_WIDTH",
    "CallLog",
    "Snapshot",
    "call_records",
    "compact_calls",
    "records_weight",
    "unpacked",
    "unpacked_node",
]

CALL_WIDTH = 11
"""Fields of a compact call record (:data:`~actionspace.trace.events.CompactCall`), as kept."""


class CallLog(list[Any]):
    """A run's compact call records laid end to end, :data:`CALL_WIDTH` fields each: ``append``
    takes one record (a tuple) and keeps its fields, not the tuple.

    A kept tuple is a container the cyclic collector tracks until its first young collection
    sees it, and it outlives the call: one such object a call was a young collection every ~700
    calls, each walking every field of every record kept since the last one (150-300 µs, 10-30
    times a call, in the p99 of ``rt.acall``). A field is a string, a number or None (or the
    model's object, as the tuple held it): the list grows, the collector's count does not (the
    tuple ``append`` receives is freed as it was made). Read it with :func:`call_records`."""

    __slots__ = ()

    append = list.extend


def call_records(flat: Sequence[Any]) -> Iterator[tuple[Any, ...]]:
    """A :class:`CallLog`'s records (or a copy of its fields), as the tuples appended, in order."""
    fields = iter(flat)
    return zip(*(fields,) * CALL_WIDTH, strict=True)


def compact_calls(flat: Sequence[Any], shapes: Sequence[CallShape]) -> Iterator[CompactCall]:
    """A :class:`CallLog`'s records (or a copy of its fields) as the compact calls appended."""
    return (unpacked(kept, shapes) for kept in call_records(flat))


Snapshot = tuple[list[bytes], list[EventRecord], list[Any], list[Any], list[Rows], list[CallShape]]
"""A run's packed blobs, pending records (those that came encoded, decoded), the fields of its
compact calls (as its :class:`CallLog` lays them), compact nodes, batches of flat node rows and
the shapes they index."""


def unpacked(kept: tuple[Any, ...], shapes: Sequence[CallShape]) -> CompactCall:
    return cast(CompactCall, (*kept[:3], shapes[kept[3]], *kept[4:]))


def unpacked_node(kept: tuple[Any, ...], shapes: Sequence[CallShape]) -> CompactNode:
    return cast(CompactNode, (*kept[:3], shapes[kept[3]], *kept[4:]))


def records_weight(records: Sequence[EventRecord]) -> int:
    """How much keeping ``records`` as objects costs the collector, roughly: one per record, plus
    the length of each list in its data (a plan's ``plan_started`` lists every node and edge)."""
    weight = len(records)
    for record in records:
        for value in record[4].values():
            if type(value) is list:
                weight += len(value)
    return weight
