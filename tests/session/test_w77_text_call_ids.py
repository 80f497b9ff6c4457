"""A session handed raw model text whose calls carry ids (Kimi K2 ``functions.NAME:INDEX``, Mistral
``[CALL_ID]``) and do not all parse answers each of those ids once, as it answers a failed
``ParseResult`` of the same text, runs none of its calls, and is not done. Text in a format
without ids in its text is still answered once, under ``<run>:parse``."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from actionspace import Runtime, parse
from actionspace.parse import StreamParser
from actionspace.session import PROVIDERS, Provider, Turn
from tests.parse.test_w77_text_call_ids import ID0, ID1, ID2, kimi
from tests.session.w47_world import answered_ids

A = json.dumps({"to": "bob", "text": "late"})


def _handle(provider: Provider, output: Any, *, is_async: bool) -> tuple[Turn, list[str]]:
    sent: list[str] = []
    rt = Runtime("memory://")

    @rt.tool(effect="external")
    def send_sms(to: str, text: str) -> str:
        """Send a text message."""
        sent.append(to)
        return "sent"

    s = rt.session(run_id="conv", provider=provider)
    s.user("text Bob")
    turn = asyncio.run(s.ahandle(output)) if is_async else s.handle(output)
    rt.close()
    return turn, sent


# (case, raw text, the ids the provider holds calls for)
FAILED = [
    ("kimi second call cut", kimi((ID0, A), (ID1, A[:9])), [ID0, ID1]),
    ("kimi first call broken", kimi((ID0, "{oops}")), [ID0]),
    ("kimi repeated id", kimi((ID0, A), (ID0, A)), [ID0]),
    ("mistral call id", f"[TOOL_CALLS]send_sms[CALL_ID]a1B2c3D4e[ARGS]{A[:7]}", ["a1B2c3D4e"]),
]


@pytest.mark.parametrize("is_async", [False, True], ids=["handle", "ahandle"])
@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize(("case", "text", "ids"), FAILED, ids=[c[0] for c in FAILED])
def test_failed_raw_text_with_call_ids_is_answered_under_each_id_as_its_parse_result_is(
    case: str, text: str, ids: list[str], provider: Provider, is_async: bool
) -> None:
    turn, sent = _handle(provider, text, is_async=is_async)
    assert sent == [] and not turn.done
    assert [o.call_id for o in turn.observations] == ids
    assert all(o.error is not None and o.error.category == "parse_error" for o in turn.observations)
    assert answered_ids(provider, turn.messages) == ids
    parsed_turn, _ = _handle(provider, parse(text), is_async=is_async)
    assert answered_ids(provider, parsed_turn.messages) == ids


@pytest.mark.parametrize("is_async", [False, True], ids=["handle", "ahandle"])
def test_raw_text_answers_the_ids_of_calls_after_its_fault_too(is_async: bool) -> None:
    text = kimi((ID0, A), (ID1, "{bad"), (ID2, A))
    turn, sent = _handle("openai_chat", text, is_async=is_async)
    assert sent == [] and answered_ids("openai_chat", turn.messages) == [ID0, ID1, ID2]


@pytest.mark.parametrize("is_async", [False, True], ids=["handle", "ahandle"])
@pytest.mark.parametrize("how", ["stream", "output", "finish"])
def test_a_cut_kimi_stream_is_answered_under_each_of_its_ids(how: str, is_async: bool) -> None:
    text = kimi((ID0, A), (ID1, A))
    stream = StreamParser()
    for i in range(0, len(text), 6):
        stream.feed(text[i : i + 6])
    stream.end("length")
    handed = {"stream": stream, "output": stream.output(), "finish": stream.finish()}[how]
    turn, sent = _handle("openai_chat", handed, is_async=is_async)
    assert sent == [] and not turn.done
    assert answered_ids("openai_chat", turn.messages) == [ID0, ID1]
    assert all(o.error is not None and o.error.details["reason"] == "cut_off" for o in turn.observations)


@pytest.mark.parametrize("is_async", [False, True], ids=["handle", "ahandle"])
@pytest.mark.parametrize(
    "text",
    ['<tool_call>{"name": "send_sms", "arguments": {"to": ', "<|python_start|>[send_sms(to='bob'"],
)
def test_failed_raw_text_without_ids_is_answered_once_under_the_run(text: str, is_async: bool) -> None:
    turn, sent = _handle("openai_chat", text, is_async=is_async)
    (obs,) = turn.observations
    assert sent == [] and obs.call_id == "conv:parse"
    assert answered_ids("openai_chat", turn.messages) == ["conv:parse"]


def test_whole_kimi_text_runs_its_calls_under_their_ids() -> None:
    turn, sent = _handle("openai_chat", kimi((ID0, A), (ID1, A)), is_async=False)
    assert sent == ["bob", "bob"]
    assert answered_ids("openai_chat", turn.messages) == [ID0, ID1]
