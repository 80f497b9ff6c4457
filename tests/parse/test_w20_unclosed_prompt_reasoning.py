"""A prompt that opened the reasoning block (``StreamParser(in_reasoning=True)``: a template ending with
``<think>``) makes every word before the model's reasoning closer reasoning. An output that never
writes the closer is reasoning to its end: a call drafted there is no call. ``finish()``,
``output()`` (what a session acts on), ``call_ids()`` and a session handling the stream propose
none of them, however the text was split: the output ends as a ``parse_error`` of reason
``unterminated_reasoning`` with the text as its reasoning, as ``parse`` reads the same text after
the opener.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace import Runtime
from actionspace.parse import StreamParser, call_ids, parse

DRAFTS = {
    "hermes": 'Maybe <tool_call>{"name": "delete_repo", "arguments": {"name": "prod"}}</tool_call> or not',
    "kimi": (
        "Perhaps <|tool_calls_section_begin|><|tool_call_begin|>functions.delete_repo:0"
        '<|tool_call_argument_begin|>{"name": "prod"}<|tool_call_end|><|tool_calls_section_end|>'
    ),
    "bare json": '{"name": "delete_repo", "arguments": {"name": "prod"}, "id": "d1"}',
    "minimax": (
        '<tool_calls>\n{"name": "delete_repo", "arguments": {"name": "prod"}, "id": "d1"}\n</tool_calls>'
    ),
}


def _stream(text: str, pieces: list[int]) -> tuple[StreamParser, list[str]]:
    stream = StreamParser(in_reasoning=True)
    points = sorted({0, len(text), *(p % (len(text) + 1) for p in pieces)})
    shown = [call.name for a, b in itertools.pairwise(points) for call in stream.feed(text[a:b])]
    return stream, shown


@pytest.mark.parametrize("name", sorted(DRAFTS))
def test_calls_drafted_in_reasoning_that_never_closes_are_not_proposed(name: str) -> None:
    text = DRAFTS[name]
    stream, shown = _stream(text, [5, 17, 40])
    assert shown == []
    result = stream.finish()
    assert result.calls == ()
    assert result.reasoning == text and not result.content
    assert result.error is not None and result.error.details["reason"] == "unterminated_reasoning"
    assert parse(stream.output()) == result  # what a session reads is what finish() gives
    assert stream.call_ids() == () and call_ids(stream.output()) == ()


@settings(max_examples=80, deadline=None)
@given(st.sampled_from(sorted(DRAFTS)), st.lists(st.integers(0, 200), max_size=6))
def test_no_split_of_unclosed_reasoning_proposes_a_call(name: str, pieces: list[int]) -> None:
    stream, shown = _stream(DRAFTS[name], pieces)
    assert shown == [] and stream.finish().calls == () and parse(stream.output()).calls == ()


def test_a_cut_stream_of_unclosed_reasoning_is_cut_off_and_names_no_drafted_id() -> None:
    stream, _ = _stream(DRAFTS["kimi"], [9])
    stream.end("length")
    result = stream.finish()
    assert result.calls == () and result.error is not None
    assert call_ids(stream.output()) == ()


def test_the_closer_still_makes_what_follows_it_the_answer() -> None:
    call = '<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>'
    text = DRAFTS["hermes"] + "</think>\n" + call
    stream, shown = _stream(text, [30, 90])
    assert shown == ["get_weather"]
    assert stream.finish() == parse(text) and stream.output() == text


def test_an_empty_stream_is_no_fault() -> None:
    stream = StreamParser(in_reasoning=True)
    assert stream.finish().error is None and stream.output() == ""


def test_a_session_handling_the_stream_runs_no_drafted_call() -> None:
    rt = Runtime("memory://")
    deleted: list[str] = []

    @rt.tool(effect="write")
    def delete_repo(name: str) -> str:
        """Delete a repository."""
        deleted.append(name)
        return "deleted"

    s = rt.session(provider="openai_chat")
    s.user("Should we clean up?")
    stream, _ = _stream(DRAFTS["hermes"], [11])
    turn = s.handle(stream)
    assert deleted == []
    assert [
        (o.call_id.endswith(":parse"), o.error and o.error.details["reason"]) for o in turn.observations
    ] == [(True, "unterminated_reasoning")]
    assert not turn.done
