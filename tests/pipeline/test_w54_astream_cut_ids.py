"""``Runtime.astream`` of a message whose calls cannot run answers each of its call ids, as
``call_all`` does (an id given twice answered once): a provider refuses the next request while a
call id of the message is unanswered, and refuses two answers to one id."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from actionspace import Runtime

A = json.dumps({"to": "bob", "text": "late"})


def _world(sent: list[str]) -> Runtime:
    rt = Runtime("memory://")

    @rt.tool(effect="external")
    def send_sms(to: str, text: str) -> str:
        """Send a text message."""
        sent.append(to)
        return "sent"

    return rt


def _entry(call_id: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": "send_sms", "arguments": arguments}}


CUT_COMPLETION = {
    "object": "chat.completion",
    "choices": [
        {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": None,
                "tool_calls": [_entry("c1", A), _entry("c2", A)],
            },
            "finish_reason": "length",
        }
    ],
}
CUT_ANTHROPIC = {
    "role": "assistant",
    "content": [
        {"type": "tool_use", "id": "t1", "name": "send_sms", "input": {"to": "bob", "text": "x"}},
        {"type": "tool_use", "id": "t2", "name": "send_sms", "input": {"to": "ann", "text": "y"}},
    ],
    "stop_reason": "max_tokens",
}
DUPLICATE_IDS = {"role": "assistant", "content": None, "tool_calls": [_entry("d1", A), _entry("d1", A)]}


async def _all(rt: Runtime, raw: Any) -> list[Any]:
    return [obs async for obs in rt.astream(raw)]


@pytest.mark.parametrize(
    ("raw", "ids"),
    [(CUT_COMPLETION, ["c1", "c2"]), (CUT_ANTHROPIC, ["t1", "t2"]), (DUPLICATE_IDS, ["d1"])],
    ids=["chat cut by length", "anthropic cut by max_tokens", "one id twice"],
)
def test_astream_answers_each_call_id_of_a_message_that_cannot_run_once(raw: Any, ids: list[str]) -> None:
    sent: list[str] = []
    rt = _world(sent)
    streamed = asyncio.run(_all(rt, raw))
    assert [o.call_id for o in streamed] == ids
    assert all(o.error is not None and o.error.category == "parse_error" for o in streamed)
    assert [o.call_id for o in rt.call_all(raw)] == list(dict.fromkeys(ids))  # call_all: each id once
    assert sent == []
    rt.close()


def test_astream_of_raw_text_that_cannot_run_answers_once() -> None:
    sent: list[str] = []
    rt = _world(sent)
    (obs,) = asyncio.run(_all(rt, '<tool_call>{"name": "send_sms", "arguments": {"to": '))
    assert obs.error is not None and obs.error.category == "parse_error"
    assert sent == []
    rt.close()
