"""OpenAI-compatible servers that number every streamed tool call ``0``, or give no ``index`` at
all, still begin each call with an ``id`` of its own. A call id other than the one the index
already holds is a new call: merging it into the one before spliced two calls into one
(``send_smssend_sms`` with ``{...}{...}`` as arguments) and lost the first call's id, which the
conversation then never answered (providers refuse the next request for it)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace.parse import StreamParser, call_ids, parse

A = {"to": "+15550100", "text": "running late"}
B = {"to": "+15550199", "text": "me too"}


def _chunk(delta: dict[str, Any], reason: str | None = None) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta, "finish_reason": reason}
    return {"id": "x", "object": "chat.completion.chunk", "created": 0, "model": "m", "choices": [choice]}


def _entry(index: object, call_id: str | None, name: str | None, arguments: str) -> dict[str, Any]:
    entry: dict[str, Any] = {"function": {"arguments": arguments}}
    if index is not _NO_INDEX:
        entry["index"] = index
    if call_id is not None:
        entry.update(id=call_id, type="function")
    if name is not None:
        entry["function"]["name"] = name
    return entry


_NO_INDEX = object()
INDEXES = [0, None, _NO_INDEX]


def _stream(
    calls: list[tuple[str, str, dict[str, Any]]], index: object, pieces: int, finish: str = "tool_calls"
) -> list[dict[str, Any]]:
    """Every call under one ``index``, its arguments in ``pieces`` chunks (the id and name in the first)."""
    chunks = [_chunk({"role": "assistant", "content": None})]
    for call_id, name, args in calls:
        text = json.dumps(args)
        step = max(1, -(-len(text) // pieces))
        parts = [text[i : i + step] for i in range(0, len(text), step)]
        chunks.append(_chunk({"tool_calls": [_entry(index, call_id, name, parts[0])]}))
        chunks += [_chunk({"tool_calls": [_entry(index, None, None, p)]}) for p in parts[1:]]
    return [*chunks, _chunk({}, finish)]


@pytest.mark.parametrize("index", INDEXES, ids=["zero", "null", "absent"])
@pytest.mark.parametrize("pieces", [1, 3])
def test_calls_streamed_under_one_index_stay_apart(index: object, pieces: int) -> None:
    events = _stream([("call_1", "send_sms", A), ("call_2", "send_sms", B)], index, pieces)
    stream = StreamParser()
    fed = [c for e in events for c in stream.feed(e)]
    result = stream.finish()
    assert result.error is None, result.error
    assert [(c.id, c.name, c.arguments) for c in result.calls] == [
        ("call_1", "send_sms", A),
        ("call_2", "send_sms", B),
    ]
    assert fed == list(result.calls)
    assert stream.call_ids() == ("call_1", "call_2")
    assert parse(stream.output()).calls == result.calls
    assert call_ids(stream.output()) == ("call_1", "call_2")


@pytest.mark.parametrize("index", INDEXES, ids=["zero", "null", "absent"])
def test_a_cut_stream_under_one_index_owes_every_call_id(index: object) -> None:
    events = _stream([("call_1", "send_sms", A), ("call_2", "send_sms", B)], index, 2, finish="length")
    stream = StreamParser()
    for event in events:
        stream.feed(event)
    result = stream.finish()
    assert result.error is not None and result.error.details["reason"] == "cut_off"
    assert result.calls == ()
    assert result.error.details["call_ids"] == ["call_1", "call_2"]


def test_the_id_repeated_on_every_chunk_is_still_one_call() -> None:
    text = json.dumps(A)
    events = [
        _chunk({"tool_calls": [_entry(0, "call_1", "send_sms", text[:7])]}),
        _chunk({"tool_calls": [_entry(0, "call_1", None, text[7:])]}),
        _chunk({}, "tool_calls"),
    ]
    stream = StreamParser()
    for event in events:
        stream.feed(event)
    result = stream.finish()
    assert result.error is None
    assert [(c.id, c.arguments) for c in result.calls] == [("call_1", A)]


def test_indexed_calls_after_reused_ones_keep_their_own_slots() -> None:
    events = [
        _chunk({"tool_calls": [_entry(0, "call_1", "send_sms", json.dumps(A))]}),
        _chunk({"tool_calls": [_entry(0, "call_2", "send_sms", json.dumps(B))]}),
        _chunk({"tool_calls": [_entry(1, "call_3", "send_sms", json.dumps(A))]}),
        _chunk({}, "tool_calls"),
    ]
    stream = StreamParser()
    for event in events:
        stream.feed(event)
    result = stream.finish()
    assert result.error is None
    assert [c.id for c in result.calls] == ["call_1", "call_2", "call_3"]


@settings(max_examples=60, deadline=None)
@given(
    count=st.integers(1, 5),
    index=st.sampled_from(INDEXES),
    pieces=st.integers(1, 6),
)
def test_any_number_of_calls_under_one_index_each_keep_their_id(
    count: int, index: object, pieces: int
) -> None:
    calls = [(f"call_{i}", "send_sms", {"to": f"+1555{i}", "text": "é" * i}) for i in range(count)]
    stream = StreamParser()
    for event in _stream(calls, index, pieces):
        stream.feed(event)
    result = stream.finish()
    assert result.error is None
    assert [(c.id, c.arguments) for c in result.calls] == [(cid, args) for cid, _, args in calls]


def test_an_id_changed_on_a_piece_of_arguments_begins_no_call() -> None:
    text = json.dumps(A)
    events = [
        _chunk({"tool_calls": [_entry(0, "call_1", "send_sms", text[:7])]}),
        _chunk({"tool_calls": [_entry(0, "call_1b", None, text[7:12])]}),
        _chunk({"tool_calls": [_entry(0, "call_1c", None, text[12:])]}),
        _chunk({}, "tool_calls"),
    ]
    stream = StreamParser()
    for event in events:
        stream.feed(event)
    result = stream.finish()
    assert result.error is None
    assert [(c.name, c.arguments) for c in result.calls] == [("send_sms", A)]
