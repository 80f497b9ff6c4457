"""An output known to be cut off (finish reason ``length`` / ``max_tokens``) gets one verdict however
it arrives: a completion holding its text, a message, a chunk stream, or raw text streamed to a
:class:`StreamParser` that :meth:`~StreamParser.end` told ``length`` (its :meth:`finish` and the
:meth:`output` it hands on). Text cut inside a JSON object is ``cut_off`` whatever key came first:
JSON keys come in any order, so ``{"arguments": {"city": "Pa`` (and ``{"city": "Pa``) may be a call
cut inside its arguments, and a cut call is never taken as an answer."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace import parse
from actionspace.parse import ParseResult, StreamParser
from tests.parse.samples import TEXT_SAMPLES

A = {"city": "Paris", "unit": "c"}
CALLS: dict[str, str] = {
    **TEXT_SAMPLES,
    "json arguments first": json.dumps({"arguments": A, "name": "get_weather"}),
    "json id first": json.dumps({"id": "c1", "arguments": A, "name": "get_weather"}),
    "json list arguments first": json.dumps([{"arguments": A, "name": "get_weather"}]),
    "fenced arguments first": "```json\n" + json.dumps({"arguments": A, "name": "get_weather"}) + "\n```",
    "hermes with ids": "".join(
        f"<tool_call>{json.dumps({'name': 'get_weather', 'arguments': A, 'id': i})}</tool_call>"
        for i in ("h1", "h2")
    ),
    "answer then json": 'Here: {"name": "get_weather", "arguments": {"city": "Paris"}}',
}


def _completion(text: str) -> dict[str, Any]:
    choice = {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "length"}
    return {"object": "chat.completion", "choices": [choice]}


def _chunks(text: str, size: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [
        {
            "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": {"content": text[i : i + size]}}],
        }
        for i in range(0, len(text), size)
    ]
    out.append(
        {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]}
    )
    return out


def _stream(text: str, cuts: list[int], reason: str = "length") -> StreamParser:
    stream = StreamParser()
    points = sorted({0, len(text), *(c for c in cuts if c < len(text))})
    for a, b in itertools.pairwise(points):
        stream.feed(text[a:b])
    stream.end(reason)
    return stream


def _verdict(result: ParseResult) -> tuple[object, ...]:
    error = result.error
    calls = tuple((c.name, json.dumps(c.arguments, sort_keys=True), c.id) for c in result.calls)
    return calls, None if error is None else (error.category, error.details.get("reason"))


def _verdicts(text: str, cuts: list[int]) -> dict[str, tuple[object, ...]]:
    stream = _stream(text, cuts)
    return {
        "completion": _verdict(parse(_completion(text))),
        "message": _verdict(parse({"role": "assistant", "content": text, "stop_reason": "max_tokens"})),
        "chunks": _verdict(parse(_chunks(text, 4))),
        "raw stream": _verdict(stream.finish()),
        "raw stream output": _verdict(parse(stream.output())),
    }


@pytest.mark.parametrize(
    "text",
    [
        '{"city": "Pa',
        '{"arguments": {"city": "Pa',
        '{"id": "c1", "arguments": {"ci',
        '  {"ci',
        '{"jsonrpc": "2.0", "method": "tools/call", "params": {"name": "get_weather", "arguments": {"ci',
        '[{"arguments": {"city": "Paris"}, "name": "get_wea',
        '```json\n{"arguments": {"city": "Pa',
        '<think>Weather.</think>\n{"arguments": {"city": "Pa',
    ],
)
def test_a_cut_inside_an_unfinished_json_object_is_cut_off_on_every_path(text: str) -> None:
    for how, verdict in _verdicts(text, [3, 9]).items():
        assert verdict == ((), ("parse_error", "cut_off")), (how, text)


@pytest.mark.parametrize(
    "text",
    ['{"city": "Paris"}', "[1, 2", "[1] Smith et al.", 'On it. {"ci', "Done", '{"city": "Paris"} and "more'],
)
def test_a_cut_answer_that_is_no_unfinished_json_object_gets_one_verdict_everywhere(text: str) -> None:
    verdicts = _verdicts(text, [2])
    assert len(set(verdicts.values())) == 1, verdicts
    assert verdicts["completion"] == ((), None)


@settings(max_examples=500, deadline=None)
@given(
    case=st.sampled_from(sorted(CALLS)),
    cut_at=st.integers(0, 1_000),
    cuts=st.lists(st.integers(1, 1_000), max_size=4),
)
def test_any_cut_of_any_call_text_gets_the_same_verdict_on_every_path(
    case: str, cut_at: int, cuts: list[int]
) -> None:
    whole = CALLS[case]
    text = whole[: min(cut_at, len(whole))]
    verdicts = _verdicts(text, cuts)
    assert len(set(verdicts.values())) == 1, (case, text[-60:], verdicts)
    assert verdicts["completion"][0] == ()  # a cut output runs none of its calls


@pytest.mark.parametrize("case", sorted(CALLS))
def test_every_cut_point_of_each_call_text_gets_the_same_verdict_on_every_path(case: str) -> None:
    whole = CALLS[case]
    for end in range(len(whole) + 1):
        verdicts = _verdicts(whole[:end], [end // 2])
        assert len(set(verdicts.values())) == 1, (case, whole[:end][-60:], verdicts)


def test_without_a_cut_an_unfinished_json_answer_is_read_as_before() -> None:
    text = '{"city": "Pa'
    done = {
        "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
    }
    assert parse(done).error is None and parse(done).content == text
    assert _stream(text, [], reason="stop").finish().error == parse(text).error
