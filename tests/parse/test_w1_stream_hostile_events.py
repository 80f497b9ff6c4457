"""Provider stream events a hostile model or relay may send: :class:`StreamParser` takes each
without raising, and the output ends as calls or a ``parse_error`` (never ``internal``), fed delta
by delta or handed to ``parse`` whole."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace.parse import StreamParser, call_ids, parse

WORDS = st.sampled_from(
    [
        "tool_use",
        "function_call",
        "input_json_delta",
        "text_delta",
        "thinking_delta",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "response.output_item.added",
        "response.output_item.done",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_text.delta",
        "response.refusal.delta",
        "response.completed",
        "response.incomplete",
        "tool_calls",
        "length",
        "max_tokens",
        "incomplete",
        "c1",
        "put",
        '{"x": 1}',
        '{"x"',
    ]
)
LEAVES = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.floats(), st.text(max_size=5), WORDS)
KEYS = st.sampled_from(
    [
        "type",
        "index",
        "id",
        "name",
        "arguments",
        "function",
        "tool_calls",
        "delta",
        "choices",
        "finish_reason",
        "content_block",
        "partial_json",
        "item",
        "output_index",
        "call_id",
        "response",
        "status",
        "stop_reason",
        "input",
        "content",
        "text",
        "refusal",
        "reasoning_content",
        "thinking",
    ]
)
VALUES = st.recursive(
    LEAVES,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(KEYS, inner, max_size=4)),
    max_leaves=12,
)
EVENTS = st.lists(st.dictionaries(KEYS, VALUES, min_size=1, max_size=5), min_size=1, max_size=8)


def assert_read(events: list[dict[str, Any]]) -> None:
    stream = StreamParser()
    for event in events:
        stream.feed(event)
        stream.progress()
    for result in (stream.finish(), parse(events)):
        assert result.error is None or result.error.category == "parse_error", result.error
        assert all(c.id is None or type(c.id) is str for c in result.calls)
    assert all(type(i) is str for i in call_ids(events))


@pytest.mark.parametrize(
    "events",
    [
        [{"tool_calls": 1.0}],
        [{"choices": [{"delta": {"tool_calls": 5}}]}],
        [{"choices": [{"delta": {"tool_calls": "abc"}}]}],
    ],
)
def test_a_chunk_whose_tool_calls_are_not_a_list_is_read_without_raising(
    events: list[dict[str, Any]],
) -> None:
    assert_read(events)


@settings(max_examples=600, deadline=None, suppress_health_check=list(HealthCheck))
@given(EVENTS)
def test_any_event_stream_is_read_without_raising(events: list[dict[str, Any]]) -> None:
    assert_read(events)
