"""A model message none of whose calls runs (a ``parse_error``) is traced as the model is answered:
one ``observation`` event under each call id the session answers, carrying the category, recovery
and message the model reads, and the ``rendered`` event naming exactly those ids. A reader that
joins the trace's observations to the answered calls by call id finds each once."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace import Runtime, parse
from actionspace.parse import StreamParser
from actionspace.session import PROVIDERS, Provider, Turn
from tests.parse.test_w77_text_call_ids import ID0, ID1, ID2, kimi
from tests.session.w47_world import answered_ids

A = json.dumps({"host": "a"})
B = json.dumps({"host": "b"})


def _message(provider: Provider, calls: list[tuple[str, str]]) -> Any:
    """``provider``'s message proposing ``ping`` once per (call id, arguments text)."""
    if provider == "openai_chat":
        entries = [
            {"id": i, "type": "function", "function": {"name": "ping", "arguments": a}} for i, a in calls
        ]
        return {"role": "assistant", "content": None, "tool_calls": entries}
    if provider == "openai_responses":
        return [{"type": "function_call", "call_id": i, "name": "ping", "arguments": a} for i, a in calls]
    if provider == "gemini":
        return {
            "role": "model",
            "parts": [{"functionCall": {"id": i, "name": "ping", "args": _input(a)}} for i, a in calls],
        }
    blocks = [{"type": "tool_use", "id": i, "name": "ping", "input": _input(a)} for i, a in calls]
    return {"role": "assistant", "content": blocks}


def _input(text: str) -> Any:
    """An Anthropic ``input`` (a Gemini ``args``): the object whole arguments are, else the cut text
    as it came."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def _handle(provider: Provider, output: Any, *, is_async: bool = False) -> tuple[Turn, list[Any], list[str]]:
    """The turn of ``output``, the trace events it added, and the hosts actually pinged."""
    rt = Runtime("memory://")
    sent: list[str] = []

    @rt.tool(effect="external", idempotency="none")
    def ping(host: str) -> str:
        """Send one ping."""
        sent.append(host)
        return "pong"

    s = rt.session(run_id="conv", provider=provider)
    s.user("ping the hosts")
    before = len(rt.trace.events("conv"))
    turn = asyncio.run(s.ahandle(output)) if is_async else s.handle(output)
    events = rt.trace.events("conv")[before:]
    rt.close()
    return turn, events, sent


def _assert_traced_as_answered(provider: Provider, turn: Turn, events: list[Any]) -> list[str]:
    """The observation events carry exactly the answered call ids, once each, with what the model
    reads; the rendered event names the same ids. Returns the ids."""
    answered = answered_ids(provider, turn.messages)
    observed = [e for e in events if e.kind == "observation"]
    assert [e.call_id for e in observed] == answered
    by_id = {o.call_id: o for o in turn.observations}
    for event in observed:
        error = by_id[event.call_id].error
        assert error is not None and error.category == "parse_error"
        assert event.data["status"] == "error" and event.data["category"] == error.category
        assert event.data["recovery"] == list(error.recovery)
        assert event.data["message"] == error.message[:300]
    (rendered,) = [e for e in events if e.kind == "rendered"]
    assert rendered.data["results"] == answered
    return answered


@pytest.mark.parametrize("is_async", [False, True], ids=["handle", "ahandle"])
@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_message_whose_arguments_are_all_cut_traces_each_answered_call_id(
    provider: Provider, is_async: bool
) -> None:
    msg = _message(provider, [("c1", A[:5]), ("c2", B[:3]), ("c3", "{")])
    turn, events, sent = _handle(provider, msg, is_async=is_async)
    assert sent == []
    assert _assert_traced_as_answered(provider, turn, events) == ["c1", "c2", "c3"]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_one_cut_call_among_whole_ones_traces_every_call_id_of_the_message(provider: Provider) -> None:
    msg = _message(provider, [("c1", A), ("c2", B[:6]), ("c3", A)])
    turn, events, sent = _handle(provider, msg)
    assert sent == []
    assert _assert_traced_as_answered(provider, turn, events) == ["c1", "c2", "c3"]


@pytest.mark.parametrize("is_async", [False, True], ids=["handle", "ahandle"])
@pytest.mark.parametrize("how", ["text", "stream", "output", "finish"])
def test_raw_text_cut_mid_call_traces_each_of_its_call_ids(how: str, is_async: bool) -> None:
    text = kimi((ID0, A), (ID1, A), (ID2, A))[:-40]  # the third call's arguments cut
    stream = StreamParser()
    for i in range(0, len(text), 7):
        stream.feed(text[i : i + 7])
    stream.end("length")
    handed = {"text": text, "stream": stream, "output": stream.output(), "finish": stream.finish()}[how]
    turn, events, sent = _handle("openai_chat", handed, is_async=is_async)
    assert sent == []
    assert _assert_traced_as_answered("openai_chat", turn, events) == [ID0, ID1, ID2]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_failed_parse_result_handed_over_is_traced_under_the_ids_it_knows(provider: Provider) -> None:
    result = parse(kimi((ID0, A), (ID1, "{bad")))
    assert result.error is not None
    turn, events, sent = _handle(provider, result)
    assert sent == []
    assert _assert_traced_as_answered(provider, turn, events) == [ID0, ID1]


@pytest.mark.parametrize(
    "text",
    [
        "<|start|>assistant<|channel|>commentary to=functions.ping <|constrain|>json<|message|>" + A[:6],
        '<tool_call>{"name": "ping", "arguments": {"host": ',
    ],
    ids=["harmony", "hermes"],
)
def test_cut_text_without_call_ids_is_traced_under_the_id_it_is_answered_under(text: str) -> None:
    turn, events, sent = _handle("openai_chat", text)
    assert sent == []
    assert _assert_traced_as_answered("openai_chat", turn, events) == ["conv:parse"]


def test_a_message_shape_the_parser_does_not_read_is_traced_under_its_one_answer() -> None:
    converse = {"toolUse": {"toolUseId": "g1", "name": "ping", "input": {"host": "a"}}}  # Bedrock's
    turn, events, sent = _handle("openai_chat", converse)
    assert sent == []
    assert _assert_traced_as_answered("openai_chat", turn, events) == ["conv:parse"]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_one_id_given_to_two_calls_is_traced_once_as_it_is_answered_once(provider: Provider) -> None:
    turn, events, sent = _handle(provider, _message(provider, [("c1", A), ("c1", B)]))
    assert sent == [] and len(turn.observations) == 2
    assert _assert_traced_as_answered(provider, turn, events) == ["c1"]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    provider=st.sampled_from(PROVIDERS),
    cuts=st.lists(st.one_of(st.none(), st.integers(1, len(A) - 1)), min_size=1, max_size=4),
)
def test_any_cut_of_a_message_traces_the_ids_it_answers(provider: Provider, cuts: list[int | None]) -> None:
    """Whatever calls of the message are cut (None: whole), the trace's observations are the
    answered call ids, once each, when none of the calls ran."""
    calls = [(f"id{k}", A if cut is None else A[:cut]) for k, cut in enumerate(cuts)]
    turn, events, sent = _handle(provider, _message(provider, calls))
    if sent:  # every call whole: they ran, and nothing here is a parse error
        assert all(cut is None for cut in cuts)
        return
    assert _assert_traced_as_answered(provider, turn, events) == [i for i, _ in calls]
