"""A session and outputs that end before a call could be read.

* A message cut off by the token limit as its first call began (``…<tool_ca``) is no answer: the
  turn is not done, and the model reads a ``parse_error`` (``cut_off``) asking it to re-emit the call.
* A failed ``ParseResult`` handed to the session (``s.handle(stream.finish())``) answers every call
  id it still knows (the calls read before the fault, the call at the fault, the calls of a cut
  stream): OpenAI wants a ``tool`` message for each ``tool_call_id`` of the assistant message and
  Anthropic a ``tool_result`` for each ``tool_use`` id, or the next request is refused.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from actionspace import ActionError, Runtime, parse
from actionspace.parse import ParseResult, StreamParser
from actionspace.session import Provider, Turn
from tests.session.test_w54_handed_shapes import anthropic_events, chat_events, responses_events
from tests.session.w47_world import answered_ids

_REEMIT = ActionError.of("parse_error", "x").recovery
A = {"to": "bob", "text": "late"}


def _world() -> tuple[Runtime, list[str]]:
    sent: list[str] = []
    rt = Runtime("memory://")

    @rt.tool(effect="external")
    def send_sms(to: str, text: str) -> str:
        """Send a text message."""
        sent.append(to)
        return "sent"

    return rt, sent


def _handle(provider: Provider, output: Any, *, is_async: bool = False) -> tuple[Turn, list[str]]:
    rt, sent = _world()
    s = rt.session(run_id="conv", provider=provider)
    s.user("text Bob")
    turn = asyncio.run(s.ahandle(output)) if is_async else s.handle(output)
    rt.close()
    return turn, sent


@pytest.mark.parametrize("is_async", [False, True], ids=["handle", "ahandle"])
@pytest.mark.parametrize("tail", ["<tool_ca", "<", "[TOOL_C", "<|python_ta", "<｜tool▁calls"])
def test_a_raw_stream_cut_as_its_first_call_began_is_not_an_answer(tail: str, is_async: bool) -> None:
    stream = StreamParser()
    for piece in ("I'll text ", "Bob now.\n", tail):
        stream.feed(piece)
    stream.end("length")
    turn, sent = _handle("openai_chat", stream, is_async=is_async)
    assert sent == [] and not turn.done
    (obs,) = turn.observations
    assert obs.error is not None and obs.error.category == "parse_error"
    assert obs.error.details["reason"] == "cut_off" and obs.error.recovery == _REEMIT
    assert answered_ids("openai_chat", turn.messages) == [obs.call_id]


def test_a_completion_cut_as_its_first_call_began_is_not_an_answer() -> None:
    choice = {
        "index": 0,
        "message": {"role": "assistant", "content": "Sure.\n<tool_call"},
        "finish_reason": "length",
    }
    turn, sent = _handle("openai_chat", {"object": "chat.completion", "choices": [choice]})
    assert sent == [] and not turn.done
    assert turn.observations[0].error is not None
    assert turn.observations[0].error.details["reason"] == "cut_off"


def test_the_same_words_with_a_normal_finish_are_the_answer() -> None:
    stream = StreamParser()
    stream.feed("Type <tool_ca")
    stream.end("stop")
    turn, sent = _handle("openai_chat", stream)
    assert turn.done and turn.content == "Type <tool_ca" and sent == []


def _chat_message(*entries: tuple[str, str, str]) -> dict[str, Any]:
    calls = [{"id": i, "type": "function", "function": {"name": n, "arguments": a}} for i, n, a in entries]
    return {"role": "assistant", "content": None, "tool_calls": calls}


GOOD = json.dumps(A)
FAILED: list[tuple[str, Provider, Any, list[str]]] = [
    (
        "chat, second call's arguments cut",
        "openai_chat",
        _chat_message(("c1", "send_sms", GOOD), ("c2", "send_sms", GOOD[:9])),
        ["c1", "c2"],
    ),
    (
        "anthropic, second call unnamed",
        "anthropic",
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "t1", "name": "send_sms", "input": A},
                {"type": "tool_use", "id": "t2", "name": "", "input": {}},
            ],
        },
        ["t1", "t2"],
    ),
    (
        "responses, repeated id",
        "openai_responses",
        [
            {"type": "function_call", "id": "fc1", "call_id": "f1", "name": "send_sms", "arguments": GOOD},
            {"type": "function_call", "id": "fc2", "call_id": "f1", "name": "send_sms", "arguments": GOOD},
        ],
        ["f1"],
    ),
    ("chat stream cut", "openai_chat", chat_events([("c1", A), ("c2", A)], finish="length"), ["c1", "c2"]),
    (
        "anthropic stream cut",
        "anthropic",
        anthropic_events([("t1", A), ("t2", A)], stop="max_tokens"),
        ["t1", "t2"],
    ),
    ("responses stream cut", "openai_responses", responses_events([("f1", A)], status="incomplete"), ["f1"]),
]


def _failed_parse(output: Any) -> ParseResult:
    """The parse of ``output``: a stream's ``finish()`` when it is a stream's events."""
    first = output[0] if isinstance(output, list) else {}
    if "object" in first or str(first.get("type", "")).startswith(("response.", "message_")):
        stream = StreamParser()
        for event in output:
            stream.feed(event)
        return stream.finish()
    return parse(output)


@pytest.mark.parametrize("is_async", [False, True], ids=["handle", "ahandle"])
@pytest.mark.parametrize(("case", "provider", "output", "ids"), FAILED, ids=[c[0] for c in FAILED])
def test_a_failed_parse_handed_to_the_session_answers_every_call_id_it_knows(
    case: str, provider: Provider, output: Any, ids: list[str], is_async: bool
) -> None:
    result = _failed_parse(output)
    assert result.error is not None
    turn, sent = _handle(provider, result, is_async=is_async)
    assert sent == [] and not turn.done
    assert [o.call_id for o in turn.observations] == ids
    assert all(o.error is not None and o.error.category == "parse_error" for o in turn.observations)
    assert answered_ids(provider, turn.messages) == ids
    raw_turn, _ = _handle(provider, output)  # the raw output answers the same ids
    assert answered_ids(provider, raw_turn.messages) == ids


def test_a_failed_parse_that_knows_no_call_id_is_answered_once_under_the_run() -> None:
    result = parse('<tool_call>{"name": "send_sms", "arguments": {"to": ')
    assert result.error is not None
    turn, sent = _handle("openai_chat", result)
    (obs,) = turn.observations
    assert sent == [] and obs.call_id == "conv:parse"
