"""A plain plan node's events kept as one compact record (trace/events.py ``CompactNode``): a store
that keeps them gets one record per node, and every reader sees the events the stages record."""

from __future__ import annotations

import gc
import marshal
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from actionspace import Plan, Runtime
from actionspace.policy.labels import Label
from actionspace.trace.events import CallShape, CompactNode, EventRecord, expand_node
from actionspace.trace.memory import COMPACT_AT, MemoryTraceStore
from tests.plan.test_plain_equivalence import _runtime, plans

NODE_EVENTS = ["authorized", "validated", "proposed", "dispatched", "observation"]


def _events(rt: Runtime, run_id: str) -> list[tuple[int, str, str | None, Any]]:
    """(seq, kind, call id, data) of each event, without the plan's wall time (a clock)."""
    return [
        (e.seq, e.kind, e.call_id, {k: v for k, v in e.data.items() if k != "wall_s"})
        for e in rt.trace.events(run_id)
    ]


def _plain_sink(rt: Runtime) -> Runtime:
    """The trace takes plain records only, as a store without compact records does."""
    append = rt.engine.sink
    rt.engine.sink = lambda run_id, records: append(run_id, records)
    return rt


def test_a_plain_nodes_events_reach_the_memory_store_as_one_compact_record(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    nodes_in: list[CompactNode] = []
    records_in: list[EventRecord] = []
    keep_nodes, keep_records = MemoryTraceStore.append_nodes, MemoryTraceStore.append_records

    def nodes_spy(self: MemoryTraceStore, run_id: str, nodes: Sequence[CompactNode], records: Any) -> None:
        nodes_in.extend(nodes)
        records_in.extend(records)
        keep_nodes(self, run_id, nodes, records)

    def records_spy(self: MemoryTraceStore, run_id: str, records: Sequence[EventRecord]) -> None:
        records_in.extend(records)
        keep_records(self, run_id, records)

    monkeypatch.setattr(MemoryTraceStore, "append_nodes", nodes_spy)
    monkeypatch.setattr(MemoryTraceStore, "append_records", records_spy)
    rt = _runtime()
    run = rt.new_run()
    rt.run_plan({"nodes": [{"id": "warm", "tool": "quick", "arguments": {"x": 0}}]}, run_id=run)
    nodes_in.clear()
    records_in.clear()
    plan = {"nodes": [{"id": f"n{i}", "tool": "quick", "arguments": {"x": i}} for i in range(40)]}
    result = rt.run_plan(plan, run_id=run)
    assert [o.data for o in result.nodes.values()] == list(range(40))
    assert len(nodes_in) == 40
    assert {r[1] for r in records_in} == {"plan_started", "plan_finished"}
    by_call: dict[str | None, list[str]] = {}
    for _seq, kind, call_id, data in _events(rt, run):
        by_call.setdefault(call_id, []).append(kind)
        if kind == "proposed" and call_id == f"{run}:n7":
            assert data == {"tool": "quick", "version": "1", "arguments": {"x": 7}}
    assert all(by_call[f"{run}:n{i}"] == NODE_EVENTS for i in range(40))


FIXTURES_OK = [HealthCheck.function_scoped_fixture]


@settings(max_examples=40, deadline=None, suppress_health_check=FIXTURES_OK)
@given(plan=plans())
def test_a_plans_events_read_back_from_compact_records_are_the_events_a_plain_store_gets(
    plan: dict[str, Any],
) -> None:
    """Memory store (compact node records) against a sink of plain records, on a public run and
    on a run whose context is secret (every event is then marked, so none stays compact)."""
    for secret in (False, True):
        runs = []
        for rt in (_runtime(), _plain_sink(_runtime())):
            run = rt.new_run("run-equal")
            if secret:
                rt.engine.run(run).flow.add_user_input("the code", Label(confidentiality="secret"))
            result = rt.run_plan(Plan.from_dict(plan), run_id=run)
            events = _events(rt, run)
            assert [e[0] for e in events] == list(range(len(events)))  # numbered once each, in order
            per_call: dict[str | None, list[Any]] = {}  # nodes that wait end in either order
            for _, kind, call_id, data in events:
                per_call.setdefault(call_id, []).append((kind, data))
            runs.append(([o.to_dict()["data"] for o in result.nodes.values()], per_call))
        assert runs[0] == runs[1]
        if secret:
            marked = [data for calls in runs[0][1].values() for kind, data in calls if kind in NODE_EVENTS]
            assert marked and all("label" in data for data in marked)


SHAPE = CallShape({"allowed": True}, {"schema": "abc"}, "quick", "1")


def _node(i: int, arguments: dict[str, Any]) -> CompactNode:
    seq = 10 * i
    return (seq, 1.0 + i, f"c{i}", SHAPE, arguments, f"n{i}", seq + 6, 2.0 + i, f"h{i}")


def test_many_node_records_are_packed_and_still_read_back_whole_and_in_order() -> None:
    store = MemoryTraceStore()
    count = COMPACT_AT // 4 * 2 + 3  # two packed blobs and some held as tuples
    nodes = [_node(i, {"x": i, "xs": [i, "a"]}) for i in range(count)]
    for at in range(0, count, 7):
        store.append_nodes("r", nodes[at : at + 7], [(10 * at + 5, "plan_node_reused", 0.5, None, {"n": at})])
    events = store.events("r")
    want = sorted(
        [r for n in nodes for r in expand_node(n)]
        + [(10 * at + 5, "plan_node_reused", 0.5, None, {"n": at}) for at in range(0, count, 7)],
        key=lambda r: r[0],
    )
    assert [(e.seq, e.kind, e.ts, e.call_id, dict(e.data)) for e in events] == [
        (q, k, t, c, dict(d)) for q, k, t, c, d in want
    ]
    assert store.next_seq("r") == 10 * (count - 1) + 7


class Tag(str):
    """A str subclass: marshal does not encode it."""


def test_node_records_marshal_cannot_encode_are_kept_as_events() -> None:
    store = MemoryTraceStore()
    count = COMPACT_AT // 4
    with pytest.raises(ValueError):
        marshal.dumps(Tag("x"))
    store.append_nodes("r", [_node(i, {"tag": Tag(f"t{i}")}) for i in range(count)], [])
    events = store.events("r")
    assert len(events) == 5 * count
    proposed = [e for e in events if e.kind == "proposed"]
    assert [e.data["arguments"]["tag"] for e in proposed] == [f"t{i}" for i in range(count)]


def test_records_holding_long_lists_are_packed_as_soon_as_as_many_small_records_would_be() -> None:
    """A large plan's ``plan_started`` lists every node and edge: a few of them held as objects
    would keep thousands of lists for the collector to walk on every full collection."""
    store = MemoryTraceStore()
    edges = [[f"n{i}", f"n{i + 1}"] for i in range(1000)]

    def started(seq: int) -> EventRecord:
        return (seq, "plan_started", float(seq), None, {"edges": [list(e) for e in edges], "retry": False})

    store.append_records("run", [started(0)])
    gc.collect()
    before = len(gc.get_objects())
    for seq in range(1, 5):
        store.append_records("run", [started(seq)])
    gc.collect()
    # four records of 1,000 lists each arrived; at most the last two are still held as objects
    assert len(gc.get_objects()) - before < COMPACT_AT
    events = store.events("run")
    assert [e.seq for e in events] == [0, 1, 2, 3, 4]
    assert all(e.data["edges"] == edges for e in events)
