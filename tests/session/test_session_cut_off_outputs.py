"""A model whose output was cut off by its token limit: the provider says so beside the calls
(``finish_reason: "length"``, ``stop_reason: "max_tokens"``, ``status: "incomplete"``), and the
calls it holds may look whole while they are not (Anthropic's SDK reads a cut ``tool_use`` input
as far as it got). None of them runs; each call id is answered ``parse_error``."""

from __future__ import annotations

import json
from typing import Any

import pytest
from anthropic.types import Message
from openai.types.chat import ChatCompletion
from openai.types.responses import Response

from actionspace import ActionError, Runtime, parse
from actionspace.session import Provider

_REEMIT = ActionError.of("parse_error", "cut off").recovery


def _runtime() -> tuple[Runtime, list[dict[str, str]]]:
    rt = Runtime("memory://")
    sent: list[dict[str, str]] = []

    @rt.tool(effect="external")
    def send_email(to: str, body: str) -> dict[str, bool]:
        """Send an email."""
        sent.append({"to": to, "body": body})
        return {"sent": True}

    return rt, sent


def _entry(call_id: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": "send_email", "arguments": json.dumps(arguments)},
    }


def _completion(finish_reason: str) -> dict[str, Any]:
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            _entry("call_1", {"to": "bob@example.com", "body": "Running late"}),
            _entry("call_2", {"to": "carol@example.com", "body": "I'll be there at"}),
        ],
    }
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "gpt-test",
        "choices": [{"index": 0, "finish_reason": finish_reason, "message": message}],
    }


def _anthropic(stop_reason: str) -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": [
            {"type": "text", "text": "Sending both."},
            {
                "type": "tool_use",
                "id": "toolu_1",
                "name": "send_email",
                "input": {"to": "bob@example.com", "body": "Late"},
            },
            {"type": "tool_use", "id": "toolu_2", "name": "send_email", "input": {"to": "carol@exa"}},
        ],
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }


def _item(call_id: str, arguments: dict[str, Any], status: str) -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": f"fc_{call_id}",
        "call_id": call_id,
        "name": "send_email",
        "arguments": json.dumps(arguments),
        "status": status,
    }


def _response(status: str, last_item: str) -> dict[str, Any]:
    return {
        "id": "resp_1",
        "object": "response",
        "created_at": 0,
        "model": "gpt-test",
        "status": status,
        "incomplete_details": {"reason": "max_output_tokens"} if status == "incomplete" else None,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "output": [
            _item("fc1", {"to": "bob@example.com", "body": "Late"}, "completed"),
            _item("fc2", {"to": "carol@example.com", "body": "I"}, last_item),
        ],
    }


CUT: list[tuple[Provider, Any, tuple[str, ...]]] = [
    ("openai_chat", _completion("length"), ("call_1", "call_2")),
    ("openai_chat", ChatCompletion.model_validate(_completion("length")), ("call_1", "call_2")),
    ("anthropic", _anthropic("max_tokens"), ("toolu_1", "toolu_2")),
    ("anthropic", Message.model_validate(_anthropic("max_tokens")), ("toolu_1", "toolu_2")),
    ("openai_responses", _response("incomplete", "incomplete"), ("fc1", "fc2")),
    ("openai_responses", Response.model_validate(_response("incomplete", "incomplete")), ("fc1", "fc2")),
    ("openai_responses", _response("incomplete", "incomplete")["output"], ("fc1", "fc2")),
]


@pytest.mark.parametrize(("provider", "output", "ids"), CUT)
def test_a_cut_off_output_runs_none_of_its_calls_and_answers_each_call_id(
    provider: Provider, output: Any, ids: tuple[str, ...]
) -> None:
    rt, sent = _runtime()
    s = rt.session(provider=provider)
    s.user("tell Bob and Carol I'm late")
    turn = s.handle(output)
    assert sent == []
    assert [o.call_id for o in turn.observations] == list(ids)
    assert {o.error.category for o in turn.observations if o.error is not None} == {"parse_error"}
    assert all(o.status == "error" for o in turn.observations)
    assert all(o.error is not None and o.error.recovery == _REEMIT for o in turn.observations)


@pytest.mark.parametrize(("provider", "output", "ids"), CUT)
def test_parse_says_an_output_was_cut_off_and_keeps_none_of_its_calls(
    provider: Provider, output: Any, ids: tuple[str, ...]
) -> None:
    parsed = parse(output)
    assert parsed.error is not None and parsed.error.category == "parse_error"
    assert parsed.error.details["reason"] == "cut_off"
    assert parsed.calls == ()


COMPLETE: list[tuple[Provider, Any]] = [
    ("openai_chat", _completion("tool_calls")),
    ("anthropic", _anthropic("tool_use")),
    ("openai_responses", _response("completed", "completed")),
]


@pytest.mark.parametrize(("provider", "output"), COMPLETE)
def test_a_whole_output_with_the_same_calls_runs_them(provider: Provider, output: Any) -> None:
    rt, sent = _runtime()
    s = rt.session(provider=provider)
    s.user("tell Bob and Carol I'm late")
    turn = s.handle(output)
    answers = [(o.status, None if o.error is None else o.error.category) for o in turn.observations]
    if provider == "anthropic":  # its second call lacks a body: refused by validation, not parsing
        assert answers == [("ok", None), ("error", "invalid_arguments")]
    else:
        assert answers == [("ok", None), ("ok", None)]
    assert sent[0]["to"] == "bob@example.com"
