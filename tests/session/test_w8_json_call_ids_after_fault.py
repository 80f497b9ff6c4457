"""A session handed raw model text whose JSON calls carry ids (Hermes ``<tool_call>`` bodies, fenced
JSON, a Mistral list) and do not all parse answers the parse error once under each id the text
carries, the broken call's and those after it included, runs none of its calls, and is not done."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from actionspace import Runtime
from actionspace.session import PROVIDERS, Provider, Turn
from tests.parse.test_w8_json_call_ids_after_fault import TEXTS, bad, fence, ok
from tests.session.w47_world import answered_ids


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


@pytest.mark.parametrize("is_async", [False, True], ids=["handle", "ahandle"])
@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize(("case", "text", "ids"), TEXTS, ids=[c[0] for c in TEXTS])
def test_failed_json_call_text_is_answered_under_each_id_it_carries(
    case: str, text: str, ids: list[str], provider: Provider, is_async: bool
) -> None:
    turn, sent = _handle(provider, text, is_async=is_async)
    assert sent == [] and not turn.done
    assert [o.call_id for o in turn.observations] == ids
    assert all(o.error is not None and o.error.category == "parse_error" for o in turn.observations)
    assert answered_ids(provider, turn.messages) == ids


@pytest.mark.parametrize("is_async", [False, True], ids=["handle", "ahandle"])
def test_a_cut_hermes_completion_is_answered_under_each_id(is_async: bool) -> None:
    text = f"<tool_call>{ok('h1')}</tool_call><tool_call>{bad('h2')}</tool_call>" + fence(json.dumps({}))
    message = {"role": "assistant", "content": text}
    completion = {
        "object": "chat.completion",
        "choices": [{"index": 0, "message": message, "finish_reason": "length"}],
    }
    turn, sent = _handle("openai_chat", completion, is_async=is_async)
    assert sent == [] and not turn.done
    assert answered_ids("openai_chat", turn.messages) == ["h1", "h2"]
    assert all(o.error is not None and o.error.details["reason"] == "cut_off" for o in turn.observations)
