"""A streamed message's calls are in the message's order — a Responses call's ``output_index``, a
chat call's ``index``, an Anthropic block's ``index`` — however the server or a proxy between
interleaved or reordered their events. Read in arrival order, a Responses stream whose call at
``output_index`` 2 began before the one at 0 ran ``set_counter(x=2)`` before ``set_counter(x=1)``
(the model's last word on ``x`` was 2; the whole ``response.output`` read it so), and the cut
stream's call ids were answered in another order than the message's."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace.parse import StreamParser, call_ids, parse

CALLS = [
    ("call_a", {"name": "x", "value": 1}),
    ("call_b", {"name": "x", "value": 2}),
    ("call_c", {"name": "y", "value": 3}),
    ("call_d", {"name": "x", "value": 4}),
]


def _item(call_id: str, arguments: str, status: str) -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": f"fc_{call_id}",
        "call_id": call_id,
        "name": "set_counter",
        "arguments": arguments,
        "status": status,
    }


def _responses_events(
    calls: list[tuple[str, dict[str, Any]]], arrival: list[int], cut: bool = False
) -> tuple[list[dict[str, Any]], list[Any]]:
    """The events of ``calls`` at output indices 0, 2, 4… (a reasoning item between each two),
    each call's events begun in ``arrival`` order and interleaved; and the completed output."""
    events: list[dict[str, Any]] = [{"type": "response.created", "response": {"status": "in_progress"}}]
    output: list[Any] = []
    for n, (call_id, args) in enumerate(calls):
        output.append(_item(call_id, json.dumps(args), "completed"))
        if n < len(calls) - 1:
            output.append({"type": "reasoning", "id": f"rs_{n}", "summary": []})
    for n in arrival:
        call_id = calls[n][0]
        item = _item(call_id, "", "in_progress")
        events.append({"type": "response.output_item.added", "output_index": 2 * n, "item": item})
        if n < len(calls) - 1:
            reasoning = {"type": "reasoning", "id": f"rs_{n}", "summary": []}
            events.append(
                {"type": "response.output_item.added", "output_index": 2 * n + 1, "item": reasoning}
            )
    for half in (0, 1):
        for n in arrival:
            call_id, args = calls[n]
            text = json.dumps(args)
            piece = text[: len(text) // 2] if half == 0 else text[len(text) // 2 :]
            events.append(
                {
                    "type": "response.function_call_arguments.delta",
                    "output_index": 2 * n,
                    "item_id": f"fc_{call_id}",
                    "delta": piece,
                }
            )
    for n in arrival:
        call_id, args = calls[n]
        done = _item(call_id, json.dumps(args), "completed")
        events.append({"type": "response.output_item.done", "output_index": 2 * n, "item": done})
    status = "incomplete" if cut else "completed"
    kind = "response.incomplete" if cut else "response.completed"
    events.append({"type": kind, "response": {"status": status, "output": output}})
    return events, output


def _chat_chunk(delta: dict[str, Any], reason: str | None = None) -> dict[str, Any]:
    return {
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": delta, "finish_reason": reason}],
    }


def _chat_events(calls: list[tuple[str, dict[str, Any]]], arrival: list[int]) -> list[dict[str, Any]]:
    chunks = [_chat_chunk({"role": "assistant", "content": None})]
    for n in arrival:
        call_id, args = calls[n]
        function = {"name": "set_counter", "arguments": json.dumps(args)}
        chunks.append(
            _chat_chunk(
                {"tool_calls": [{"index": n, "id": call_id, "type": "function", "function": function}]}
            )
        )
    return [*chunks, _chat_chunk({}, "tool_calls")]


def _anthropic_events(calls: list[tuple[str, dict[str, Any]]], arrival: list[int]) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": {"role": "assistant", "content": []}}
    ]
    for n in arrival:
        call_id, args = calls[n]
        block = {"type": "tool_use", "id": call_id, "name": "set_counter", "input": {}}
        events.append({"type": "content_block_start", "index": n, "content_block": block})
        delta = {"type": "input_json_delta", "partial_json": json.dumps(args)}
        events.append({"type": "content_block_delta", "index": n, "delta": delta})
        events.append({"type": "content_block_stop", "index": n})
    events.append({"type": "message_delta", "delta": {"stop_reason": "tool_use"}})
    return [*events, {"type": "message_stop"}]


def _ids(result: Any) -> list[str | None]:
    return [c.id for c in result.calls]


def test_a_responses_stream_whose_later_call_began_first_reads_in_output_order() -> None:
    calls = CALLS[:2]
    events, output = _responses_events(calls, [1, 0])
    whole = parse(output)
    assert _ids(whole) == ["call_a", "call_b"]
    assert _ids(parse(events)) == ["call_a", "call_b"]
    stream = StreamParser()
    for event in events:
        stream.feed(event)
    assert stream.finish() == parse(events)
    assert [c.arguments for c in stream.finish().calls] == [a for _, a in calls]


def test_a_cut_responses_stream_names_its_call_ids_in_output_order() -> None:
    events, _ = _responses_events(CALLS[:3], [2, 0, 1], cut=True)
    result = parse(events)
    assert result.error is not None and result.error.details["reason"] == "cut_off"
    assert result.error.details["call_ids"] == ["call_a", "call_b", "call_c"]
    assert call_ids(events) == ("call_a", "call_b", "call_c")


@settings(max_examples=80, deadline=None)
@given(st.integers(min_value=2, max_value=4).flatmap(lambda n: st.permutations(list(range(n)))))
def test_any_arrival_order_of_a_streamed_message_reads_as_the_message(arrival: list[int]) -> None:
    calls = CALLS[: len(arrival)]
    expected = [c for c, _ in calls]
    events, output = _responses_events(calls, arrival)
    assert _ids(parse(output)) == expected
    for stream_events in (events, _chat_events(calls, arrival), _anthropic_events(calls, arrival)):
        result = parse(stream_events)
        assert result.error is None
        assert _ids(result) == expected
        assert [c.arguments for c in result.calls] == [a for _, a in calls]
        stream = StreamParser()
        shown = [call.id for event in stream_events for call in stream.feed(event)]
        assert sorted(shown, key=str) == expected  # each call shown once, whatever the order
        assert _ids(stream.finish()) == expected
        assert stream.call_ids() == tuple(expected)
