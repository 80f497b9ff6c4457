"""A Responses-compatible server that gives every output item ``output_index`` 0, or none at all,
still names each item by its ``id`` (``item_id`` on its argument events). Each item is a call of
its own: read by index alone, two calls were spliced into one (``{...}{...}``), the stream ended
``changed_after_complete`` and only the last call id was known, so the first call went unanswered
and the provider refused the next request."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace.parse import StreamParser, call_ids, parse

A = {"to": "+15550100", "text": "running late"}
B = {"to": "+15550199", "text": "me too"}
_ABSENT = object()


def _events(
    calls: list[tuple[str, dict[str, Any]]], index: object, pieces: int, end: str = "response.completed"
) -> list[dict[str, Any]]:
    def at(event: dict[str, Any]) -> dict[str, Any]:
        return event if index is _ABSENT else {**event, "output_index": index}

    events: list[dict[str, Any]] = [{"type": "response.created", "response": {"status": "in_progress"}}]
    for call_id, args in calls:
        item = {"type": "function_call", "id": f"fc_{call_id}", "call_id": call_id, "name": "send_sms"}
        events.append(at({"type": "response.output_item.added", "item": {**item, "arguments": ""}}))
        text = json.dumps(args)
        step = max(1, -(-len(text) // pieces))
        for i in range(0, len(text), step):
            delta = {"type": "response.function_call_arguments.delta", "delta": text[i : i + step]}
            events.append(at({**delta, "item_id": f"fc_{call_id}"}))
        done = {
            "type": "response.function_call_arguments.done",
            "arguments": text,
            "item_id": f"fc_{call_id}",
        }
        events.append(at(done))
        whole = {**item, "arguments": text, "status": "completed"}
        events.append(at({"type": "response.output_item.done", "item": whole}))
    status = "incomplete" if end == "response.incomplete" else "completed"
    return [*events, {"type": end, "response": {"status": status}}]


@pytest.mark.parametrize("index", [0, None, _ABSENT], ids=["zero", "null", "absent"])
@pytest.mark.parametrize("pieces", [1, 4])
def test_items_under_one_output_index_stay_apart(index: object, pieces: int) -> None:
    events = _events([("call_1", A), ("call_2", B)], index, pieces)
    result = parse(events)
    assert result.error is None
    assert [(c.id, c.name, c.arguments) for c in result.calls] == [
        ("call_1", "send_sms", A),
        ("call_2", "send_sms", B),
    ]
    stream = StreamParser()
    shown = [call.id for event in events for call in stream.feed(event)]
    assert shown == ["call_1", "call_2"]
    assert stream.finish() == result
    assert call_ids(events) == ("call_1", "call_2")


@pytest.mark.parametrize("index", [0, _ABSENT], ids=["zero", "absent"])
def test_a_cut_stream_of_items_under_one_index_names_every_call_id(index: object) -> None:
    events = _events([("call_1", A), ("call_2", B)], index, 3, end="response.incomplete")
    result = parse(events)
    assert result.calls == ()
    assert result.error is not None and result.error.details["reason"] == "cut_off"
    assert result.error.details["call_ids"] == ["call_1", "call_2"]


@settings(max_examples=40, deadline=None)
@given(
    count=st.integers(min_value=1, max_value=4),
    index=st.sampled_from([0, None, _ABSENT]),
    pieces=st.integers(min_value=1, max_value=6),
)
def test_any_number_of_items_under_one_index_read_as_their_message(
    count: int, index: object, pieces: int
) -> None:
    calls = [(f"call_{n}", {"to": f"+1555010{n}", "text": "é" * n}) for n in range(count)]
    result = parse(_events(calls, index, pieces))
    assert result.error is None
    assert [(c.id, c.arguments) for c in result.calls] == calls


def test_items_at_their_own_indices_stay_apart_even_under_one_id() -> None:
    events = _events([("call_1", A)], 0, 2)[:-1] + _events([("call_2", B)], 1, 2)[1:]
    for event in events:  # a server that names every item alike
        if isinstance(event.get("item"), dict):
            event["item"] = {**event["item"], "id": "fc"}
        if "item_id" in event:
            event["item_id"] = "fc"
    result = parse(events)
    assert result.error is None
    assert [(c.id, c.arguments) for c in result.calls] == [("call_1", A), ("call_2", B)]
