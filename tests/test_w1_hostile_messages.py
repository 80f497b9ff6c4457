"""Hostile model messages through every whole-message entry point: whatever a model (or a relay)
sends — odd ids, odd names, broken or huge arguments, streams that stop mid-call, mixed valid and
invalid calls — each proposal ends as an observation (a typed ``ActionError`` when refused), never an
exception, never ``internal``; a malformed message runs none of its calls; and a session answers
each distinct call id once, with a string id, in messages the provider SDK types accept."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace import Runtime, ToolCall
from actionspace.errors import CATEGORIES
from actionspace.session import PROVIDERS, Provider
from actionspace.types import Observation
from tests.test_w1_duplicate_call_ids import answered_ids


def runtime() -> tuple[Runtime, list[int]]:
    rt = Runtime("memory://")
    sent: list[int] = []

    @rt.tool(effect="write", writes=["box:{x}"])
    def put(x: int) -> int:
        """Put x in its box."""
        sent.append(x)
        return x

    return rt, sent


def assert_typed(out: list[Observation] | tuple[Observation, ...]) -> None:
    assert out
    for obs in out:
        assert obs.status in ("ok", "error", "partial")
        if obs.status == "error":
            assert obs.error is not None and obs.error.category in CATEGORIES
            assert obs.error.category != "internal", obs.error.message
        json.dumps(obs.to_dict())


@pytest.mark.parametrize("ident", [5, 5.5, True, [1], {"a": 1}, b"c1", 10**30], ids=repr)
def test_a_tool_call_whose_id_is_not_text_is_a_parse_error_and_does_not_run(ident: Any) -> None:
    rt, sent = runtime()
    call = ToolCall(name="put", arguments={"x": 1}, id=ident)
    for raw in (call, [call], [ToolCall(name="put", arguments={"x": 2}, id="ok"), call]):
        for out in (rt.call_all(raw), asyncio.run(rt.acall_all(raw))):
            assert_typed(out)
            for obs in out:
                assert obs.error is not None and obs.error.category == "parse_error"
                assert obs.error.details["reason"] == "invalid_id"
        single = rt.call(raw)
        assert single.error is not None and single.error.category == "parse_error"
        assert asyncio.run(rt.acall(raw)).status == "error"
    assert sent == []


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_session_never_answers_with_an_id_that_is_not_text(provider: Provider) -> None:
    rt, sent = runtime()
    s = rt.session(provider=provider)
    s.user("put 1")
    turn = s.handle(ToolCall(name="put", arguments={"x": 1}, id=[1]))  # type: ignore[arg-type]
    assert_typed(turn.observations)
    assert all(isinstance(i, str) for i in answered_ids(provider, turn.messages)) and sent == []


# -- generated messages ---------------------------------------------------------------------------

IDS = st.one_of(
    st.none(),
    st.sampled_from(["", " ", "c1", "c1", "c2", "\x00", "\u202e", "x" * 5000, "é"]),
    st.text(max_size=4),
    st.integers(),
    st.floats(allow_nan=True),
    st.booleans(),
    st.lists(st.integers(), max_size=1),
)
NAMES = st.one_of(
    st.sampled_from(["put", "put", "put@1", "nope", "", " put ", "\x00"]), st.none(), st.integers()
)
TEXTS = st.sampled_from(
    [
        '{"x": 1}',
        '{"x": 2}',
        '{"x": ',
        "",
        "{",
        "[1]",
        "null",
        '{"x": 1e999}',
        '{"x": NaN}',
        '{"x": "\\ud800"}',
        '{"x": 1}}',
        '{"x":' + "9" * 400 + "}",
        "\x00",
        '{"x": 1, "x": 2}',
    ]
)
ARGUMENTS = st.one_of(
    TEXTS,
    st.none(),
    st.integers(),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.sampled_from(["x", "y", "\x00"]), st.integers(), max_size=2),
)


def chat(calls: list[tuple[Any, Any, Any]]) -> dict[str, Any]:
    entries = [{"id": i, "type": "function", "function": {"name": n, "arguments": a}} for i, n, a in calls]
    return {"role": "assistant", "content": None, "tool_calls": entries}


def responses(calls: list[tuple[Any, Any, Any]]) -> list[dict[str, Any]]:
    return [{"type": "function_call", "call_id": i, "name": n, "arguments": a} for i, n, a in calls]


def anthropic(calls: list[tuple[Any, Any, Any]]) -> dict[str, Any]:
    blocks = [{"type": "tool_use", "id": i, "name": n, "input": _loaded(a)} for i, n, a in calls]
    return {"role": "assistant", "content": blocks}


def chat_stream(calls: list[tuple[Any, Any, Any]], cut: int | None, finish: str | None) -> list[Any]:
    chunks: list[Any] = []
    for index, (i, n, a) in enumerate(calls):
        entry = {"index": index, "id": i, "type": "function", "function": {"name": n, "arguments": a}}
        chunks.append({"choices": [{"index": 0, "delta": {"tool_calls": [entry]}, "finish_reason": None}]})
    if finish is not None:
        chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    return chunks[:cut]


def anthropic_stream(calls: list[tuple[Any, Any, Any]], cut: int | None, finish: str | None) -> list[Any]:
    events: list[Any] = []
    for index, (i, n, a) in enumerate(calls):
        block = {"type": "tool_use", "id": i, "name": n, "input": {}}
        events.append({"type": "content_block_start", "index": index, "content_block": block})
        delta = {"type": "input_json_delta", "partial_json": a}
        events.append({"type": "content_block_delta", "index": index, "delta": delta})
        events.append({"type": "content_block_stop", "index": index})
    if finish is not None:
        events.append({"type": "message_delta", "delta": {"stop_reason": finish}})
    return events[:cut]


def _loaded(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        return value


@st.composite
def messages(draw: st.DrawFn) -> Any:
    calls = draw(st.lists(st.tuples(IDS, NAMES, ARGUMENTS), min_size=1, max_size=4))
    shape = draw(
        st.sampled_from(["chat", "responses", "anthropic", "chat_stream", "anthropic_stream", "text"])
    )
    if shape == "chat":
        raw: Any = chat(calls)
    elif shape == "responses":
        raw = responses(calls)
    elif shape == "anthropic":
        raw = anthropic(calls)
    elif shape in ("chat_stream", "anthropic_stream"):
        texts = [(i, n, a if isinstance(a, str) else json.dumps(a)) for i, n, a in calls]
        cut = draw(st.one_of(st.none(), st.integers(min_value=1, max_value=12)))
        finish = draw(st.sampled_from([None, "tool_calls", "length", "tool_use", "max_tokens"]))
        raw = (chat_stream if shape == "chat_stream" else anthropic_stream)(texts, cut, finish)
    else:
        raw = json.dumps(chat(calls), default=str)[: draw(st.integers(min_value=1, max_value=400))]
    return raw


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw=messages(), provider=st.sampled_from(PROVIDERS), asynchronous=st.booleans())
def test_any_generated_message_ends_in_typed_observations_and_well_formed_answers(
    raw: Any, provider: Provider, asynchronous: bool
) -> None:
    rt, _ = runtime()
    out = asyncio.run(rt.acall_all(raw)) if asynchronous else rt.call_all(raw)
    assert_typed(out)
    if any(o.error is not None and o.error.category == "parse_error" for o in out):
        assert all(o.status == "error" for o in out)  # a malformed message runs none of its calls
    s = rt.session(provider=provider)
    s.user("put")
    turn = asyncio.run(s.ahandle(raw)) if asynchronous else s.handle(raw)
    if turn.observations:
        assert_typed(turn.observations)
        ids = answered_ids(provider, turn.messages)
        assert all(isinstance(i, str) and i for i in ids)
        assert len(ids) == len(set(ids))
        answered = {o.call_id for o in turn.observations}
        if provider == "gemini":  # a minted id is not sent back: Gemini pairs those answers by order
            assert len(turn.messages) == 1 and len(turn.messages[0]["parts"]) == len(answered)
            answered = {i for i in answered if not re.search(r":(?:n[0-9]+|parse)\Z", i)}
        assert set(ids) == answered
