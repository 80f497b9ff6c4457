"""OpenAI-compatible chat streams as serving engines send them, read as the same output whole.

Text Generation Inference 3.x sends the whole tool name again on every chunk of a call, with an
empty ``id`` (its snapshots ``integration-tests/models/__snapshots__/test_tools_llama/
test_flash_llama_grammar_tools_stream.json`` and ``…_sea_creatures_stream_required.json`` show a
last chunk carrying ``"name": "get_n_day_weather_forecast"`` beside ``"arguments": "}"`` and
``"id": ""``). Appended piece by piece, the name came out as ``get_n_day_weather_forecast`` twice
or more over, a tool no one offered. TGI 2.x streamed ``tool_calls`` as one object rather than a
list (``…_sea_creatures_stream_function_object.json``): the call was dropped without a word, where
the same message whole is a ``parse_error``. The shapes below are written for these tests.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from actionspace.parse import StreamParser, parse

ARGS = {"location": "Brooklyn, NY", "format": "fahrenheit", "num_days": 3}
NAME = "get_n_day_weather_forecast"


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def _tgi_stream(args: dict[str, Any], pieces: int) -> list[dict[str, Any]]:
    """Every chunk of the call repeats its name and an empty id, as TGI 3.x sends it."""
    text = json.dumps(args)
    step = max(1, -(-len(text) // pieces))
    chunks = []
    for i in range(0, len(text), step):
        entry = {
            "index": 0,
            "id": "",
            "type": "function",
            "function": {"name": NAME, "arguments": text[i : i + step]},
        }
        chunks.append(_chunk({"role": "assistant", "content": None, "tool_calls": [entry]}))
    return [*chunks, _chunk({}, finish="stop")]


def _whole(tool_calls: object) -> dict[str, Any]:
    message = {"role": "assistant", "content": None, "tool_calls": tool_calls}
    return {
        "object": "chat.completion",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
    }


@pytest.mark.parametrize("pieces", [2, 3, 7, 40])
def test_a_name_repeated_on_every_chunk_is_the_name_once(pieces: int) -> None:
    events = _tgi_stream(ARGS, pieces)
    stream = StreamParser()
    shown = [call for event in events for call in stream.feed(event)]
    result = stream.finish()
    assert result.error is None
    assert [(c.name, c.arguments) for c in result.calls] == [(NAME, ARGS)]
    assert shown == list(result.calls)
    assert parse(events).calls == result.calls


def test_an_empty_call_id_reads_as_none_streamed_as_it_does_whole() -> None:
    # TGI sends "id": "" streamed and "id": "0" whole; an empty id names no call, so the runtime
    # gives it one, as it does for a message whose entry carries "".
    streamed = parse(_tgi_stream(ARGS, 3))
    whole = parse(
        _whole([{"id": "", "type": "function", "function": {"name": NAME, "arguments": json.dumps(ARGS)}}])
    )
    assert whole.error is None and streamed.error is None
    assert [c.id for c in whole.calls] == [None]
    assert [(c.name, c.arguments, c.id) for c in streamed.calls] == [(NAME, ARGS, None)]


def test_a_name_given_whole_then_arguments_alone_is_unchanged() -> None:
    # vLLM and SGLang: the name once, then argument pieces with no name
    events = [
        _chunk({"role": "assistant", "content": ""}),
        _chunk({"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "f"}}]}),
        _chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"a": '}}]}),
        _chunk({"tool_calls": [{"index": 0, "function": {"arguments": "1}"}}]}),
        _chunk({}, finish="tool_calls"),
    ]
    result = parse(events)
    assert result.error is None
    assert [(c.name, c.arguments, c.id) for c in result.calls] == [("f", {"a": 1}, "call_1")]


@pytest.mark.parametrize(
    "tool_calls",
    [
        {"index": 0, "id": "", "type": "function", "function": {"name": NAME, "arguments": json.dumps(ARGS)}},
        ["get_weather"],
    ],
    ids=["an_object", "a_string_entry"],
)
def test_tool_calls_that_are_not_a_list_of_objects_are_a_parse_error_streamed_as_whole(
    tool_calls: object,
) -> None:
    whole = parse(_whole(tool_calls))
    assert whole.error is not None and whole.error.details["reason"] == "invalid_tool_calls"
    events = [_chunk({"role": "assistant", "tool_calls": tool_calls}), _chunk({}, finish="tool_calls")]
    stream = StreamParser()
    shown = [call for event in events for call in stream.feed(event)]
    result = stream.finish()
    assert shown == [] and result.calls == ()
    assert result.error is not None
    assert result.error.category == "parse_error"
    assert result.error.details["reason"] == "invalid_tool_calls"
    assert "re_emit_call" in result.error.recovery
    assert parse(events).error == result.error


def test_a_well_formed_call_beside_a_bad_entry_does_not_run_alone() -> None:
    good = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    events = [
        _chunk({"role": "assistant", "tool_calls": [good]}),
        _chunk({"tool_calls": [7]}),
        _chunk({}, finish="tool_calls"),
    ]
    stream = StreamParser()
    assert [call for event in events for call in stream.feed(event)] == []
    result = stream.finish()
    assert result.calls == ()
    assert result.error is not None and result.error.details["reason"] == "invalid_tool_calls"
    assert parse(events).error == result.error
