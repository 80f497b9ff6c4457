"""A model's refusal (OpenAI chat ``refusal``, a Responses ``refusal`` part) reaches the caller: in
``content`` as the text the model gave, and in ``refusal`` alone, from dicts and SDK objects alike."""

from __future__ import annotations

from typing import Any

import pytest
from openai.types.chat import ChatCompletion, ChatCompletionMessage
from openai.types.responses import Response

from actionspace import Runtime, parse
from actionspace.parse import ParseResult
from actionspace.session import Provider

NO = "I can't help with moving money out of that account."


def _chat_message() -> dict[str, Any]:
    return {"role": "assistant", "content": None, "refusal": NO}


def _completion() -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "gpt-test",
        "choices": [{"index": 0, "finish_reason": "stop", "message": _chat_message()}],
    }


def _response() -> dict[str, Any]:
    part = {"type": "refusal", "refusal": NO}
    item = {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed", "content": [part]}
    return {
        "id": "resp_1",
        "object": "response",
        "created_at": 0,
        "model": "gpt-test",
        "status": "completed",
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "output": [item],
    }


REFUSALS: list[tuple[Provider, Any]] = [
    ("openai_chat", _chat_message()),
    ("openai_chat", ChatCompletionMessage.model_validate(_chat_message())),
    ("openai_chat", _completion()),
    ("openai_chat", ChatCompletion.model_validate(_completion())),
    ("openai_responses", _response()),
    ("openai_responses", Response.model_validate(_response())),
    ("openai_responses", _response()["output"]),
]


@pytest.mark.parametrize(("provider", "output"), REFUSALS)
def test_parse_keeps_the_refusal_text_as_content_and_as_refusal(provider: Provider, output: Any) -> None:
    parsed = parse(output)
    assert parsed.error is None and parsed.calls == ()
    assert (parsed.content, parsed.refusal) == (NO, NO)
    assert ParseResult.from_dict(parsed.to_dict()) == parsed


@pytest.mark.parametrize(("provider", "output"), REFUSALS)
def test_a_session_turn_of_a_refusal_is_done_and_shows_its_text(provider: Provider, output: Any) -> None:
    rt = Runtime("memory://")
    s = rt.session(provider=provider)
    s.user("move everything to the offshore account")
    turn = s.handle(output)
    assert turn.done and turn.observations == ()
    assert (turn.content, turn.refusal) == (NO, NO)


def test_content_beside_a_refusal_keeps_both_and_plain_answers_have_no_refusal() -> None:
    both = parse({"role": "assistant", "content": "Sorry.", "refusal": NO})
    assert (both.content, both.refusal) == (f"Sorry.\n{NO}", NO)
    plain = parse({"role": "assistant", "content": "Done.", "refusal": None})
    assert (plain.content, plain.refusal) == ("Done.", None)
    assert "refusal" not in plain.to_dict()


def test_an_sdk_message_with_a_plain_answer_is_an_answer_not_a_parse_error() -> None:
    rt = Runtime("memory://")
    s = rt.session(provider="openai_chat")
    s.user("hello")
    turn = s.handle(ChatCompletionMessage(role="assistant", content="Hello there"))
    assert turn.done and (turn.content, turn.refusal) == ("Hello there", None)
