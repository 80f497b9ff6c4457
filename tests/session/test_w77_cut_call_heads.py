"""A session handed an output cut off by the token limit as an unmarked call began (``{"na``,
```` ```json\\n{"na ````, ``[send_sms``) runs nothing, is not done, and asks the model to re-emit
the call; the same words with a normal finish are the answer."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from actionspace import ActionError, Runtime
from actionspace.parse import StreamParser
from actionspace.session import Turn
from tests.session.w47_world import answered_ids

_REEMIT = ActionError.of("parse_error", "x").recovery


def _handle(output: Any, *, is_async: bool = False) -> tuple[Turn, list[str]]:
    sent: list[str] = []
    rt = Runtime("memory://")

    @rt.tool(effect="external")
    def send_sms(to: str, text: str) -> str:
        """Send a text message."""
        sent.append(to)
        return "sent"

    s = rt.session(run_id="conv", provider="openai_chat")
    s.user("text Bob")
    turn = asyncio.run(s.ahandle(output)) if is_async else s.handle(output)
    rt.close()
    return turn, sent


def _completion(text: str, finish: str) -> dict[str, Any]:
    choice = {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}
    return {"object": "chat.completion", "choices": [choice]}


HEADS = ['{"na', '[{"name"', '```json\n{"na', "[send_sms"]


@pytest.mark.parametrize("is_async", [False, True], ids=["handle", "ahandle"])
@pytest.mark.parametrize("text", HEADS)
def test_a_cut_output_that_began_an_unmarked_call_is_no_answer(text: str, is_async: bool) -> None:
    stream = StreamParser()
    stream.feed(text)
    stream.end("length")
    for output in (_completion(text, "length"), stream):
        turn, sent = _handle(output, is_async=is_async)
        assert sent == [] and not turn.done
        (obs,) = turn.observations
        assert obs.error is not None and obs.error.details["reason"] == "cut_off"
        assert obs.error.recovery == _REEMIT
        assert answered_ids("openai_chat", turn.messages) == ["conv:parse"]


@pytest.mark.parametrize("text", HEADS)
def test_the_same_words_finished_normally_are_the_answer(text: str) -> None:
    turn, sent = _handle(_completion(text, "stop"))
    assert turn.done and turn.content == text and sent == []
