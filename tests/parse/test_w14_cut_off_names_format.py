"""An output the provider cut off is a ``cut_off`` fault whose message and ``details["format"]``
name the format the output was written in: a model (or the code driving it) told that its
Anthropic message was an ``openai_chat`` one looks for the fault in the wrong place."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace.parse import parse

CUT_STOPS = ("max_tokens", "model_context_window_exceeded", "refusal")


def _anthropic(stop: str, blocks: list[dict[str, Any]], *, typed: bool = True) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": blocks, "stop_reason": stop}
    if typed:
        message.update(id="msg_01", type="message", model="claude-x", stop_sequence=None)
    return message


def _use(cid: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": cid, "name": "send_sms", "input": args}


@pytest.mark.parametrize("stop", CUT_STOPS)
@pytest.mark.parametrize("typed", [True, False])
@pytest.mark.parametrize("as_json", [False, True])
def test_an_anthropic_message_cut_off_says_anthropic(stop: str, typed: bool, as_json: bool) -> None:
    blocks = [{"type": "text", "text": "sending"}, _use("toolu_1", {"to": "+1", "text": "hi"})]
    message = _anthropic(stop, blocks, typed=typed)
    result = parse(json.dumps(message) if as_json else message)
    assert result.error is not None
    assert result.error.details["reason"] == "cut_off"
    assert result.error.details["format"] == "anthropic"
    assert result.error.message.startswith("anthropic: ")
    assert "openai_chat" not in result.error.message
    assert result.format == "anthropic"
    assert result.calls == ()
    assert result.error.details["call_ids"] == ["toolu_1"]


@pytest.mark.parametrize("stop", CUT_STOPS)
def test_an_anthropic_message_cut_off_in_a_list_says_anthropic(stop: str) -> None:
    message = _anthropic(stop, [_use("toolu_1", {"to": "+1"})])
    result = parse([message])
    assert result.error is not None and result.error.details["format"] == "anthropic"
    assert result.error.message.startswith("anthropic: ")


def test_a_chat_completion_cut_off_still_says_openai_chat() -> None:
    completion = {
        "choices": [
            {
                "index": 0,
                "finish_reason": "length",
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                    ],
                },
            }
        ]
    }
    result = parse(completion)
    assert result.error is not None and result.error.details["format"] == "openai_chat"
    assert result.error.message.startswith("openai_chat: ")


@settings(max_examples=60, deadline=None)
@given(
    stop=st.sampled_from(CUT_STOPS),
    texts=st.lists(st.text(max_size=40), max_size=3),
    ids=st.lists(
        st.from_regex(r"toolu_[A-Za-z0-9]{1,12}", fullmatch=True), min_size=1, max_size=4, unique=True
    ),
)
def test_any_cut_anthropic_message_with_calls_names_anthropic(
    stop: str, texts: list[str], ids: list[str]
) -> None:
    blocks: list[dict[str, Any]] = [{"type": "text", "text": t} for t in texts]
    blocks += [_use(cid, {"n": i}) for i, cid in enumerate(ids)]
    result = parse(_anthropic(stop, blocks))
    assert result.error is not None and result.error.details["reason"] == "cut_off"
    assert result.error.details["format"] == "anthropic"
    assert result.error.message.startswith("anthropic: ")
    assert result.error.details["call_ids"] == ids
