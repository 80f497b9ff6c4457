"""The memory trace store's records as it keeps them: compact call and plan-node records with their
shapes replaced by an index, and what pending records weigh before they are packed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from actionspace.trace._node_rows import Rows
from actionspace.trace.events import CallShape, CompactCall, CompactNode, EventRecord

__all__ = ["Snapshot", "records_weight", "unpacked", "unpacked_node"]

Snapshot = tuple[
    list[bytes], list[EventRecord], list[tuple[Any, ...]], list[Any], list[Rows], list[CallShape]
]
"""A run's packed blobs, pending records (those that came encoded, decoded), compact calls, compact
nodes, batches of flat node rows and the shapes they index."""


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
