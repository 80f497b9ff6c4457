"""A batch of plan-node records reaches the memory trace store read by columns when its nodes
share one shape, one by one otherwise; either way every event reads back as it was recorded."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace.trace.events import CallShape, CompactNode, expand_node
from actionspace.trace.memory import MemoryTraceStore

SHAPES = (
    CallShape({"allowed": True}, {"schema": "a"}, "quick", "1"),
    CallShape({"allowed": True}, {"schema": "b"}, "slow", "2"),
    CallShape({"allowed": True}, {"schema": "a"}, "quick", "1"),  # equal to the first, another object
)


def _node(i: int, shape: CallShape, folded: bool) -> CompactNode:
    seq = 10 * i
    if not folded:  # its observation recorded apart (-1: none folded in)
        return (seq, 1.0 + i, f"c{i}", shape, {"x": i}, f"n{i}", -1, 0.0, None)
    return (seq, 1.0 + i, f"c{i}", shape, {"x": i}, f"n{i}", seq + 6, 2.0 + i, f"h{i}")


@settings(max_examples=60, deadline=None)
@given(
    picks=st.lists(st.tuples(st.integers(0, 2), st.booleans()), min_size=1, max_size=40),
    cut=st.integers(1, 9),
)
def test_node_records_of_one_shape_or_several_read_back_whole(picks: list[Any], cut: int) -> None:
    store = MemoryTraceStore()
    nodes = [_node(i, SHAPES[s], folded) for i, (s, folded) in enumerate(picks)]
    for at in range(0, len(nodes), cut):
        store.append_nodes("r", nodes[at : at + cut], [])
    events = store.events("r")
    want: list[Any] = sorted((r for n in nodes for r in expand_node(n)), key=lambda r: r[0])
    assert [(e.seq, e.kind, e.ts, e.call_id, dict(e.data)) for e in events] == [
        (q, k, t, c, dict(d)) for q, k, t, c, d in want
    ]
    assert store.next_seq("r") == max(max(n[6] + 1 for n in nodes), max(n[0] + 4 for n in nodes))
