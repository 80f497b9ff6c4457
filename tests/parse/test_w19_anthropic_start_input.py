"""An Anthropic ``tool_use`` block's ``content_block_start`` input counts when no delta replaces it.

Anthropic's own API starts a block with ``"input": {}`` and streams the input as
``input_json_delta`` text; proxies and replays (a cached response, Bedrock gateways) may put the
whole input on the start block and send no delta. The stream read such a call as ``{}``. Anthropic's
SDK keeps the start input in its snapshot and replaces it with the deltas' JSON once their text is
not empty (``accumulate_event`` in ``anthropic/lib/streaming/_messages.py``), and so does the parser.
The events are written for these tests.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace.parse import StreamParser, parse


def _events(start_input: Any, deltas: list[str]) -> list[dict[str, Any]]:
    block = {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": start_input}
    return [
        {"type": "message_start", "message": {"id": "msg_1", "role": "assistant", "content": []}},
        {"type": "content_block_start", "index": 0, "content_block": block},
        *(
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "input_json_delta", "partial_json": d},
            }
            for d in deltas
        ),
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}},
        {"type": "message_stop"},
    ]


def _streamed(events: list[dict[str, Any]]) -> tuple[list[Any], Any]:
    stream = StreamParser()
    shown = [call for event in events for call in stream.feed(event)]
    return shown, stream.finish()


@pytest.mark.parametrize("deltas", [[], [""], ["", ""]])
def test_a_start_input_no_delta_text_follows_is_the_calls_input(deltas: list[str]) -> None:
    events = _events({"city": "Paris", "days": 3}, deltas)
    shown, result = _streamed(events)
    assert result.error is None
    assert [c.arguments for c in result.calls] == [{"city": "Paris", "days": 3}]
    assert shown == list(result.calls)
    assert parse(events) == result


def test_deltas_with_text_replace_the_start_input_as_the_sdk_reads_them() -> None:
    events = _events({"city": "Paris"}, ['{"city": ', '"Oslo"}'])
    shown, result = _streamed(events)
    assert [c.arguments for c in result.calls] == [{"city": "Oslo"}]
    assert shown == list(result.calls)


def test_the_start_input_is_shown_while_the_call_is_pending() -> None:
    stream = StreamParser()
    for event in _events({"city": "Paris"}, [])[:2]:
        stream.feed(event)
    assert [c.arguments for c in stream.progress().provisional] == ['{"city": "Paris"}']


def test_a_start_input_holding_a_non_finite_number_is_a_parse_error() -> None:
    shown, result = _streamed(_events({"amount": float("nan")}, []))
    assert shown == [] and result.calls == ()
    assert result.error is not None and result.error.category == "parse_error"
    assert result.error.details["reason"] == "invalid_number"


def test_a_start_input_json_cannot_write_is_a_parse_error_not_an_exception() -> None:
    shown, result = _streamed(_events({"tags": {1, 2}}, []))
    assert shown == []
    assert result.error is not None and result.error.category == "parse_error"


@settings(max_examples=150, deadline=None)
@given(
    st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=5), min_size=1, max_size=4),
    st.lists(st.sampled_from(["", '{"a"', ": 1}", "{}", "x"]), max_size=3),
)
def test_the_stream_reads_the_input_anthropics_sdk_would(start: dict[str, Any], deltas: list[str]) -> None:
    shown, result = _streamed(_events(start, deltas))
    text = "".join(deltas)
    if not text:
        assert result.error is None and result.calls[0].arguments == start
    elif result.error is None:  # the deltas' JSON, never the start's input merged into it
        assert text in ("{}", '{"a": 1}')
        assert result.calls[0].arguments == ({} if text == "{}" else {"a": 1})
    else:
        assert result.error.category == "parse_error" and shown == []
