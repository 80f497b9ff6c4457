"""A call's trace events, collected as compact records and handed to the store together, once."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Protocol

from actionspace import _crash
from actionspace._crash import point
from actionspace.errors import ActionError
from actionspace.trace.events import (
    AppendsRecords,
    CompactCall,
    CompactNode,
    EventRecord,
    TraceEvent,
    TraceStore,
    expand_call,
    expand_node,
)

__all__ = ["AppendsCalls", "AppendsNodes", "RecordSink", "RecordedRun", "Recorder", "record_sink"]


class _Context(Protocol):
    @property
    def secret(self) -> bool: ...
    @property
    def confidentiality(self) -> str: ...
    @property
    def readers(self) -> Any: ...
    def to_dict(self) -> dict[str, Any]: ...


class _Flow(Protocol):
    @property
    def context(self) -> Any: ...
    @property
    def pending(self) -> Mapping[str, Any]: ...


class RecordedRun(Protocol):
    """What a recorder needs of a run: its id, its event counter and its context label."""

    @property
    def run_id(self) -> str: ...

    @property
    def seq(self) -> Iterator[int]: ...

    @property
    def flow(self) -> _Flow: ...


RecordSink = Callable[[str, Sequence[EventRecord]], None]
"""Where a Recorder's records go: a store's ``append_records``, or a converter to ``append_many``."""


class AppendsCalls(Protocol):
    """A store that keeps compact call records as they are and expands them when read."""

    def append_call(self, run_id: str, call: CompactCall, records: Sequence[EventRecord]) -> None:
        """Append one compact call record and the call's other ``records``, together."""
        ...


class AppendsNodes(Protocol):
    """A store that keeps compact plan-node records as they are and expands them when read."""

    def append_nodes(self, run_id: str, nodes: Sequence[CompactNode], records: Sequence[EventRecord]) -> None:
        """Append compact plan-node records and other ``records`` of the run, together."""
        ...


class Recorder:
    """Collects one call's events as compact records; the store gets them together, once."""

    __slots__ = ("call", "call_id", "nodes", "records", "run")

    def __init__(self, run: RecordedRun, call_id: str | None) -> None:
        self.run = run
        self.call_id = call_id
        self.records: list[EventRecord] = []
        self.call: CompactCall | None = None
        """The events of the simple call this recorder holds as one record (pipeline/fast.py)."""
        self.nodes: list[CompactNode] | None = None
        """The events of plain plan nodes, one record each (pipeline/fast_nodes.py)."""

    @property
    def run_id(self) -> str:
        return self.run.run_id

    def add(self, kind: str, data: Mapping[str, Any]) -> None:
        self.records.append((next(self.run.seq), kind, time.time(), self.call_id, data))

    def retry(self, attempt: int, error: ActionError, delay: float) -> None:
        """The executor's hook before each retry."""
        self.add("attempt", {"attempt": attempt, "category": error.category, "delay_s": round(delay, 4)})

    def add_call(self, call: CompactCall) -> None:
        """Hold a simple call's events as one record (replacing the one this call held before)."""
        held = self.call
        if held is not None and held[0] != call[0]:
            self.expand()  # another call's record: keep its events as they are
        self.call = call

    def expand(self) -> None:
        """Turn the compact records held into ordinary records, in event order."""
        call, nodes = self.call, self.nodes
        self.call = self.nodes = None
        if call is None and not nodes:
            return
        merged = expand_call(call) if call is not None else []
        for node in nodes or ():
            merged.extend(expand_node(node))
        if self.records or nodes:
            merged.extend(self.records)
            merged.sort(key=_seq)
        self.records = merged

    def flush(self, sink: RecordSink) -> None:
        call, nodes = self.call, self.nodes
        if call is not None or nodes:
            flow = self.run.flow
            label: _Context = flow.context
            if label.confidentiality == "secret" or label.readers is not None or (call is not None and nodes):
                self.expand()  # events to label one by one
            elif call is not None:
                append_call = getattr(getattr(sink, "__self__", None), "append_call", None)
                if append_call is None or flow.pending:
                    self.expand()  # a store without compact records, or events to label one by one
                else:
                    point("during_observation_write")
                    self.call = None
                    append_call(self.run.run_id, call, self.records)
                    self.records = []
                    return
            else:
                # A node is kept compact only when its own label marks nothing (fast_nodes.py);
                # the other records of the batch are labelled as below.
                append_nodes = getattr(getattr(sink, "__self__", None), "append_nodes", None)
                if append_nodes is None:
                    self.expand()  # a store without compact records
                else:
                    point("during_observation_write")
                    assert nodes is not None
                    self.nodes = None
                    records, self.records = self.records, []
                    append_nodes(self.run.run_id, nodes, self._labelled(records) if records else records)
                    return
        if self.records:
            if _crash._target is not None:
                point("during_observation_write")
            held, self.records = self.records, []
            try:
                sink(self.run.run_id, self._labelled(held))
            except BaseException:
                self.records = held  # nothing was written: the caller may renumber and retry
                raise

    def _labelled(self, records: list[EventRecord]) -> list[EventRecord]:
        """``records`` with the label viewers need to be cleared for, where one applies."""
        flow = self.run.flow
        context: _Context = flow.context
        if flow.pending:
            # Calls let through whose observations the model has not been shown yet (plan
            # nodes): their events carry their own output label now, not when it joins the run.
            return _all_marked(records, context, flow.pending)
        if context.confidentiality == "secret" or context.readers is not None:  # seen only if cleared
            mark = context.to_dict()
            return [(q, k, t, c, {**d, "label": mark}) for q, k, t, c, d in records]
        return records


def _seq(record: EventRecord) -> int:
    return record[0]


def _all_marked(records: list[EventRecord], context: Any, pending: Mapping[str, Any]) -> list[EventRecord]:
    """``records``, each marked by :func:`_marked`; the list itself when none needs a mark.

    While the run label restricts nothing (not secret, readable by anyone), joining a call's own
    label into it restricts exactly when that label does, so only those records are looked at.
    """
    if context.secret or context.readers is not None:
        return [_marked(r, context, pending) for r in records]
    out = records
    for i, record in enumerate(records):
        call_id = record[3]
        own = pending.get(call_id) if call_id is not None else None
        if own is not None and (own.confidentiality == "secret" or own.readers is not None):
            if out is records:
                out = list(records)
            out[i] = _marked(record, context, pending)
    return out


def _marked(record: EventRecord, context: Any, pending: Mapping[str, Any]) -> EventRecord:
    seq, kind, ts, call_id, data = record
    own = pending.get(call_id) if call_id is not None else None
    label = context if own is None else context.join(own)
    if label.secret or label.readers is not None:
        return (seq, kind, ts, call_id, {**data, "label": label.to_dict()})
    return record


def record_sink(store: TraceStore) -> RecordSink:
    """The cheapest way to hand records to ``store`` (decided once, not per call)."""
    if isinstance(store, AppendsRecords):
        return store.append_records

    def convert(run_id: str, records: Sequence[EventRecord]) -> None:
        store.append_many(
            [
                TraceEvent(run_id=run_id, seq=seq, kind=kind, ts=ts, call_id=call_id, data=data)
                for seq, kind, ts, call_id, data in records
            ]
        )

    return convert
