"""Plain plan nodes' records in the memory trace store, kept as rows the collector stops tracking.

A node's record (:data:`~actionspace.trace.events.CompactNode`) holds its tool's shape and its
arguments as a dict: objects the collector would walk for as long as the store keeps them, so the
store packed them with ``marshal``, 512 at a time. By then a record's objects have long left the
processor's caches, and ``marshal`` noted every object it met twice in a table of its own (an
entry allocated and freed for each): about a tenth of a zero-latency plan's time went there.

When every argument of every node of a batch is a ``str``, ``int``, ``float``, ``bool`` or
``None`` and so is every key (arguments as a plan's plain nodes have them), each record is kept
as a row of plain values instead, its shape replaced by its index and its arguments by their place
among the batch's::

    (seq, ts, call_id, shape index, place, node id, obs_seq, obs_ts, digest)

The collector stops tracking such a row the first time it sees it, and the dicts of plain values
it still walks are cheap to visit: nothing is encoded. The arguments dicts are the records' own
(the node's call made its own copy: ``Recorder``'s records are never changed), and every reader
gets copies of them (:func:`~actionspace.trace.events.expand_node`). Anything else (a nested
value, a subclass of one of those types, a mapping that is not a ``dict``) is packed as before
(see ``MemoryTraceStore._pack_nodes``). Kept so, a node's record takes about five times the memory
it took packed: the memory store keeps a process's trace for tests and benchmarks.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Iterator, Sequence
from itertools import chain, repeat
from typing import Any, cast

from actionspace.trace.events import CallShape, CompactNode

__all__ = ["ATOMS", "Rows", "flat_rows", "node_records", "shape_indices"]

ATOMS = frozenset({str, int, float, bool, type(None)})
"""The types of the values a flat row holds: none of them is a container the collector tracks."""

Rows = tuple[tuple[dict[str, Any], ...], tuple[tuple[Any, ...], ...]]
"""A batch of rows: the nodes' arguments (as they came: dicts of plain values, which nothing
changes) and the rows, each naming its arguments by their place."""


def shape_indices(
    shaped: Sequence[CallShape], index_of: dict[int, int], shapes: list[CallShape]
) -> Iterable[int]:
    """The index of each record's shape in ``shapes`` (a shape not indexed yet is added; every
    shape indexed stays alive there, so its ``id`` stays its own)."""
    one = shaped[0]
    if all(map(operator.is_, shaped, repeat(one))):  # the usual batch: one tool's nodes, one shape
        index = index_of.get(id(one))
        if index is None:
            index = index_of[id(one)] = len(shapes)
            shapes.append(one)
        return repeat(index, len(shaped))
    out: list[int] = []
    held, index = None, 0  # the last shape looked up
    for shape in shaped:
        if shape is not held:
            found = index_of.get(id(shape))
            if found is None:
                found = index_of[id(shape)] = len(shapes)
                shapes.append(shape)
            held, index = shape, found
        out.append(index)
    return out


def flat_rows(columns: Sequence[Sequence[Any]], indices: Iterable[int]) -> Rows | None:
    """The batch's records as rows (see the module's docstring), or None when an argument mapping
    is not a ``dict`` or one of its keys or values is not of :data:`ATOMS`. ``columns``: the
    records' fields, one tuple each, as ``zip(*records)`` gives them; ``indices``: their shapes'."""
    seqs, tss, calls, _, arguments, ids, obs_seqs, obs_tss, digests = columns
    if not (
        all(map(operator.is_, map(type, arguments), repeat(dict)))
        and ATOMS.issuperset(map(type, chain.from_iterable(map(dict.values, arguments))))
        and ATOMS.issuperset(map(type, chain.from_iterable(arguments)))  # (the keys)
    ):
        return None
    at = range(len(seqs))  # each row's arguments, by their place in the batch's
    rows = tuple(zip(seqs, tss, calls, indices, at, ids, obs_seqs, obs_tss, digests, strict=True))
    return cast("tuple[dict[str, Any], ...]", arguments), rows


def node_records(batches: Iterable[Rows], shapes: Sequence[CallShape]) -> Iterator[CompactNode]:
    """The records the rows of ``batches`` stand for (their arguments the batch's own dicts:
    :func:`~actionspace.trace.events.expand_node` copies them for each reader)."""
    for arguments, rows in batches:
        for seq, ts, call_id, index, at, node, obs_seq, obs_ts, digest in rows:
            yield (seq, ts, call_id, shapes[index], arguments[at], node, obs_seq, obs_ts, digest)
