"""In-memory trace store: for tests and benchmarks; lost with the process.

Records arrive as compact tuples and are packed, every ``COMPACT_AT`` records, into one ``marshal``
blob; they become ``TraceEvent`` objects only when read. A blob is not a container the garbage
collector walks: keeping a million events as tuples and dicts would make every full collection
traverse all of them, which costs the hot path more than encoding them once, in bulk.

A simple call's events arrive as one compact call record (see
:data:`~actionspace.trace.events.CompactCall`) and are kept as that record, its shared payloads
replaced by a number: a tuple of strings and numbers, which the collector stops tracking the first
time it sees it, so it is never encoded at all. Reading expands it into the events it stands for.
A plain plan node's events arrive the same way (:data:`~actionspace.trace.events.CompactNode`);
its record holds the node's arguments: when they are plain values, it is kept as a row of plain
values, never encoded (trace/_node_rows.py); otherwise those records are packed with ``marshal``
too, every ``COMPACT_AT // 4`` of them. A record whose data came with its encoding made once
(:class:`~actionspace.trace._encoded.Encoded`: a plan object's ``plan_started``, run again) is
kept as that encoding, shared by every run that recorded it, and decoded when read.
"""

from __future__ import annotations

import json
import marshal
import pickle
import sys
import threading
from collections.abc import Collection, Sequence
from dataclasses import replace
from itertools import pairwise
from typing import Any, cast

from actionspace.trace._encoded import Encoded
from actionspace.trace._memory_index import CallIndex
from actionspace.trace._memory_records import CallLog, Snapshot, compact_calls, records_weight, unpacked_node
from actionspace.trace._node_rows import Rows, flat_rows, node_records, shape_indices
from actionspace.trace.events import (
    CLAIM_EXPIRY_S,
    CallShape,
    CompactCall,
    CompactNode,
    EventRecord,
    RunSummary,
    TraceEvent,
    claim_expiry,
    expand_call,
    expand_node,
    summarize,
)
from actionspace.trace.store_encoding import HEAD_KINDS, encode_data
from actionspace.types import SYSTEM_CLOCK, Clock

__all__ = ["MemoryTraceStore", "gil_enabled", "runs_limit"]

_MAX_LIMIT = 2**63 - 1
"""The largest row count SQLite's and PostgreSQL's ``LIMIT`` take; a larger limit lists every run."""


def runs_limit(limit: object) -> int:
    """``limit`` of ``runs()`` as every store takes it: at most 2**63 - 1 (a larger one lists every run).

    Raises ``ValueError`` when it is not a positive int (a bool, a float, zero or less), before a
    store reads anything, so that every store refuses it alike.
    """
    if type(limit) is not int or limit < 1:
        raise ValueError(f"limit must be a positive int, got {limit!r}"[:200])
    return min(limit, _MAX_LIMIT)


COMPACT_AT = 2048
"""Pending records of a run are packed into one blob once they weigh this much: one per record,
plus the length of every list in their data, so that a few records holding thousands of objects
(a large plan's ``plan_started``) are packed as soon as many small ones would be."""


def gil_enabled() -> bool:
    """True unless this is a free-threaded build running without the GIL (``sys._is_gil_enabled``,
    Python 3.13+, returns False); a build without the probe always has the GIL."""
    probe = getattr(sys, "_is_gil_enabled", None)
    return True if probe is None else bool(probe())


class MemoryTraceStore:
    """Keeps events per run; thread-safe appends.

    ``claim_expiry_s`` (seconds, default :data:`~actionspace.trace.events.CLAIM_EXPIRY_S`): how long
    a run claim no event followed keeps the id taken; ``clock``: where claims read the time.
    """

    def __init__(self, *, claim_expiry_s: float = CLAIM_EXPIRY_S, clock: Clock = SYSTEM_CLOCK) -> None:
        self._claim_expiry_s = claim_expiry(claim_expiry_s)
        self._clock = clock
        self._claims: dict[str, float] = {}
        """Run id → when it was claimed, for runs claimed before they had events."""
        self._runs: dict[str, list[bytes]] = {}
        self._pending: dict[str, list[EventRecord]] = {}
        self._weights: dict[str, int] = {}
        """Per run, the weight (see ``records_weight``) of its pending records."""
        self._next: dict[str, int] = {}
        self._calls: dict[str, CallLog] = {}
        """Compact call records per run, their shapes as their index in _shapes, laid flat (CallLog)."""
        self._shapes: list[CallShape] = []
        self._nodes: dict[str, list[tuple[Any, ...]]] = {}
        """Compact plan-node records per run, as tuples, each shape replaced by its index."""
        self._node_blobs: dict[str, list[bytes]] = {}
        """The same, packed by ``marshal`` every ``COMPACT_AT // 4`` of them."""
        self._flat: dict[str, list[Rows]] = {}
        """Per run, batches of plan-node records kept as flat rows (trace/_node_rows.py), never packed."""
        self._encoded: dict[str, list[tuple[int, str, float, str | None, bytes]]] = {}
        """Records whose data came encoded (:class:`~actionspace.trace._encoded.Encoded`), per run,
        each with the encoding it came with: one bytes object shared by every run that recorded it."""
        self._shape_index: dict[int, int] = {}
        """``id`` of a shape → its index (every shape indexed stays alive in ``_shapes``)."""
        self._tenants: dict[str, str | None] = {}
        """Run id → its tenant, once its ``run_started`` is its first event (nothing comes before)."""
        self._by_tenant: dict[str | None, dict[str, None]] = {}
        """Tenant → the runs of ``_tenants`` with it, kept as runs start (see ``_started``)."""
        self._heads: dict[str, list[bytes]] = {}
        """Per run, the head records (``HEAD_KINDS``) of its packed blobs, packed apart as they are."""
        self._indices: dict[str, CallIndex] = {}
        """Per run read by :meth:`call_events`, where its calls are (trace/_memory_index.py)."""
        self._reading = threading.Lock()
        self._lock = threading.Lock()
        self._unlocked_next: dict[str, int] = self._next if gil_enabled() else {}
        """What :meth:`call_log` hands out as the runs' next numbers (see there): the store's own
        where the GIL is on; on a free-threaded build a dict no run is ever in, chosen once here."""

    flat_nodes = True
    """Plan-node records whose arguments are all plain values are kept as flat rows
    (trace/_node_rows.py); False packs every record with ``marshal`` (the tests compare both)."""

    def append_call(self, run_id: str, call: CompactCall, records: Sequence[EventRecord]) -> None:
        """Append one simple call's compact record and its other ``records``, together."""
        # The fields read by position: this runs once per simple call (its 11-tuple unpacked and
        # built again cost more than the rest of the append).
        obs_seq = call[8]
        top = (call[0] + (4 if call[4] is None else 5)) if obs_seq < 0 else obs_seq + 1
        if records and records[-1][0] >= top:
            top = records[-1][0] + 1
        shape = call[3]
        with self._lock:
            index = self._shape_index.get(id(shape))
            if index is None:
                index = self._shape_index[id(shape)] = len(self._shapes)
                self._shapes.append(shape)
            kept = (*call[:3], index, *call[4:])
            calls = self._calls.get(run_id)
            if calls is None:
                calls = self._calls[run_id] = CallLog()
                self._runs.setdefault(run_id, [])
            calls.append(kept)
            if records:
                self._add(run_id, records)
            if run_id not in self._next or top > self._next[run_id]:  # no call between: see call_log
                self._next[run_id] = top

    def shape_index(self, shape: CallShape) -> int:
        """The number ``shape`` is kept as in a call's record (:meth:`append_kept`); it stays alive."""
        with self._lock:
            index = self._shape_index.get(id(shape))
            if index is None:
                index = self._shape_index[id(shape)] = len(self._shapes)
                self._shapes.append(shape)
            return index

    def append_kept(self, run_id: str, kept: tuple[Any, ...]) -> None:
        """:meth:`append_call` of a call's record alone, as it is kept: its shape given as its
        :meth:`shape_index` and its observation folded in (the precompiled path's commonest call,
        pipeline/_direct.py, which caches the index: no second tuple is built per call). That path
        appends through :meth:`call_log` once it holds the run's list: change both together."""
        top = kept[8] + 1
        with self._lock:
            calls = self._calls.get(run_id)
            if calls is None:
                calls = self._calls[run_id] = CallLog()
                self._runs.setdefault(run_id, [])
            calls.append(kept)
            if run_id not in self._next or top > self._next[run_id]:  # no call between: see call_log
                self._next[run_id] = top

    def call_log(self, run_id: str) -> tuple[CallLog, threading.Lock, dict[str, int]]:
        """Where :meth:`append_kept` puts a run's records: (its log of kept calls, the store's lock,
        the next number of each run). Holding the lock, a caller may append a kept record and raise
        the run's next number past its observation's as :meth:`append_kept` does, without a call of
        its own (pipeline/_direct.py, once per run and tool). The log is the run's for the store's
        life, made here when the run has none yet, never replaced. Once the run has a next number,
        pipeline/_direct.py raises it and then appends without the lock: a number is never removed
        and only ever raised, every list change here is one C call, and readers copy the list in one
        (``_snapshot``); the writers here, too, read and raise a number with no call between (a call's
        return is where 3.11 may switch threads), so the unlocked raise and theirs cannot undo each
        other: keep these so when changing this store.

        All of that holds only while the GIL is on. On a free-threaded build (``sys._is_gil_enabled()``
        False, read once when the store is made) the numbers handed out are a dict no run is ever in,
        so the caller finds no next number and appends every record through :meth:`append_kept`,
        under the lock; a build with the GIL pays nothing for the choice."""
        with self._lock:
            calls = self._calls.get(run_id)
            if calls is None:
                calls = self._calls[run_id] = CallLog()
                self._runs.setdefault(run_id, [])
            return calls, self._lock, self._unlocked_next

    def append_nodes(self, run_id: str, nodes: Sequence[CompactNode], records: Sequence[EventRecord]) -> None:
        """Append compact plan-node records and other ``records`` of the run, together."""
        top = records[-1][0] + 1 if records else 0
        with self._lock:
            kept = self._nodes.get(run_id)
            if kept is None:
                kept = self._nodes[run_id] = []
                self._runs.setdefault(run_id, [])
            if nodes:  # read by columns (in C): the usual batch is one tool's nodes, of one shape
                columns = tuple(zip(*nodes, strict=True))
                indices = shape_indices(columns[3], self._shape_index, self._shapes)
                rows = flat_rows(columns, indices) if self.flat_nodes else None
                if rows is not None:  # kept as they are (trace/_node_rows.py)
                    self._flat.setdefault(run_id, []).append(rows)
                else:  # each shape replaced by its index
                    kept.extend(zip(*columns[:3], indices, *columns[4:], strict=True))
                # a node's last event: its observation (numbered after the four), else seq + 3
                top = max(top, max(columns[6]) + 1, max(columns[0]) + 4)
            if len(kept) >= COMPACT_AT // 4:
                self._pack_nodes(run_id, kept)
            if records:
                self._add(run_id, records)
            if run_id not in self._next or top > self._next[run_id]:  # no call between: see call_log
                self._next[run_id] = top

    def _pack_nodes(self, run_id: str, kept: list[tuple[Any, ...]]) -> None:
        """Node records held as tuples (their arguments are dicts the collector walks) into a blob."""
        try:
            blob = b"m" + marshal.dumps(tuple(kept))
        except ValueError:  # an argument value marshal does not know: keep them as events
            shapes = self._shapes
            self._add(run_id, [r for n in kept for r in expand_node(unpacked_node(n, shapes))])
        else:
            self._node_blobs.setdefault(run_id, []).append(blob)
        kept.clear()

    def append_records(self, run_id: str, records: Sequence[EventRecord]) -> None:
        """Append ``(seq, kind, ts, call_id, data)`` records of one run, in ``seq`` order."""
        if not records:
            return
        top = records[-1][0] + 1
        with self._lock:
            if type(records[0][4]) is Encoded and len(records) == 1:  # kept as its encoding alone
                seq, kind, ts, call_id, data = records[0]
                blob = cast(Encoded, data).blob
                self._encoded.setdefault(run_id, []).append((seq, kind, ts, call_id, blob))
                if kind in HEAD_KINDS:
                    self._heads.setdefault(run_id, []).append(
                        _encode([(seq, kind, ts, call_id, marshal.loads(blob))])
                    )
                self._runs.setdefault(run_id, [])
            else:
                self._add(run_id, records)
            if run_id not in self._next or top > self._next[run_id]:  # no call between: see call_log
                self._next[run_id] = top

    def _add(self, run_id: str, records: Sequence[EventRecord]) -> None:
        pending = self._pending.get(run_id)
        if pending is None:
            if records and run_id not in self._runs and records[0][0] == 0 and records[0][1] == "run_started":
                self._started(run_id, records[0][4])
            pending = self._pending[run_id] = []
            self._runs.setdefault(run_id, [])
        pending.extend(records)
        weight = self._weights.get(run_id, 0) + records_weight(records)
        if weight >= COMPACT_AT:
            heads = [r for r in pending if r[1] in HEAD_KINDS]  # read apart: see heads()
            if heads:
                self._heads.setdefault(run_id, []).append(_encode(heads))
            self._runs[run_id].append(_encode(pending))
            pending.clear()
            weight = 0
        self._weights[run_id] = weight

    def append_many(self, events: Sequence[TraceEvent]) -> None:
        """Append every event, or none of them: raises ``ValueError`` when an event repeats a
        ``(run_id, seq)`` stored or earlier in the batch, as the other stores do."""
        by_run: dict[str, list[EventRecord]] = {}
        for e in events:
            by_run.setdefault(e.run_id, []).append((e.seq, e.kind, e.ts, e.call_id, e.data))
        for records in by_run.values():
            records.sort(key=lambda r: r[0])
        with self._lock:
            for run_id, records in by_run.items():
                self._refuse_repeats(run_id, records)
            for run_id, records in by_run.items():
                self._add(run_id, records)
                top = records[-1][0] + 1
                if run_id not in self._next or top > self._next[run_id]:  # no call between: see call_log
                    self._next[run_id] = top

    def _refuse_repeats(self, run_id: str, records: Sequence[EventRecord]) -> None:
        """Raise ``ValueError`` when ``records`` (sorted) repeat a seq; the stored seqs are read
        only when a record is numbered below the run's next one (an append in order costs nothing)."""
        seqs = [r[0] for r in records]
        repeated = next((a for a, b in pairwise(seqs) if a == b), None)
        if repeated is None and seqs[0] < self._next.get(run_id, 0):
            stored = {r[0] for r in _expanded(self._snapshot(run_id))}
            repeated = next((q for q in seqs if q in stored), None)
        if repeated is not None:
            raise ValueError(
                f"an event repeats a (run_id, seq) already stored ({run_id!r}, {repeated});"
                " nothing of the batch was written"
            )

    def events(self, run_id: str) -> list[TraceEvent]:
        with self._lock:
            snapshot = self._snapshot(run_id)
        records = _expanded(snapshot)
        return [
            TraceEvent(run_id=run_id, seq=seq, kind=kind, ts=ts, call_id=call_id, data=data)
            for seq, kind, ts, call_id, data in records
        ]

    def _snapshot(self, run_id: str) -> Snapshot:
        """What the run holds, copied; the caller holds the lock (decode it with ``_expanded``)."""
        nodes = [n for blob in self._node_blobs.get(run_id, ()) for n in marshal.loads(blob[1:])]
        nodes.extend(self._nodes.get(run_id, ()))
        flat = list(self._flat.get(run_id, ()))
        pending = list(self._pending.get(run_id, ()))
        pending.extend((q, k, t, c, marshal.loads(b)) for q, k, t, c, b in self._encoded.get(run_id, ()))
        return (
            list(self._runs.get(run_id, ())),
            pending,
            list(self._calls.get(run_id, ())),
            nodes,
            flat,
            self._shapes,
        )

    def runs(self, *, limit: int = 50, since: float | None = None) -> list[RunSummary]:
        """Like the other stores: a run spans its earliest to its latest ``ts`` (not its first and
        last by ``seq``: clocks of its writers may step back), the latest first, ties by run id.
        Raises ``ValueError`` for a ``limit`` that is not a positive int (see :func:`runs_limit`)."""
        limit = runs_limit(limit)
        return self._listing(since)[:limit]

    def runs_after(
        self, after: tuple[float, str], *, limit: int = 50, since: float | None = None
    ) -> list[RunSummary]:
        """As :meth:`runs`, after the row ``(last_at, run_id)`` (see ``PagesRuns``)."""
        limit = runs_limit(limit)
        key = (-after[0], after[1])
        return [s for s in self._listing(since) if (-s.last_at, s.run_id) > key][:limit]

    def tenant_runs(
        self, tenant: str | None, *, limit: int = 50, after: tuple[float, str] | None = None
    ) -> list[RunSummary]:
        """As :meth:`runs` (:meth:`runs_after` with ``after``), of ``tenant``'s runs only (see
        ``ListsTenantRuns``): only those runs are summarized, found in the tenant index kept as
        runs start (a run whose first event is not its ``run_started`` is read at each listing)."""
        limit = runs_limit(limit)
        listed = self._listing(None, (tenant,))
        if after is not None:
            key = (-after[0], after[1])
            listed = [s for s in listed if (-s.last_at, s.run_id) > key]
        return listed[:limit]

    def run_tenant(self, run_id: str) -> str | None:
        """The tenant of the run's first ``run_started`` (None without one): what the memory
        ledger and approval stores list a run's rows under (``MemoryLedgerStore.run_tenant``)."""
        with self._lock:
            if run_id in self._tenants:
                return self._tenants[run_id]
        return self._tenant(run_id)

    def _started(self, run_id: str, data: Any) -> None:
        """Index a run whose first event, ``seq`` 0, is its ``run_started`` (holding the lock)."""
        found = data.get("tenant") if isinstance(data, dict) else None
        tenant = None if found is None else str(found)
        self._tenants[run_id] = tenant
        self._by_tenant.setdefault(tenant, {})[run_id] = None

    def _tenant_ids(self, tenant: str | None) -> list[str]:
        """The runs of ``tenant``: those indexed, and those not (read from their events)."""
        with self._lock:
            ids = list(self._by_tenant.get(tenant, ()))
            unsettled = [rid for rid in self._runs if rid not in self._tenants]
        return ids + [rid for rid in unsettled if self._tenant(rid) == tenant]

    def _tenant(self, run_id: str) -> str | None:
        """The tenant of the run's first ``run_started`` (None without one), as ``scoping`` reads it."""
        if run_id in self._tenants:
            return self._tenants[run_id]
        events = self.events(run_id)
        started = next((e for e in events if e.kind == "run_started"), None)
        found = started.data.get("tenant") if started is not None else None
        tenant = None if found is None else str(found)
        if started is not None and started is events[0] and started.seq == 0:
            with self._lock:  # no event can come before it any more
                if run_id not in self._tenants:
                    self._started(run_id, started.data)
        return tenant

    def _listing(self, since: float | None, tenant: tuple[str | None] | None = None) -> list[RunSummary]:
        if tenant is not None:
            ids = self._tenant_ids(tenant[0])
        else:
            with self._lock:
                ids = list(self._runs)
        out = []
        for rid in ids:
            events = self.events(rid)
            found = summarize(rid, events)
            if found is not None:
                stamps = [e.ts for e in events]
                out.append(replace(found, started_at=min(stamps), last_at=max(stamps)))
        if since is not None:
            out = [s for s in out if s.last_at >= since]
        out.sort(key=lambda s: (-s.last_at, s.run_id))
        return out

    def heads(self, run_id: str) -> list[TraceEvent]:
        """The run's ``run_started`` and ``run_finished`` events, in order: those packed are read
        from their own blobs, and only the records not packed yet are looked through."""
        with self._lock:
            packed = list(self._heads.get(run_id, ()))
            pending = [r for r in self._pending.get(run_id, ()) if r[1] in HEAD_KINDS]
        found = sorted([*(r for blob in packed for r in _decode(blob)), *pending], key=lambda r: r[0])
        return [TraceEvent(run_id=run_id, seq=q, kind=k, ts=t, call_id=c, data=d) for q, k, t, c, d in found]

    def call_events(self, run_id: str, call_ids: Collection[str], kinds: Collection[str]) -> list[TraceEvent]:
        """``events`` of ``call_ids`` and ``kinds`` (``_call_events.ReadsCallEvents``): only the places
        the run's index gives for those ids are read (trace/_memory_index.py), no others made."""
        ids = set(call_ids)
        with self._reading:  # one read extends a run's index at a time
            with self._lock:  # each list is only ever appended to: its first items stay put
                lists = (
                    self._runs.get(run_id, []),
                    self._calls.get(run_id) or CallLog(),
                    self._node_blobs.get(run_id, []),
                    self._flat.get(run_id, []),
                )
                lengths = (len(lists[0]), len(lists[1]), len(lists[2]), len(lists[3]))
                pending = [r for r in self._pending.get(run_id, ()) if r[3] in ids]
                encoded = [r for r in self._encoded.get(run_id, ()) if r[3] in ids]
                nodes = [n for n in self._nodes.get(run_id, ()) if n[2] in ids]
                shapes = self._shapes
            index = self._indices.get(run_id) or self._indices.setdefault(run_id, CallIndex())
            blobs, calls, packed_nodes, flat = index.find(ids, lists, lengths, _decode)
        pending.extend((q, k, t, c, marshal.loads(b)) for q, k, t, c, b in encoded)
        mine = (blobs, pending, calls, [*packed_nodes, *nodes], flat, shapes)
        kept = [r for r in _expanded(mine) if r[3] in ids and r[1] in kinds]
        return [TraceEvent(run_id=run_id, seq=q, kind=k, ts=t, call_id=c, data=d) for q, k, t, c, d in kept]

    def next_seq(self, run_id: str) -> int:
        with self._lock:
            return self._next.get(run_id, 0)

    def claim_run(self, run_id: str) -> bool:
        """True when ``run_id`` had no event and no live claim, and is claimed now (see ``ClaimsRuns``)."""
        with self._lock:
            if run_id in self._runs:  # every append of a run enters it here
                self._claims.pop(run_id, None)
                return False
            now = self._clock.time()
            claimed = self._claims.get(run_id)
            if claimed is not None and now - claimed < self._claim_expiry_s:
                return False
            self._claims[run_id] = now
            return True

    def run_ids(self, prefix: str = "", *, limit: int | None = None) -> list[str]:
        """Run ids starting with ``prefix``, sorted; at most ``limit`` of them (None: all)."""
        with self._lock:
            found = sorted(rid for rid in self._runs if rid.startswith(prefix))
        return found if limit is None else found[:limit]

    def close(self) -> None:
        pass


def _expanded(snapshot: Snapshot) -> list[EventRecord]:
    """A run's records in ``seq`` order, from what :meth:`MemoryTraceStore._snapshot` copied."""
    blobs, pending, calls, nodes, flat, shapes = snapshot
    packed = (r for blob in blobs for r in _decode(blob))
    expanded = (r for c in compact_calls(calls, shapes) for r in expand_call(c))
    plan_nodes = (r for n in nodes for r in expand_node(unpacked_node(n, shapes)))
    flat_nodes = (r for n in node_records(flat, shapes) for r in expand_node(n))
    return sorted([*packed, *pending, *expanded, *plan_nodes, *flat_nodes], key=lambda r: r[0])


def _encode(records: Sequence[EventRecord]) -> bytes:
    try:
        return b"m" + marshal.dumps(cast(Any, tuple(records)))
    except ValueError:  # a payload value marshal does not know (it is still picklable)
        pass
    try:
        return b"p" + pickle.dumps(tuple(records), protocol=pickle.HIGHEST_PROTOCOL)
    except (RecursionError, pickle.PicklingError, TypeError, AttributeError):
        # nested too deep or not picklable: keep what the safe encoder keeps, never drop the batch
        safe = tuple((q, k, t, c, json.loads(encode_data(d))) for q, k, t, c, d in records)
        return b"m" + marshal.dumps(cast(Any, safe))


def _decode(blob: bytes) -> tuple[EventRecord, ...]:
    data = marshal.loads(blob[1:]) if blob[:1] == b"m" else pickle.loads(blob[1:])
    return tuple(data)
