"""An output the provider cut off inside a call's arguments keeps the provider's stop reason.

A chat completion stopped by the token limit (``finish_reason: "length"``), a Responses output
``incomplete`` and an Anthropic message at ``max_tokens`` whose last call's JSON arguments are cut
off fail to parse (nothing of them runs), and the result must still say why the output ended: a
loop reads ``ParseResult.stop_reason`` (and ``Turn.unfinished``) to ask for a longer output rather
than repair the call. The stop reason was read only after the calls, so the fault in the arguments
left it unread.
"""

from __future__ import annotations

from typing import Any

import pytest

from actionspace.parse import parse

CUT = '{"to": "acct-1", "amount": 1'


def _chat() -> dict[str, Any]:
    call = {"id": "a", "type": "function", "function": {"name": "pay", "arguments": CUT}}
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    return {"choices": [{"index": 0, "finish_reason": "length", "message": message}]}


def _responses() -> dict[str, Any]:
    item = {"type": "function_call", "call_id": "a", "name": "pay", "arguments": CUT}
    return {
        "object": "response",
        "status": "incomplete",
        "incomplete_details": {"reason": "max_output_tokens"},
        "output": [item],
    }


def _anthropic() -> dict[str, Any]:
    block = {"type": "tool_use", "id": "a", "name": "pay", "input": CUT}
    return {"role": "assistant", "stop_reason": "max_tokens", "content": [block]}


@pytest.mark.parametrize(
    ("output", "reason"),
    [(_chat, "length"), (_responses, "max_output_tokens"), (_anthropic, "max_tokens")],
    ids=["openai_chat", "openai_responses", "anthropic"],
)
def test_a_call_cut_off_inside_its_arguments_keeps_the_stop_reason(output: Any, reason: str) -> None:
    parsed = parse(output())
    assert not parsed.calls
    assert parsed.error is not None and parsed.error.category == "parse_error"
    assert parsed.stop_reason is not None and reason in parsed.stop_reason
    assert parsed.unfinished  # what Session's Turn.unfinished reads


def test_the_stop_reason_of_a_whole_output_is_unchanged() -> None:
    whole = _chat()
    whole["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] = CUT + "}"
    whole["choices"][0]["finish_reason"] = "tool_calls"
    parsed = parse(whole)
    assert parsed.error is None and [c.name for c in parsed.calls] == ["pay"]
    assert parsed.stop_reason == "tool_calls"
