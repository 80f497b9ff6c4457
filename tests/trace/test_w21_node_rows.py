"""Plan-node records the memory trace store keeps as rows of plain values (trace/_node_rows.py):
read back, they are the events the records stand for, kept so or packed, in any batches; rows are
no objects the collector keeps walking; what a reader changes of what it read changes nothing."""

from __future__ import annotations

import gc
import math
from itertools import pairwise
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace.trace._node_rows import flat_rows, shape_indices
from actionspace.trace.events import CallShape, CompactNode, expand_node
from actionspace.trace.memory import COMPACT_AT, MemoryTraceStore

SHAPES = (
    CallShape({"allowed": True}, {"schema": "a"}, "quick", "1"),
    CallShape({"allowed": True}, {"schema": "b"}, "slow", "2"),
)


class Tag(str):
    """A str subclass: not a plain value (the record is packed, or kept as events)."""


PLAIN = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.just(-0.0),
    st.text(max_size=8),
)
VALUE = st.one_of(
    PLAIN,
    PLAIN,
    PLAIN,
    st.lists(PLAIN, max_size=2),
    st.dictionaries(st.text(max_size=3), PLAIN, max_size=2),
    st.builds(Tag, st.text(max_size=3)),
)
ARGUMENTS = st.dictionaries(st.text(max_size=4), VALUE, max_size=4)


@st.composite
def batches(draw: Any) -> list[list[CompactNode]]:
    """Records numbered in a row (some without their observation), cut into batches."""
    count = draw(st.integers(min_value=1, max_value=60))
    records: list[CompactNode] = []
    seq = draw(st.integers(min_value=0, max_value=5))
    for i in range(count):
        shape = SHAPES[draw(st.integers(min_value=0, max_value=1))]
        arguments = draw(ARGUMENTS)
        observed = draw(st.booleans())
        obs_seq = seq + 4 if observed else -1
        digest = f"h{i}" if observed else None
        records.append((seq, 1.5 + i, f"r:c{i}", shape, arguments, f"n{i}", obs_seq, 2.5 + i, digest))
        seq += 5 if observed else 4
    cuts = sorted(draw(st.lists(st.integers(min_value=0, max_value=count), max_size=5)))
    bounds = [0, *cuts, count]
    return [records[a:b] for a, b in pairwise(bounds) if b > a]


def _exact(value: Any) -> Any:
    """``value`` compared by type and value (``True`` is not ``1``, ``-0.0`` is not ``0.0``, NaN is NaN)."""
    if isinstance(value, dict):
        return ("dict", [(_exact(k), _exact(v)) for k, v in value.items()])
    if isinstance(value, list | tuple):
        return (type(value).__name__, [_exact(v) for v in value])
    if isinstance(value, float):
        return ("float", "nan" if math.isnan(value) else float.hex(value))
    return (type(value).__name__, value)


def _read(store: MemoryTraceStore, run_id: str) -> list[Any]:
    return [(e.seq, e.kind, e.ts, e.call_id, _exact(dict(e.data))) for e in store.events(run_id)]


@settings(max_examples=200, deadline=None)
@given(cut=batches())
def test_records_read_back_are_the_events_they_stand_for_kept_as_rows_or_packed(
    cut: list[list[CompactNode]],
) -> None:
    want = sorted((r for batch in cut for n in batch for r in expand_node(n)), key=lambda r: r[0])
    expected = [(q, k, t, c, _exact(dict(d))) for q, k, t, c, d in want]
    stores = []
    for flat in (True, False):
        store = MemoryTraceStore()
        store.flat_nodes = flat
        for batch in cut:
            store.append_nodes("r", batch, [])
        assert _read(store, "r") == expected
        assert store.next_seq("r") == want[-1][0] + 1
        stores.append(store)
    assert stores[1]._flat == {}  # (switched off: every record taken the packed way)


def _plain_batch(count: int, start: int = 0) -> list[CompactNode]:
    return [
        (
            5 * i,
            1.0 + i,
            f"r:c{i}",
            SHAPES[0],
            {"x": i, "s": f"v{i}", "b": i % 2 == 0, "f": i / 3},
            f"n{i}",
            5 * i + 4,
            2.0 + i,
            "h",
        )
        for i in range(start, start + count)
    ]


def test_a_batch_of_plain_arguments_is_kept_as_rows_the_collector_stops_tracking() -> None:
    store = MemoryTraceStore()
    count = COMPACT_AT  # more than a packed blob's worth: none of it is packed
    for at in range(0, count, 300):
        store.append_nodes("r", _plain_batch(min(300, count - at), at), [])
    gc.collect()
    assert store._node_blobs == {} and store._nodes["r"] == []
    rows = [row for _, batch in store._flat["r"] for row in batch]
    assert len(rows) == count
    assert not any(map(gc.is_tracked, rows))
    assert not any(gc.is_tracked(a) for args, _ in store._flat["r"] for a in args)
    events = store.events("r")
    assert len(events) == 5 * count
    proposed = [e.data["arguments"] for e in events if e.kind == "proposed"]
    assert proposed[7] == {"x": 7, "s": "v7", "b": False, "f": 7 / 3}


def test_what_a_reader_changes_of_what_it_read_changes_nothing_stored() -> None:
    store = MemoryTraceStore()
    store.append_nodes("r", _plain_batch(3), [])
    first = store.events("r")
    for e in first:
        if e.kind == "proposed":
            e.data["arguments"]["x"] = "changed"
    again = [e.data["arguments"] for e in store.events("r") if e.kind == "proposed"]
    assert [a["x"] for a in again] == [0, 1, 2]


def test_rows_are_made_only_of_plain_arguments_of_exact_types() -> None:
    shape = SHAPES[0]

    def columns(arguments: Any) -> Any:
        record = (0, 1.0, "r:c", shape, arguments, "n", 4, 2.0, "h")
        return tuple(zip(*[record], strict=True))

    def rows(arguments: Any) -> Any:
        cols = columns(arguments)
        return flat_rows(cols, shape_indices(cols[3], {}, []))

    assert rows({"a": 1, "b": None, "c": "x", "d": 1.5, "e": True}) is not None
    assert rows({}) is not None
    refusals: list[dict[Any, Any]] = [
        {"a": [1]},
        {"a": {}},
        {"a": Tag("x")},
        {"a": (1,)},
        {"a": object()},
        {(1,): 1},
    ]
    for refused in refusals:
        assert rows(refused) is None, refused
    from types import MappingProxyType

    assert rows(MappingProxyType({"a": 1})) is None
