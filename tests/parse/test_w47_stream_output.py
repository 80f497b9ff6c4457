"""``StreamParser.output()`` is the stream handed over whole: parsing it gives what ``finish()``
gives, whatever the events; a stream the provider cut off keeps no call; the calls ``feed`` showed
are the first calls of a stream that was not cut."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace import parse
from actionspace.parse import StreamParser, call_ids
from tests.text_strategies import any_text

pieces = st.sampled_from(['{"a": 1}', '{"a"', ": 1}", "}", "", "[", '{"a": 1, "a": 2}', "1e999"]) | any_text
entry = st.fixed_dictionaries(
    {"index": st.integers(0, 3) | st.text(max_size=2)},
    optional={
        "id": st.sampled_from(["c1", "c2", "c3"]) | st.integers(),
        "function": st.fixed_dictionaries(
            {}, optional={"name": st.sampled_from(["f", "g", ""]) | any_text, "arguments": pieces}
        ),
    },
)
finish = st.none() | st.sampled_from(["stop", "tool_calls", "length", "content_filter"])


def _chunk(entries: list[dict[str, Any]], reason: str | None) -> dict[str, Any]:
    choice = {"index": 0, "delta": {"tool_calls": entries}, "finish_reason": reason}
    return {"object": "chat.completion.chunk", "choices": [choice]}


@settings(max_examples=150, deadline=None)
@given(chunks=st.lists(st.tuples(st.lists(entry, max_size=2), finish), min_size=1, max_size=8))
def test_parse_of_the_output_is_the_finish_and_feed_shows_only_first_calls(
    chunks: list[tuple[list[dict[str, Any]], str | None]],
) -> None:
    stream = StreamParser()
    shown = [c for entries, reason in chunks for c in stream.feed(_chunk(entries, reason))]
    result = stream.finish()
    assert parse(stream.output()) == result
    assert call_ids(stream.output()) == stream.call_ids()
    if any(reason == "length" for _, reason in chunks):
        assert result.calls == ()
    else:  # a call shown is never changed: kept as shown, or the stream is a parse_error (the
        # message's own order may put a call that arrived later before it: test_w15_stream_message_order)
        kept = list(result.calls)
        assert all(call in kept for call in shown) or result.error is not None


@pytest.mark.parametrize(
    "late",
    [
        {"index": 0, "id": "c1"},
        {"index": 0, "type": "function", "function": {"name": "", "arguments": ""}, "id": "c9"},
        {"index": 0, "function": {"name": "x"}},
    ],
)
def test_a_call_changed_after_feed_showed_it_complete_is_a_parse_error(late: dict[str, Any]) -> None:
    first = [
        {"index": 0, "function": {"name": "f", "arguments": "{}"}},
        {"index": 1, "function": {"name": "g"}},
    ]
    stream = StreamParser()
    shown = stream.feed(_chunk(first, None)) + stream.feed(_chunk([late], None))
    assert [c.name for c in shown] == ["f"]
    result = stream.finish()
    assert result.error is not None and result.error.details["reason"] == "changed_after_complete"
    assert result.calls == () and parse(stream.output()) == result


def test_a_stream_of_events_has_its_finish_reason_in_its_events() -> None:
    stream = StreamParser()
    stream.feed(_chunk([], None))
    with pytest.raises(TypeError):
        stream.end("length")


def test_an_empty_stream_is_an_empty_answer() -> None:
    stream = StreamParser()
    stream.end("length")
    assert stream.output() == [
        {
            "object": "chat.completion.chunk",
            "choices": [
                {"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": "length"}
            ],
        }
    ]
    assert parse(stream.output()).calls == () and stream.finish().error is None


def test_a_call_arriving_before_one_shown_complete_reads_first_and_leaves_the_shown_one_unchanged() -> None:
    """The call at index 1 was shown complete (its chunk finished the message); a call at index 0
    arriving after it reads first, as the message orders them, and the shown call is kept as shown."""
    stream = StreamParser()
    shown = stream.feed(_chunk([{"index": 1, "id": "c1", "function": {"name": "f"}}], "stop"))
    shown += stream.feed(_chunk([{"index": 0, "function": {"name": "f"}}], None))
    assert [c.id for c in shown] == ["c1"]
    result = stream.finish()
    assert result.error is None and [c.id for c in result.calls] == [None, "c1"]
    assert result.calls[1] == shown[0] and parse(stream.output()) == result
