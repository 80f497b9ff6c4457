"""A model message with a malformed call among its calls: every call id the model proposed is
answered once, with a ``parse_error``, and none of the message's calls runs."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace import Runtime
from actionspace.session import PROVIDERS, Provider, Turn
from tests.test_session import results

GOOD = json.dumps({"host": "a"})
# (what breaks, the broken call as an (id, name, arguments-text) triple, or a whole raw entry)
OBJECT_ARGUMENTS = ("anthropic", "gemini")  # providers whose calls carry their arguments as an object
BROKEN_ARGUMENTS = ['{"host": "b', "{", '{"host": }', "[1, 2"]


def message(provider: Provider, calls: list[tuple[str, Any, Any]]) -> Any:
    """What a model of ``provider`` emits for ``calls`` = [(call id, name, arguments as sent)]."""
    if provider == "openai_chat":
        entries = [
            {"id": i, "type": "function", "function": {"name": n, "arguments": a}} for i, n, a in calls
        ]
        return {"role": "assistant", "content": None, "tool_calls": entries}
    if provider == "openai_responses":
        return [{"type": "function_call", "call_id": i, "name": n, "arguments": a} for i, n, a in calls]
    if provider == "gemini":
        return {
            "role": "model",
            "parts": [{"functionCall": {"id": i, "name": n, "args": a}} for i, n, a in calls],
        }
    return {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": i, "name": n, "input": a} for i, n, a in calls],
    }


def runtime() -> tuple[Runtime, list[str]]:
    rt = Runtime("memory://")
    sent: list[str] = []

    @rt.tool(effect="external", idempotency="none")
    def ping(host: str) -> str:
        """Send one ping."""
        sent.append(host)
        return "pong"

    return rt, sent


def assert_every_id_answered_with_a_parse_error(provider: Provider, turn: Turn, ids: list[str]) -> None:
    assert [o.call_id for o in turn.observations] == ids
    for obs in turn.observations:
        assert obs.error is not None and obs.error.category == "parse_error"
        assert obs.error.recovery == ("re_emit_call",)
    assert list(results(provider, turn.messages)) == ids


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("broken", BROKEN_ARGUMENTS)
def test_cut_off_arguments_of_one_call_answer_every_call_id_and_run_none(
    provider: Provider, broken: str
) -> None:
    rt, sent = runtime()
    s = rt.session(run_id="conv", provider=provider)
    s.user("ping a, b and c")
    good = GOOD if provider not in OBJECT_ARGUMENTS else {"host": "a"}
    turn = s.handle(message(provider, [("c1", "ping", good), ("c2", "ping", broken), ("c3", "ping", good)]))
    assert_every_id_answered_with_a_parse_error(provider, turn, ["c1", "c2", "c3"])
    assert turn.observations[1].error is not None and turn.observations[1].error.details["id"] == "c2"
    assert sent == []


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_call_without_a_name_answers_every_call_id_of_the_message(provider: Provider) -> None:
    rt, sent = runtime()
    s = rt.session(run_id="conv", provider=provider)
    s.user("ping a")
    good = GOOD if provider not in OBJECT_ARGUMENTS else {"host": "a"}
    turn = asyncio.run(s.ahandle(message(provider, [("c1", "ping", good), ("c2", None, good)])))
    assert_every_id_answered_with_a_parse_error(provider, turn, ["c1", "c2"])
    assert sent == []


def test_a_malformed_sdk_shaped_completion_answers_the_ids_of_its_message() -> None:
    rt, sent = runtime()
    s = rt.session(run_id="conv", provider="openai_chat")
    s.user("ping a and b")
    inner = message("openai_chat", [("call_1", "ping", GOOD), ("call_2", "ping", '{"host": "b')])
    completion = {"id": "chatcmpl-1", "choices": [{"index": 0, "message": inner, "finish_reason": "length"}]}
    turn = s.handle(json.dumps(completion))
    assert_every_id_answered_with_a_parse_error("openai_chat", turn, ["call_1", "call_2"])
    assert sent == []


def test_a_re_emitted_message_after_a_parse_error_runs_each_call_once() -> None:
    rt, sent = runtime()
    s = rt.session(run_id="conv", provider="openai_chat")
    s.user("ping a and b")
    s.handle(message("openai_chat", [("c1", "ping", GOOD), ("c2", "ping", '{"host": "b')]))
    again = s.handle(message("openai_chat", [("c3", "ping", GOOD), ("c4", "ping", '{"host": "b"}')]))
    assert [o.call_id for o in again.observations] == ["c3", "c4"] and all(o.ok for o in again.observations)
    assert sent == ["a", "b"]


ids = st.text(st.characters(codec="utf-8"), min_size=1, max_size=6)
arguments = st.sampled_from([GOOD, '{"host": "b"}', '{"host": "b', "{", "", "null", "[]", '{"host": 1}'])
names = st.sampled_from(["ping", "ping@1", "nope", "", None, 5])


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(PROVIDERS), st.lists(st.tuples(ids, names, arguments), min_size=1, max_size=4))
def test_every_call_id_the_model_proposed_is_answered_once_in_order(
    provider: Provider, proposed: list[tuple[str, Any, str]]
) -> None:
    rt, sent = runtime()
    s = rt.session(run_id="conv", provider=provider)
    s.user("ping")
    if provider in OBJECT_ARGUMENTS:  # an SDK gives ``input``/``args`` as an object; keep bad JSON text
        proposed = [(i, n, _loaded(a)) for i, n, a in proposed]
    turn = s.handle(message(provider, proposed))
    want = [i for i, _, _ in proposed]
    assert [o.call_id for o in turn.observations] == want
    assert list(results(provider, turn.messages)) == list(dict.fromkeys(want))
    failed = any(o.error is not None and o.error.category == "parse_error" for o in turn.observations)
    assert not (failed and sent)  # a message with a malformed call runs none of its calls


def _loaded(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


@pytest.mark.parametrize("provider", PROVIDERS)
def test_outside_a_session_call_and_call_all_answer_every_call_id_of_a_malformed_message(
    provider: Provider,
) -> None:
    from actionspace.discovery import render_results

    rt, sent = runtime()
    good = GOOD if provider not in OBJECT_ARGUMENTS else {"host": "a"}
    raw = message(provider, [("c1", "ping", good), ("c2", "ping", '{"host": '), ("c3", "ping", good)])
    every = rt.call_all(raw)
    assert [o.call_id for o in every] == ["c1", "c2", "c3"]
    assert all(o.error is not None and o.error.category == "parse_error" for o in every)
    grouped = asyncio.run(rt.acall(raw))
    assert [o.call_id for o in grouped.items] == ["c1", "c2", "c3"]
    assert list(results(provider, render_results(grouped, provider))) == ["c1", "c2", "c3"]
    text = rt.call_all('<tool_call>{"name": "ping", "arguments": {"host": ')  # text: no id to answer
    assert len(text) == 1 and text[0].error is not None and text[0].error.category == "parse_error"
    assert sent == []
