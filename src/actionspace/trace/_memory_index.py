"""Where each call's records are in one run of the memory trace store, so that a read of a few calls
(``call_events``) visits those calls' records and leaves the rest of the run unread.

A run's records sit in lists the store only ever appends to (its packed blobs, its compact calls,
its packed node records, its batches of flat node rows), so a place found once stays right. The
index of a run is made by the first read that needs it and, at each read, extended over what was
appended since: every record is indexed once over the store's life, and a read then visits the
places of the ids it asks for, the records not packed yet (at most ``COMPACT_AT``) and those that
came encoded. Runs nobody reads that way cost nothing: appends never touch an index.
"""

from __future__ import annotations

import marshal
from collections.abc import Callable, Collection, Hashable, Sequence
from typing import Any

from actionspace.trace._memory_records import CALL_WIDTH
from actionspace.trace._node_rows import Rows
from actionspace.trace.events import EventRecord

__all__ = ["CallIndex", "Found"]

Found = tuple[list[bytes], list[Any], list[tuple[Any, ...]], list[Rows]]
"""What a run holds of some calls: the blobs holding any of their records, their compact calls
(their fields laid flat, as the store's ``CallLog`` lays them), their packed node records
(unpacked) and their flat node rows (in batches, with the arguments)."""


class CallIndex:
    """Each call id's places in one run's append-only lists, as far as a read has seen them."""

    __slots__ = ("_blobs", "_calls", "_flat", "_node_blobs", "_seen")

    def __init__(self) -> None:
        self._blobs: dict[str | None, list[int]] = {}
        self._calls: dict[str | None, list[int]] = {}
        self._node_blobs: dict[str | None, list[int]] = {}
        self._flat: dict[str | None, list[tuple[int, int]]] = {}
        self._seen = (0, 0, 0, 0)

    def find(
        self,
        ids: Collection[str],
        lists: tuple[Sequence[bytes], Sequence[Any], Sequence[bytes], Sequence[Rows]],
        lengths: tuple[int, int, int, int],
        decode: Callable[[bytes], Sequence[EventRecord]],
    ) -> Found:
        """What ``lists`` (a run's blobs, compact calls' fields, node blobs and flat batches, of which
        the first ``lengths`` items are read) hold of ``ids``; ``decode`` unpacks one of its blobs.
        The caller holds the store's reading lock: two reads never extend one index at once."""
        blobs, calls, node_blobs, flat = lists
        self._extend(lists, lengths, decode)
        mine_blobs = sorted({i for cid in ids for i in self._blobs.get(cid, ())})
        mine_calls = sorted({i for cid in ids for i in self._calls.get(cid, ())})
        nodes = [
            n
            for i in sorted({i for cid in ids for i in self._node_blobs.get(cid, ())})
            for n in marshal.loads(node_blobs[i][1:])
            if n[2] in ids
        ]
        rows: dict[int, list[tuple[Any, ...]]] = {}
        for batch, row in sorted({place for cid in ids for place in self._flat.get(cid, ())}):
            rows.setdefault(batch, []).append(flat[batch][1][row])
        fields: list[Any] = []
        for i in mine_calls:
            fields.extend(calls[i : i + CALL_WIDTH])
        return (
            [blobs[i] for i in mine_blobs],
            fields,
            nodes,
            [(flat[batch][0], tuple(held)) for batch, held in rows.items()],
        )

    def _extend(
        self,
        lists: tuple[Sequence[bytes], Sequence[Any], Sequence[bytes], Sequence[Rows]],
        lengths: tuple[int, int, int, int],
        decode: Callable[[bytes], Sequence[EventRecord]],
    ) -> None:
        """Index the items appended to ``lists`` since the last read, up to ``lengths``."""
        blobs, calls, node_blobs, flat = lists
        seen_blobs, seen_calls, seen_nodes, seen_flat = self._seen
        for i in range(seen_blobs, lengths[0]):
            for call_id in {r[3] for r in decode(blobs[i])}:
                _add(self._blobs, call_id, i)
        for i in range(seen_calls, lengths[1], CALL_WIDTH):  # a record's place: its first field's
            _add(self._calls, calls[i + 2], i)
        for i in range(seen_nodes, lengths[2]):
            for call_id in {n[2] for n in marshal.loads(node_blobs[i][1:])}:
                _add(self._node_blobs, call_id, i)
        for i in range(seen_flat, lengths[3]):
            for j, row in enumerate(flat[i][1]):
                _add(self._flat, row[2], (i, j))
        self._seen = lengths


def _add(index: dict[str | None, list[Any]], call_id: str | None, place: Hashable) -> None:
    """Note ``place`` under ``call_id`` (a model may give one id to many calls of a run)."""
    places = index.get(call_id)
    if places is None:
        index[call_id] = [place]
    else:
        places.append(place)
