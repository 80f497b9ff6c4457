"""A message whose calls share an id runs none of them; its answers name each id once."""

from __future__ import annotations

import json
from typing import Any

import pytest

from actionspace import Runtime
from actionspace.discovery.render import Provider, render_results


def _message() -> dict[str, Any]:
    call = {"type": "function", "function": {"name": "echo", "arguments": json.dumps({"text": "hi"})}}
    return {
        "role": "assistant",
        "tool_calls": [{"id": "c1", **call}, {"id": "c1", **call}, {"id": "c2", **call}],
    }


@pytest.mark.parametrize("provider", ["openai_chat", "openai_responses", "anthropic"])
def test_results_of_a_message_repeating_an_id_answer_each_id_once(provider: Provider) -> None:
    rt = Runtime("memory://")
    ran: list[str] = []

    @rt.tool(effect="none")
    def echo(text: str) -> str:
        """Echo."""
        ran.append(text)
        return text

    out = rt.call_all(_message())
    assert ran == []
    assert [o.error.category for o in out if o.error is not None] == ["parse_error"] * len(out)
    messages = render_results(out, provider)
    if provider == "anthropic":
        ids = [block["tool_use_id"] for block in messages[0]["content"]]
    elif provider == "openai_chat":
        ids = [m["tool_call_id"] for m in messages]
    else:
        ids = [m["call_id"] for m in messages]
    assert sorted(ids) == sorted(set(ids))
    assert set(ids) == {o.call_id for o in out}
