"""A durable write's Python on its thread outside the ledger store, cut, and what it hands on unchanged.

- The payloads every call of a tool records (``authorized``, ``validated``, ``flow_checked``) reach
  a SQLite store with their text made once (``_write_parts.shared_texted``): equal to what
  ``encode_data`` writes for them, over generated payloads; a payload whose text a ``Texted`` may
  not hold (not a ``dict``, not ASCII, too long, not encodable) is handed on as itself; every
  payload of a durable write reaches the store with its text (the code before: six of nine).
- ``Messages.calls`` counts a sync call in ``InFlight.sync`` without ``enter``/``leave``'s calls:
  nested under ``Runtime.call``'s own count or alone, the thread's count is back where it was, and
  a close waiting for a sync call is woken when it ends.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import Counter
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace import Runtime, ToolCall
from actionspace.ledger import sqlite_writer
from actionspace.pipeline import _write_parts
from actionspace.trace._payload_texts import SHARED_KINDS
from actionspace.trace.sqlite import SqliteTraceStore
from actionspace.trace.store_encoding import MAX_EVENT_CHARS, Texted, encode_data


def _put(key: str, value: int) -> int:
    return 3


def _runtime(path: Path) -> tuple[Runtime, str]:
    rt = Runtime(f"sqlite:///{path}", recover_on_start=False)
    schema = {"type": "object", "properties": {"key": {"type": "string"}, "value": {"type": "integer"}}}
    rt.add_tool(name="put", input_schema=schema, fn=_put, effect="write", blocking=False)
    return rt, rt.new_run()


def test_every_payload_of_a_durable_write_reaches_the_store_with_its_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_writer, "LINGER_S", 600.0)  # the rows wait for the read below
    handed: list[list[Any]] = []
    append = SqliteTraceStore.append_records.__code__

    def spy(frame: FrameType, event: str, arg: Any) -> None:  # the store's own method, unwrapped
        if event == "call" and frame.f_code is append:
            handed.append(list(frame.f_locals["records"]))

    rt, run = _runtime(tmp_path / "a.db")
    sys.setprofile(spy)
    try:
        for i in range(12):
            obs = rt.call(
                ToolCall(name="put", arguments={"key": f"k{i}", "value": i}), run_id=run, node_id=f"n{i}"
            )
            assert (obs.status, obs.data) == ("ok", 3)
        sys.setprofile(None)
        events = rt.trace.events(run)
    finally:
        sys.setprofile(None)
        rt.close()
    calls = [records for records in handed if any(r[1] == "dispatched" for r in records)]
    assert len(calls) == 12
    for records in calls[2:]:  # the first call of a run takes the stages, which make the entry
        kinds = [r[1] for r in records]
        assert {"authorized", "validated", "flow_checked"} <= set(kinds), kinds
        assert [r[1] for r in records if type(r[4]) is not Texted] == []  # each text made beside it
        for _, _, _, _, data in records:
            assert data.text == encode_data(dict(data))
    shared = [r[4] for r in calls[-1] if r[1] in SHARED_KINDS]
    assert all(a is b for a, b in zip(shared, [r[4] for r in calls[2] if r[1] in SHARED_KINDS], strict=True))
    assert [e.seq for e in events] == list(range(len(events)))
    assert Counter(e.kind for e in events)["authorized"] == 12


LEAVES = st.none() | st.booleans() | st.integers(-(2**64), 2**64) | st.floats() | st.text(max_size=700)
SHARED = st.recursive(
    LEAVES,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=300, deadline=None)
@given(payload=st.dictionaries(st.text(max_size=6), SHARED, max_size=5))
def test_a_shared_payloads_text_is_what_encode_data_writes_or_it_is_handed_on_itself(
    payload: dict[str, Any],
) -> None:
    shared_texted = _write_parts.shared_texted
    out = shared_texted(payload)
    assert shared_texted(payload) is out  # made once per object
    try:
        text = encode_data(payload)
    except (ValueError, TypeError):
        assert out is payload
        return
    if text.isascii() and len(text) <= MAX_EVENT_CHARS:
        assert type(out) is Texted
        assert out.text == text
        assert dict(out) == payload
        assert encode_data(out) == text
    else:
        assert out is payload


def test_a_shared_payload_that_is_not_a_dict_is_handed_on_itself() -> None:
    class Reads(dict[str, Any]):
        pass

    shared_texted = _write_parts.shared_texted
    payload = Reads(a=1)
    assert shared_texted(payload) is payload
    again = {"a": 1}
    made = shared_texted(again)
    assert type(made) is Texted and made.text == '{"a": 1}'
    _write_parts._SHARED.pop(id(again))
    assert shared_texted(again) is not made  # a kept entry answers only for its own object


def test_a_sync_call_is_counted_in_flight_while_it_runs_and_not_after(tmp_path: Path) -> None:
    rt, run = _runtime(tmp_path / "a.db")
    in_flight = rt.engine.messages.in_flight
    seen: list[dict[int, int]] = []

    def look(key: str, value: int) -> int:
        seen.append(dict(in_flight.sync))
        return 3

    rt.add_tool(
        name="look",
        input_schema={
            "type": "object",
            "properties": {"key": {"type": "string"}, "value": {"type": "integer"}},
        },
        fn=look,
        effect="write",
        blocking=False,
    )
    me = threading.get_ident()
    try:
        assert rt.call(ToolCall(name="look", arguments={"key": "a", "value": 1}), run_id=run, node_id="a").ok
        assert in_flight.sync == {}
        messages = rt.engine.messages
        out = messages.calls(
            ToolCall(name="look", arguments={"key": "b", "value": 2}), run_id=run, node_id="b"
        )
        assert [o.data for o in out] == [3]
        assert in_flight.sync == {}
        with in_flight:
            messages.calls(ToolCall(name="look", arguments={"key": "c", "value": 3}), run_id=run, node_id="c")
            assert in_flight.sync == {me: 1}
        assert in_flight.sync == {}
    finally:
        rt.close()
    assert seen == [{me: 1}, {me: 1}, {me: 1}]  # a thread counted already is not counted again


def test_a_close_waiting_for_a_sync_write_ends_when_it_ends(tmp_path: Path) -> None:
    rt, run = _runtime(tmp_path / "a.db")
    began, go = threading.Event(), threading.Event()

    def slow(key: str, value: int) -> int:
        began.set()
        go.wait(10)
        return 3

    rt.add_tool(
        name="slow",
        input_schema={
            "type": "object",
            "properties": {"key": {"type": "string"}, "value": {"type": "integer"}},
        },
        fn=slow,
        effect="write",
        blocking=False,
    )
    out: list[Any] = []
    caller = threading.Thread(
        target=lambda: out.append(
            rt.engine.messages.calls(
                ToolCall(name="slow", arguments={"key": "a", "value": 1}), run_id=run, node_id="a"
            )
        )
    )
    caller.start()
    assert began.wait(10)
    closed = threading.Thread(target=rt.close)
    closed.start()
    time.sleep(0.05)
    assert closed.is_alive()  # close() waits for the sync call
    go.set()
    caller.join(10)
    closed.join(10)
    assert not closed.is_alive() and not caller.is_alive()
    assert rt.engine.messages.in_flight.sync == {}
    assert [o.status for o in out[0]] == ["ok"]


STORES = ("/actionspace/ledger/", "/actionspace/trace/")
OPCODES = 2_450
"""Opcodes run per durable call on its thread in ``actionspace`` outside :data:`STORES` (the call
path, the write's frames, their admission and preparation; the stores' own are counted elsewhere):
2,560 before the admission took typed arguments without ``unfit_arguments``, the compiled schema
and ``_digested``, read the entry once per ``EPOCH`` and its kept verdict without their calls,
``_key`` and the usual course of ``RunRegistry.refresh`` were written out, a call without an id
recorded its name's one ``parsed`` payload and the frame made its closures only where the
protocol's functions take them; 2,268 after, 2,391 with the committed observation's ledger text
made in the frame (``_write_parts._observation_text``)."""


def _opcodes(path: Path, n: int) -> Counter[str]:
    rt, run = _runtime(path)
    seen: Counter[str] = Counter()
    me = threading.get_ident()

    def trace(frame: FrameType, event: str, arg: Any) -> Any:
        name = frame.f_code.co_filename
        if threading.get_ident() != me or "/actionspace/" not in name or any(s in name for s in STORES):
            return None
        frame.f_trace_opcodes = True
        if event == "opcode":
            seen[frame.f_code.co_qualname] += 1
        return trace

    with rt:
        for i in range(20):  # the tool's entry made, its shared payloads' texts kept
            rt.call(ToolCall(name="put", arguments={"key": f"w{i}", "value": i}), run_id=run, node_id=f"w{i}")
        sys.settrace(trace)
        try:
            for i in range(n):
                obs = rt.call(
                    ToolCall(name="put", arguments={"key": f"k{i}", "value": i}), run_id=run, node_id=f"n{i}"
                )
                assert (obs.status, obs.data) == ("ok", 3)
        finally:
            sys.settrace(None)
    return seen


def test_a_durable_write_runs_few_opcodes_of_the_pipeline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_writer, "LINGER_S", 600.0)  # the flusher's thread aside: rows wait
    small = _opcodes(tmp_path / "a.db", 10)
    large = _opcodes(tmp_path / "b.db", 60)
    per_call = (sum(large.values()) - sum(small.values())) / 50
    assert per_call <= OPCODES, (per_call, (large - small).most_common(12))
