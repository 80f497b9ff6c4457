"""A stream of provider events that stops with no finish signal at all (no ``finish_reason``, no
``message_delta``/``message_stop``, no ``response.completed``) lost its end: the connection dropped,
and the provider may have been about to say the token limit cut it. Its calls are ``cut_off``,
however whole they look, in ``finish()``, ``parse(stream.output())`` and the session alike; a
streamed plain answer without its end stays an answer."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace import Runtime, parse
from actionspace.parse import StreamParser

A = json.dumps({"to": "bob", "text": "late"})


def _chunk(delta: dict[str, Any], reason: str | None = None) -> dict[str, Any]:
    return {
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": delta, "finish_reason": reason}],
    }


CHAT = [
    _chunk({"role": "assistant", "content": ""}),
    _chunk({"tool_calls": [{"index": 0, "id": "c1", "type": "function", "function": {"name": "send_sms"}}]}),
    _chunk({"tool_calls": [{"index": 0, "function": {"arguments": A}}]}),
]
CHAT_END = [_chunk({}, "tool_calls")]
ANTHROPIC = [
    {"type": "message_start", "message": {"id": "m", "content": []}},
    {
        "type": "content_block_start",
        "index": 0,
        "content_block": {"type": "tool_use", "id": "t1", "name": "send_sms"},
    },
    {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": A}},
    {"type": "content_block_stop", "index": 0},
]
ANTHROPIC_END = [{"type": "message_delta", "delta": {"stop_reason": "tool_use"}}, {"type": "message_stop"}]
_ITEM = {"type": "function_call", "id": "fc_1", "call_id": "f1", "name": "send_sms", "arguments": ""}
RESPONSES = [
    {"type": "response.output_item.added", "output_index": 0, "item": _ITEM},
    {"type": "response.function_call_arguments.delta", "output_index": 0, "delta": A},
    {"type": "response.function_call_arguments.done", "output_index": 0, "arguments": A},
    {
        "type": "response.output_item.done",
        "output_index": 0,
        "item": {**_ITEM, "arguments": A, "status": "completed"},
    },
]
RESPONSES_END = [{"type": "response.completed", "response": {"id": "r", "status": "completed"}}]
STREAMS = [
    ("chat", CHAT, CHAT_END, "c1"),
    ("anthropic", ANTHROPIC, ANTHROPIC_END, "t1"),
    ("responses", RESPONSES, RESPONSES_END, "f1"),
]


def _fed(events: list[dict[str, Any]]) -> StreamParser:
    stream = StreamParser()
    for event in events:
        stream.feed(event)
    return stream


@pytest.mark.parametrize(("shape", "events", "end", "call_id"), STREAMS, ids=[s[0] for s in STREAMS])
def test_a_stream_that_stops_without_its_finish_signal_keeps_no_call(
    shape: str, events: list[dict[str, Any]], end: list[dict[str, Any]], call_id: str
) -> None:
    stream = _fed(events)
    result = stream.finish()
    assert result.calls == () and result.error is not None
    assert result.error.category == "parse_error" and result.error.details["reason"] == "cut_off"
    assert result.error.recovery == ("re_emit_call",)
    assert parse(stream.output()) == result
    whole = _fed(events + end).finish()  # the same stream with its end: the call stands
    assert whole.error is None and [c.id for c in whole.calls] == [call_id]


@pytest.mark.parametrize(("shape", "events", "end", "call_id"), STREAMS, ids=[s[0] for s in STREAMS])
def test_the_session_runs_nothing_of_a_stream_without_its_end_and_answers_its_call_id(
    shape: str, events: list[dict[str, Any]], end: list[dict[str, Any]], call_id: str
) -> None:
    sent: list[str] = []
    rt = Runtime("memory://")

    @rt.tool(effect="external")
    def send_sms(to: str, text: str) -> str:
        """Send a text message."""
        sent.append(to)
        return "sent"

    s = rt.session(provider="openai_chat")
    s.user("text Bob")
    (obs,) = s.handle(_fed(events).output()).observations
    assert sent == [] and obs.call_id == call_id
    assert obs.error is not None and obs.error.details["reason"] == "cut_off"
    rt.close()


def test_a_streamed_plain_answer_without_its_end_stays_an_answer() -> None:
    stream = _fed([_chunk({"role": "assistant", "content": "It is sunny"})])
    result = stream.finish()
    assert result.error is None and result.calls == () and result.content == "It is sunny"


@settings(max_examples=80, deadline=None)
@given(shape=st.sampled_from(STREAMS), cut=st.integers(0, 8))
def test_every_prefix_of_a_stream_without_its_end_runs_no_call(shape: Any, cut: int) -> None:
    _, events, _, _ = shape
    stream = _fed(events[: min(cut, len(events))])
    assert stream.finish().calls == ()
    assert parse(stream.output()).calls == ()
