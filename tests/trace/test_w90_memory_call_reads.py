"""The memory trace store reads a run's heads and a few calls' events without the rest of the run:
the records it decodes and expands are counted, and what it reads is what ``events`` holds."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace.trace import memory
from actionspace.trace._encoded import encoded
from actionspace.trace.events import (
    CallShape,
    CompactCall,
    CompactNode,
    EventRecord,
    TraceEvent,
    expand_call,
    expand_node,
)
from actionspace.trace.memory import COMPACT_AT, MemoryTraceStore
from actionspace.trace.store_encoding import HEAD_KINDS

SHAPE = CallShape({"allowed": True}, {"verdict": "accepted"}, "lookup", "1")
KINDS = ("proposed", "dispatched", "observation")


@contextmanager
def _visits(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Count the records the store decodes from its blobs and the compact records it expands."""
    seen = [0]
    decode = memory._decode

    def decoding(blob: bytes) -> tuple[EventRecord, ...]:
        found = decode(blob)
        seen[0] += len(found)
        return found

    def expanding_call(record: CompactCall) -> list[EventRecord]:
        seen[0] += 1
        return expand_call(record)

    def expanding_node(record: CompactNode) -> list[EventRecord]:
        seen[0] += 1
        return expand_node(record)

    with monkeypatch.context() as patch:
        patch.setattr(memory, "_decode", decoding)
        patch.setattr(memory, "expand_call", expanding_call)
        patch.setattr(memory, "expand_node", expanding_node)
        yield seen


def _call_records(seq: int, call_id: str) -> list[EventRecord]:
    return [
        (seq, "proposed", 1.0, call_id, {"tool": "lookup", "arguments": {"q": call_id}}),
        (seq + 1, "dispatched", 1.0, call_id, {"tool": "lookup", "attempt": 1}),
        (seq + 2, "observation", 1.0, call_id, {"tool": "lookup", "status": "ok"}),
    ]


def _long_run(store: MemoryTraceStore, calls: int, *, finished: bool = True) -> int:
    """A run of ``calls`` calls recorded event by event and as many simple calls; its next seq."""
    store.append_records("r", [(0, "run_started", 1.0, None, {"tenant": "t"})])
    seq = 1
    for n in range(calls):
        store.append_records("r", _call_records(seq, f"c{n}"))
        store.append_call(
            "r", (seq + 3, 1.0, f"s{n}", SHAPE, None, "lookup", f"s{n}", "n", seq + 7, 1.0, "h"), []
        )
        seq += 8
    if finished:
        store.append_records("r", [(seq, "run_finished", 2.0, None, {"status": "ok"})])
        seq += 1
    return seq


def test_a_runs_heads_are_read_without_its_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    store = MemoryTraceStore()
    _long_run(store, 4_000)
    want = [e for e in store.events("r") if e.kind in HEAD_KINDS]
    with _visits(monkeypatch) as seen:
        got = store.heads("r")
    assert got == want and [e.kind for e in got] == ["run_started", "run_finished"]
    assert seen[0] <= len(got), seen[0]  # (the whole run: 12,002 records decoded, 4,000 calls expanded)


def test_a_calls_events_are_read_from_the_blobs_holding_them(monkeypatch: pytest.MonkeyPatch) -> None:
    store = MemoryTraceStore()
    _long_run(store, 4_000)  # about six blobs of the calls recorded event by event
    store.call_events("r", ["c0"], KINDS)  # the first read of the run indexes it
    events = store.events("r")
    for asked in (["c10"], ["s10", "c3999"], ["c2000", "s2000", "nobody"]):
        want = [e for e in events if e.call_id in asked and e.kind in {*KINDS, "authorized"}]
        with _visits(monkeypatch) as seen:
            got = store.call_events("r", asked, {*KINDS, "authorized"})
        assert got == want and got
        # one blob for each call recorded event by event, the simple calls asked for alone
        assert seen[0] <= 2 * COMPACT_AT + len(asked), (asked, seen[0])


def test_reading_a_growing_runs_latest_call_each_time_costs_what_is_appended(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store = MemoryTraceStore()
    seq, reads = _long_run(store, 10, finished=False), 0
    with _visits(monkeypatch) as seen:
        for n in range(10, 4_010):
            store.append_records("r", _call_records(seq, f"c{n}"))
            seq += 3
            if n % 100 == 0:
                assert [e.seq for e in store.call_events("r", [f"c{n - 50}"], KINDS)] == [
                    seq - 153,
                    seq - 152,
                    seq - 151,
                ]
                reads += 1
    # every record indexed once, and each read one blob at most (reading the whole run: ~18 times more)
    assert seen[0] <= 3 * 4_010 + reads * COMPACT_AT, seen[0]


_IDS = ("a", "b", "c", None)


@st.composite
def _operations(draw: st.DrawFn) -> list[tuple[str, Any]]:
    ops: list[tuple[str, Any]] = []
    for _ in range(draw(st.integers(min_value=1, max_value=25))):
        op = draw(st.sampled_from(("records", "records", "call", "nodes", "encoded", "many", "read")))
        if op == "read":
            ids = draw(st.lists(st.sampled_from(("a", "b", "c", "d")), max_size=3))
            kinds = draw(st.lists(st.sampled_from((*KINDS, "authorized", "run_started")), max_size=4))
            ops.append((op, (ids, kinds)))
        else:
            ops.append((op, (draw(st.sampled_from(_IDS)), draw(st.booleans()), draw(st.booleans()))))
    return ops


def _apply(store: MemoryTraceStore, seq: int, op: str, call_id: str | None, big: bool, head: bool) -> int:
    """Append what ``op`` names from ``seq`` on; the next free seq."""
    cid = call_id or "a"
    data: dict[str, Any] = {"tool": "lookup", "items": list(range(COMPACT_AT if big else 2))}
    if op == "records":
        records: list[EventRecord] = [
            (seq, "proposed", 1.0, call_id, data),
            (seq + 1, "dispatched", 1.0, call_id, {}),
        ]
        if head:
            records.append((seq + 2, "run_finished", 3.0, None, {"status": "ok"}))
        store.append_records("r", records)
    elif op == "call":
        store.append_call("r", (seq, 1.0, cid, SHAPE, None, "lookup", cid, "n", seq + 4, 1.0, "h"), [])
    elif op == "nodes":  # many: packed (arguments not plain) or kept as rows, past COMPACT_AT // 4
        arguments: dict[str, Any] = {"q": [1, 2]} if head else {"q": 1}
        count = COMPACT_AT // 4 + 1 if big else 1
        nodes: list[CompactNode] = [
            (seq + 5 * i, 1.0, _IDS[i % 3] or cid, SHAPE, arguments, "n", seq + 5 * i + 4, 1.0, "h")
            for i in range(count)
        ]
        store.append_nodes("r", nodes, [])
        return seq + 5 * count + 10
    elif op == "encoded":
        kind = "run_started" if head else "proposed"
        data = encoded({"tool": "lookup"}) or {}
        store.append_records("r", [(seq, kind, 1.0, call_id, data)])
    else:  # a seq left free, filled after a later one: out of order
        store.append_records("r", [(seq + 1, "observation", 1.0, call_id, data)])
        store.append_many(
            [TraceEvent(run_id="r", seq=seq, kind="proposed", ts=0.5, call_id=call_id, data={})]
        )
    return seq + 10


def _check(store: MemoryTraceStore, ids: Sequence[str], kinds: Sequence[str]) -> None:
    events = store.events("r")
    assert store.call_events("r", ids, kinds) == [e for e in events if e.call_id in ids and e.kind in kinds]
    assert store.heads("r") == [e for e in events if e.kind in HEAD_KINDS]


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=_operations(), flat=st.booleans())
def test_reads_of_calls_and_heads_are_what_the_runs_events_hold(
    ops: list[tuple[str, Any]], flat: bool
) -> None:
    store = MemoryTraceStore()
    store.flat_nodes = flat
    seq = 0
    for op, args in ops:
        if op == "read":
            _check(store, *args)
        else:
            seq = _apply(store, seq, op, *args)
    _check(store, ["a", "b", "c"], (*KINDS, "authorized", "validated", "run_started", "run_finished"))
