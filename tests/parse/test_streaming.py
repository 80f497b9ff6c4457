"""Streaming: for every corpus fixture and every split of it, the streamed result is the whole result,
and a call reported during the stream is never withdrawn or changed."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace.evaluation.parse_corpus import load_corpus
from actionspace.parse import ParseResult, StreamParser, parse
from actionspace.types import ToolCall

CORPUS = load_corpus(Path(__file__).parent / "corpus")
FIXTURES = [(f"{family}/{case['id']}", case) for family, cases in sorted(CORPUS.items()) for case in cases]


def summary(result: ParseResult) -> tuple[Any, ...]:
    reason = result.error.details.get("reason") if result.error else None
    return ([(c.name, c.arguments, c.id) for c in result.calls], reason, result.content, result.reasoning)


def stream(chunks: list[str], tools: Any = None) -> tuple[list[ToolCall], ParseResult]:
    parser = StreamParser(tools)
    reported: list[ToolCall] = []
    for chunk in chunks:
        reported.extend(parser.feed(chunk))
    return reported, parser.finish()


def check(chunks: list[str], case: dict[str, Any]) -> None:
    whole = parse(case["raw"], tools=case.get("tools"))
    reported, result = stream(chunks, case.get("tools"))
    assert summary(result) == summary(whole)
    assert reported == list(whole.calls[: len(reported)])


@pytest.mark.parametrize(("name", "case"), FIXTURES, ids=[name for name, _ in FIXTURES])
def test_every_two_chunk_split_of_every_fixture_streams_to_the_whole_result(
    name: str, case: dict[str, Any]
) -> None:
    raw = case["raw"]
    for cut in range(len(raw) + 1):
        check([raw[:cut], raw[cut:]], case)


@pytest.mark.parametrize(("name", "case"), FIXTURES, ids=[name for name, _ in FIXTURES])
def test_every_fixture_streamed_character_by_character_gives_the_whole_result(
    name: str, case: dict[str, Any]
) -> None:
    check(list(case["raw"]), case)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(FIXTURES), st.data())
def test_any_chunking_of_any_fixture_gives_the_whole_result(
    fixture: tuple[str, Any], data: st.DataObject
) -> None:
    _, case = fixture
    raw = case["raw"]
    cuts = sorted(data.draw(st.sets(st.integers(min_value=0, max_value=len(raw)), max_size=12)))
    bounds = [0, *cuts, len(raw)]
    check([raw[a:b] for a, b in itertools.pairwise(bounds)], case)


def test_a_sealed_call_is_reported_as_soon_as_its_closing_token_arrives() -> None:
    parser = StreamParser(in_reasoning=False)
    assert parser.feed('<tool_call>\n{"name": "f", "arguments": {"a": 1}}') == []
    assert parser.progress().calls == ()
    assert parser.feed("\n</tool_call>") == [ToolCall(name="f", arguments={"a": 1})]
    assert parser.feed("\n<tool_call>\n") == []
    assert parser.progress().calls == (ToolCall(name="f", arguments={"a": 1}),)


def test_an_unsealed_last_call_is_only_final_at_finish() -> None:
    parser = StreamParser(in_reasoning=False)
    assert parser.feed('[TOOL_CALLS]f[ARGS]{"a": 1}') == []
    assert parser.progress().provisional == (ToolCall(name="f", arguments={"a": 1}),)
    assert parser.feed('[TOOL_CALLS]g[ARGS]{"b": 2}') == [ToolCall(name="f", arguments={"a": 1})]
    assert [c.name for c in parser.finish().calls] == ["f", "g"]


def test_a_truncated_stream_finishes_with_the_complete_calls_and_a_parse_error() -> None:
    parser = StreamParser()
    parser.feed('<tool_call>{"name": "f", "arguments": {}}</tool_call><tool_call>{"name": "g", "argu')
    result = parser.finish()
    assert [c.name for c in result.calls] == ["f"]
    assert result.error is not None and result.error.category == "parse_error"


# -- provider events ---------------------------------------------------------------------------------

ARGUMENTS = json.dumps({"city": "Zürich", "days": 3, "tags": ["a", "b"]})


def chat_chunks(pieces: list[str]) -> list[dict[str, Any]]:
    first = {
        "index": 0,
        "id": "call_1",
        "type": "function",
        "function": {"name": "get_weather", "arguments": ""},
    }
    chunks: list[dict[str, Any]] = [{"choices": [{"delta": {"role": "assistant", "tool_calls": [first]}}]}]
    for piece in pieces:
        entry = {"index": 0, "function": {"arguments": piece}}
        chunks.append({"choices": [{"delta": {"tool_calls": [entry]}, "finish_reason": None}]})
    chunks.append({"choices": [{"delta": {}, "finish_reason": "tool_calls"}]})
    return chunks


def test_openai_chat_argument_deltas_split_anywhere_give_the_same_call() -> None:
    expected = ToolCall(name="get_weather", arguments=json.loads(ARGUMENTS), id="call_1")
    for cut in range(len(ARGUMENTS) + 1):
        parser = StreamParser()
        reported = [
            c for chunk in chat_chunks([ARGUMENTS[:cut], ARGUMENTS[cut:]]) for c in parser.feed(chunk)
        ]
        assert reported == [expected]
        assert parser.finish().calls == (expected,)


def test_openai_chat_parallel_calls_complete_when_the_next_index_starts() -> None:
    parser = StreamParser()
    first = {"index": 0, "id": "a", "function": {"name": "f", "arguments": '{"x": 1}'}}
    second = {"index": 1, "id": "b", "function": {"name": "g", "arguments": "{}"}}
    assert parser.feed({"choices": [{"delta": {"tool_calls": [first]}}]}) == []
    assert parser.feed({"choices": [{"delta": {"tool_calls": [second]}}]}) == [
        ToolCall(name="f", arguments={"x": 1}, id="a")
    ]
    parser.feed({"choices": [{"delta": {}, "finish_reason": "tool_calls"}]})  # the stream's end
    assert [c.name for c in parser.finish().calls] == ["f", "g"]


def test_responses_argument_deltas_give_the_call_on_done() -> None:
    parser = StreamParser()
    item = {"type": "function_call", "name": "get_weather", "call_id": "call_9", "arguments": ""}
    parser.feed({"type": "response.output_item.added", "output_index": 1, "item": item})
    for piece in (ARGUMENTS[:7], ARGUMENTS[7:]):
        assert (
            parser.feed({"type": "response.function_call_arguments.delta", "output_index": 1, "delta": piece})
            == []
        )
    done = parser.feed(
        {"type": "response.function_call_arguments.done", "output_index": 1, "arguments": ARGUMENTS}
    )
    assert done == [ToolCall(name="get_weather", arguments=json.loads(ARGUMENTS), id="call_9")]


def test_anthropic_input_json_deltas_give_the_call_on_block_stop() -> None:
    parser = StreamParser()
    parser.feed({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})
    parser.feed(
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Checking."}}
    )
    block = {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}}
    parser.feed({"type": "content_block_start", "index": 1, "content_block": block})
    for piece in (ARGUMENTS[:3], ARGUMENTS[3:20], ARGUMENTS[20:]):
        delta = {"type": "input_json_delta", "partial_json": piece}
        assert parser.feed({"type": "content_block_delta", "index": 1, "delta": delta}) == []
    stop = parser.feed({"type": "content_block_stop", "index": 1})
    assert stop == [ToolCall(name="get_weather", arguments=json.loads(ARGUMENTS), id="toolu_1")]
    parser.feed({"type": "message_delta", "delta": {"stop_reason": "tool_use"}})
    parser.feed({"type": "message_stop"})
    result = parser.finish()
    assert (result.content, result.calls) == ("Checking.", tuple(stop))


def test_cut_off_event_arguments_are_a_parse_error_not_a_call() -> None:
    parser = StreamParser()
    block = {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}}
    parser.feed({"type": "content_block_start", "index": 0, "content_block": block})
    delta = {"type": "input_json_delta", "partial_json": '{"city": "Zü'}
    parser.feed({"type": "content_block_delta", "index": 0, "delta": delta})
    assert parser.feed({"type": "content_block_stop", "index": 0}) == []
    result = parser.finish()
    assert result.calls == ()
    assert result.error is not None and result.error.details["reason"] == "truncated"


def test_chat_content_deltas_without_structured_calls_are_read_as_raw_text() -> None:
    parser = StreamParser()
    for piece in ("<tool_call>", '{"name": "f", ', '"arguments": {}}', "</tool_call>"):
        parser.feed({"choices": [{"delta": {"content": piece}}]})
    parser.feed({"choices": [{"delta": {}, "finish_reason": "stop"}]})
    assert parser.finish().calls == (ToolCall(name="f", arguments={}),)


def test_mixing_raw_text_and_events_in_one_stream_is_a_usage_error() -> None:
    parser = StreamParser()
    parser.feed("hello")
    with pytest.raises(TypeError):
        parser.feed({"choices": []})
