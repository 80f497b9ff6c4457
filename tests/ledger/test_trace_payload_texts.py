"""A durable call's trace on SQLite: payloads every call of a tool records are encoded once.

The ``authorized``, ``validated`` and ``flow_checked`` payloads of a tool's precompiled calls are
one object per tool (and run label); the SQLite trace store keeps the text it wrote for such an
object and writes it again without encoding. What is read back must not change: a payload made
per call, and an object whose ``id`` was reused after its text was let go, are encoded anew.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import actionspace.trace.sqlite as trace_sqlite
from actionspace import Runtime, ToolCall
from actionspace.trace._payload_texts import PayloadTexts
from actionspace.trace.sqlite import SqliteTraceStore
from actionspace.trace.store_encoding import encode_data

CALLS = 12


def _put(key: str, value: int) -> int:
    return 3


def test_the_payloads_every_call_of_a_tool_records_are_encoded_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    encoded: Counter[int] = Counter()
    kept: list[Mapping[str, Any]] = []  # held, so no id is reused between two calls

    def counting(data: Mapping[str, Any], *, utf8: bool = True) -> str:
        encoded[id(data)] += 1
        kept.append(data)
        return encode_data(data, utf8=utf8)

    monkeypatch.setattr(trace_sqlite, "encode_data", counting)
    rt = Runtime(f"sqlite:///{tmp_path / 'a.db'}", recover_on_start=False)
    try:
        schema = {"type": "object", "properties": {"key": {"type": "string"}, "value": {"type": "integer"}}}
        rt.add_tool(name="put", input_schema=schema, fn=_put, effect="write", blocking=False)
        run = rt.new_run()
        for i in range(CALLS):
            put = ToolCall(name="put", arguments={"key": f"k{i}", "value": i})
            assert rt.call(put, run_id=run, node_id=f"n{i}").status == "ok"
        events = rt.trace.events(run)
    finally:
        rt.close()
    by_kind: dict[str, list[Mapping[str, Any]]] = {}
    for event in events:
        by_kind.setdefault(event.kind, []).append(event.data)
    for kind in ("authorized", "validated", "flow_checked"):
        assert len(by_kind[kind]) == CALLS
        # the same payload each call once the run's label is settled (the first call raises it)
        assert all(data == by_kind[kind][1] for data in by_kind[kind][1:])
    assert encoded, "the store encoded nothing"
    assert max(encoded.values()) == 1, "a payload object was encoded more than once"
    # the calls' own payloads (their node ids) are still encoded per call
    assert sorted(data["node_id"] for data in by_kind["dispatched"]) == sorted(f"n{i}" for i in range(CALLS))


_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=6,
)
_PAYLOADS = st.dictionaries(st.text(max_size=5), _VALUES, max_size=4)


@settings(max_examples=80, deadline=None)
@given(
    steps=st.lists(
        st.tuples(
            st.sampled_from(["new", "again", "drop"]),
            st.dictionaries(st.text(max_size=3), st.integers() | st.text(max_size=3), max_size=3),
            st.integers(0, 50),
        ),
        max_size=60,
    ),
    kept=st.integers(1, 5),
)
def test_a_kept_text_is_the_text_of_the_object_asked_about(
    steps: list[tuple[str, dict[str, Any], int]], kept: int
) -> None:
    texts = PayloadTexts(encode_data, kept=kept)
    held: list[dict[str, Any]] = []
    for what, payload, pick in steps:
        if what == "drop" and held:
            del held[pick % len(held)]  # the object goes unless kept: a new one may take its id
            continue
        if what == "again" and held:
            data = held[pick % len(held)]
        else:
            data = dict(payload)
            held.append(data)
        assert texts.text(data) == encode_data(data)
        assert len(texts.kept) <= kept


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    payloads=st.lists(_PAYLOADS, min_size=1, max_size=6),
    calls=st.lists(st.lists(st.integers(0, 5), min_size=1, max_size=4), min_size=1, max_size=8),
    fresh=st.integers(0, 400),
)
def test_the_store_reads_back_every_payload_as_recorded(
    tmp_path_factory: pytest.TempPathFactory,
    payloads: list[dict[str, Any]],
    calls: list[list[int]],
    fresh: int,
) -> None:
    store = SqliteTraceStore(tmp_path_factory.mktemp("t") / "t.db")
    try:
        recorded: list[dict[str, Any]] = []
        seq = 0
        for picks in calls:
            records: list[tuple[int, str, float, str | None, Any]] = []
            for pick in picks:  # the recurring payloads, as the same objects
                records.append((seq, "authorized", 1.0, "c", payloads[pick % len(payloads)]))
                recorded.append(payloads[pick % len(payloads)])
                seq += 1
            store.append_records("r", records)
        for i in range(fresh):  # payloads made per call: more than the store keeps, ids reused
            data = {"i": i, "node_id": f"n{i}"}
            store.append_records("r", [(seq, "dispatched", 1.0, "c", data)])
            recorded.append(data)
            seq += 1
            del data
        read = [json.loads(json.dumps(event.data)) for event in store.events("r")]
        assert read == [json.loads(encode_data(data)) for data in recorded]
    finally:
        store.close()


class _Counting(Mapping[str, Any]):
    """A mapping that reads differently each time it is read whole."""

    def __init__(self) -> None:
        self.reads = 0

    def __getitem__(self, key: str) -> Any:
        if key != "reads":
            raise KeyError(key)
        return self.reads

    def __iter__(self) -> Any:
        self.reads += 1
        return iter(["reads"])

    def __len__(self) -> int:
        return 1


def test_a_payload_that_is_not_a_dict_is_encoded_each_time_it_is_recorded(tmp_path: Path) -> None:
    store = SqliteTraceStore(tmp_path / "t.db")
    try:
        payload = _Counting()
        store.append_records("r", [(0, "authorized", 1.0, "c", payload)])
        store.append_records("r", [(1, "authorized", 1.0, "c", payload)])
        first, second = (event.data for event in store.events("r"))
        assert first != second  # each recording read the mapping anew
    finally:
        store.close()
