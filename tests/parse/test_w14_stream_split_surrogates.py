"""A server that cuts its deltas by UTF-16 units (a JavaScript proxy slicing strings) may end one
delta with the first half of a surrogate pair and begin the next with the second; its JSON events
spell each half as an escape (``"\\ud83d"``, ``"\\ude00"``), so the decoded deltas hold one lone
surrogate each. Joined, they are the one character the model wrote (as the same text sent whole
reads): kept as two lone surrogates, the arguments held text that is not Unicode and the call was
refused, in every provider's stream shape alike."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace.parse import StreamParser, parse

TEXT = "on my way 😀 — 𝔘𝔫𝔦𝔠𝔬𝔡𝔢"
ARGS = json.dumps({"to": "+15550100", "text": TEXT}, ensure_ascii=False)


def _utf16_pieces(text: str, cuts: list[int]) -> list[str]:
    """``text`` cut at UTF-16 unit offsets ``cuts``, each piece as a JSON event decodes it."""
    units = text.encode("utf-16-le")
    bounds = sorted({0, *(2 * c for c in cuts if 0 < 2 * c < len(units)), len(units)})
    return [units[a:b].decode("utf-16-le", "surrogatepass") for a, b in itertools.pairwise(bounds)]


def _splits_a_pair(text: str) -> list[int]:
    """A cut between the halves of each surrogate pair of ``text``, by UTF-16 unit."""
    cuts, at = [], 0
    for ch in text:
        at += 2 if ord(ch) > 0xFFFF else 1
        if ord(ch) > 0xFFFF:
            cuts.append(at - 1)
    return cuts


def _chat(pieces: list[str]) -> list[dict[str, Any]]:
    def chunk(delta: dict[str, Any], reason: str | None = None) -> dict[str, Any]:
        return {"choices": [{"index": 0, "delta": delta, "finish_reason": reason}]}

    head = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "send_sms", "arguments": ""}}
    out = [chunk({"tool_calls": [head]})]
    out += [chunk({"tool_calls": [{"index": 0, "function": {"arguments": p}}]}) for p in pieces]
    return [*out, chunk({}, "tool_calls")]


def _anthropic(pieces: list[str]) -> list[dict[str, Any]]:
    block = {"type": "tool_use", "id": "call_1", "name": "send_sms", "input": {}}
    out: list[dict[str, Any]] = [
        {"type": "message_start", "message": {"id": "m", "content": []}},
        {"type": "content_block_start", "index": 0, "content_block": block},
    ]
    out += [
        {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": p}}
        for p in pieces
    ]
    return [
        *out,
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}},
        {"type": "message_stop"},
    ]


def _responses(pieces: list[str]) -> list[dict[str, Any]]:
    item = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "send_sms", "arguments": ""}
    out: list[dict[str, Any]] = [{"type": "response.output_item.added", "output_index": 0, "item": item}]
    out += [{"type": "response.function_call_arguments.delta", "output_index": 0, "delta": p} for p in pieces]
    return [*out, {"type": "response.completed", "response": {"id": "r", "status": "completed"}}]


SHAPES = {"chat": _chat, "anthropic": _anthropic, "responses": _responses}


@pytest.mark.parametrize("shape", list(SHAPES))
def test_a_surrogate_pair_split_between_argument_deltas_is_one_character(shape: str) -> None:
    events = SHAPES[shape](_utf16_pieces(ARGS, _splits_a_pair(ARGS)))
    stream = StreamParser()
    fed = [c for e in events for c in stream.feed(e)]
    result = stream.finish()
    assert result.error is None, result.error
    assert [c.arguments for c in result.calls] == [{"to": "+15550100", "text": TEXT}]
    if shape != "responses":  # with no ``.done`` event a Responses call completes at the end
        assert fed == list(result.calls)
    assert parse(stream.output()).calls == result.calls


def test_a_surrogate_pair_split_between_raw_text_deltas_is_one_character() -> None:
    text = '<tool_call>{"name": "send_sms", "arguments": ' + ARGS + "}</tool_call>"
    stream = StreamParser()
    for piece in _utf16_pieces(text, _splits_a_pair(text)):
        stream.feed(piece)
    result = stream.finish()
    assert result.error is None
    assert [c.arguments for c in result.calls] == [{"to": "+15550100", "text": TEXT}]
    assert stream.output() == text


def test_content_text_split_inside_a_pair_reads_whole() -> None:
    pieces = _utf16_pieces(TEXT, _splits_a_pair(TEXT))
    events: list[dict[str, Any]] = [
        {"choices": [{"index": 0, "delta": {"content": p}, "finish_reason": None}]} for p in pieces
    ]
    events.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    stream = StreamParser()
    for event in events:
        stream.feed(event)
    assert stream.finish().content == TEXT


def test_a_lone_half_with_nothing_to_pair_stays_as_it_came() -> None:
    events = _chat(['{"to": "+1", "text": "a\ud83d', 'b"}'])
    stream = StreamParser()
    for event in events:
        stream.feed(event)
    (call,) = stream.finish().calls
    assert call.arguments == {"to": "+1", "text": "a\ud83db"}  # for validation to refuse


@settings(max_examples=60, deadline=None)
@given(
    shape=st.sampled_from(list(SHAPES)),
    text=st.text(alphabet=st.sampled_from('a é😀𝔘\n"\\'), max_size=30),
    cuts=st.lists(st.integers(1, 80), max_size=10),
)
def test_any_utf16_cut_reads_as_the_text_sent_whole(shape: str, text: str, cuts: list[int]) -> None:
    args = json.dumps({"to": "+1", "text": text}, ensure_ascii=False)
    stream = StreamParser()
    for event in SHAPES[shape](_utf16_pieces(args, cuts)):
        stream.feed(event)
    result = stream.finish()
    assert result.error is None
    assert [c.arguments for c in result.calls] == [{"to": "+1", "text": text}]
