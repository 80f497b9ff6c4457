"""An output the provider ended before the model finished it is no answer: ``Turn.done`` is False.

Anthropic pauses a long turn of its server tools (``stop_reason: "pause_turn"``): the message holds
text and the server tool's blocks but no call of the client's, and the API goes on once the message
is sent back. A session used to report such a turn ``done``, so the documented loop took the paused
text for the final answer. The same holds for a text answer the output token limit cut (Anthropic
``max_tokens``, OpenAI chat ``finish_reason: "length"``, a Responses response ``incomplete`` for its
``max_output_tokens``), in a whole message and in a stream. A stop by a filter or a refusal is final.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from anthropic.types import Message
from hypothesis import given, settings
from hypothesis import strategies as st
from openai.types.chat import ChatCompletion
from openai.types.responses import Response
from pydantic import BaseModel

from actionspace import Runtime, parse
from actionspace.parse import ParseResult, StreamParser
from actionspace.session import Provider

SEARCHING = "Let me search the web for that."
ANSWER = "Oslo is sunny today."


def _runtime() -> Runtime:
    rt = Runtime("memory://")

    @rt.tool(effect="read")
    def weather(city: str) -> str:
        """Today's weather in a city."""
        return "sunny"

    return rt


def _claude(stop: str, text: str = SEARCHING) -> dict[str, Any]:
    """An Anthropic message of text and a server tool's blocks (no call of the client's)."""
    blocks: list[dict[str, Any]] = [{"type": "text", "text": text}]
    if stop == "pause_turn":
        blocks += [
            {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "oslo"}},
            {
                "type": "web_search_tool_result",
                "tool_use_id": "srvtoolu_1",
                "content": [
                    {"type": "web_search_result", "url": "https://x", "title": "x", "encrypted_content": "e"}
                ],
            },
        ]
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": blocks,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }


def _chat(finish: str, text: str = SEARCHING) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "gpt-test",
        "choices": [{"index": 0, "finish_reason": finish, "message": {"role": "assistant", "content": text}}],
    }


def _responses(status: str, reason: str | None, text: str = SEARCHING) -> dict[str, Any]:
    item = {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "completed" if status == "completed" else "incomplete",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }
    return {
        "id": "resp_1",
        "object": "response",
        "created_at": 0,
        "model": "gpt-test",
        "status": status,
        "incomplete_details": {"reason": reason} if reason is not None else None,
        "output": [item],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
    }


# (provider, output as the provider's dict, whether the model finished it, the stop reason read)
CASES: list[tuple[Provider, dict[str, Any], bool, str]] = [
    ("anthropic", _claude("pause_turn"), False, "pause_turn"),
    ("anthropic", _claude("max_tokens"), False, "max_tokens"),
    ("anthropic", _claude("end_turn"), True, "end_turn"),
    ("anthropic", _claude("refusal"), True, "refusal"),
    ("openai_chat", _chat("length"), False, "length"),
    ("openai_chat", _chat("stop"), True, "stop"),
    ("openai_chat", _chat("content_filter"), True, "content_filter"),
    ("openai_responses", _responses("incomplete", "max_output_tokens"), False, "max_output_tokens"),
    ("openai_responses", _responses("incomplete", None), False, "incomplete"),
    ("openai_responses", _responses("incomplete", "content_filter"), True, "content_filter"),
    ("openai_responses", _responses("completed", None), True, "completed"),
]
_SDK: dict[str, type[BaseModel]] = {
    "anthropic": Message,
    "openai_chat": ChatCompletion,
    "openai_responses": Response,
}


def _ids(case: tuple[Provider, dict[str, Any], bool, str]) -> str:
    return f"{case[0]}-{case[3]}"


@pytest.mark.parametrize("shape", ["dict", "sdk", "parse_result"])
@pytest.mark.parametrize("case", CASES, ids=[_ids(c) for c in CASES])
def test_a_turn_is_done_only_when_the_provider_says_the_model_finished(
    case: tuple[Provider, dict[str, Any], bool, str], shape: str
) -> None:
    provider, output, finished, stop = case
    handed: Any = output
    if shape == "sdk":
        handed = _SDK[provider].model_validate(output)
    elif shape == "parse_result":
        handed = ParseResult.from_dict(parse(output).to_dict())  # as a trace keeps it
    rt = _runtime()
    s = rt.session(provider=provider)
    s.user("What's the weather in Oslo?")
    turn = s.handle(handed)
    assert turn.observations == () and turn.messages == []
    assert turn.stop_reason == stop
    assert turn.unfinished is not finished
    assert turn.done is finished
    assert turn.content == SEARCHING
    rt.close()


@pytest.mark.parametrize("case", CASES, ids=[_ids(c) for c in CASES])
def test_the_async_handling_says_the_same(case: tuple[Provider, dict[str, Any], bool, str]) -> None:
    provider, output, finished, stop = case
    rt = _runtime()
    s = rt.session(provider=provider)
    turn = asyncio.run(s.ahandle(output))
    assert (turn.done, turn.unfinished, turn.stop_reason) == (finished, not finished, stop)
    rt.close()


def test_the_documented_loop_sends_a_paused_turn_back_and_reads_the_finished_answer() -> None:
    """``while not (turn := s.handle(reply)).done: messages += [reply, *turn.messages]`` (the README's
    loop) goes on after a pause, and ends with the answer the model finished."""
    rt = _runtime()
    s = rt.session(provider="anthropic")
    asked: list[list[dict[str, Any]]] = []

    def claude(messages: list[dict[str, Any]]) -> dict[str, Any]:
        asked.append(list(messages))
        if len(asked) == 1:
            return _claude("pause_turn")
        return _claude("end_turn", ANSWER)

    messages: list[dict[str, Any]] = [{"role": "user", "content": "What's the weather in Oslo?"}]
    s.user(messages[0]["content"])
    while not (turn := s.handle(reply := claude(messages))).done:
        messages += [reply, *turn.messages]
        assert len(asked) < 5, "the loop never ended"
    assert turn.content == ANSWER and turn.stop_reason == "end_turn"
    assert len(asked) == 2
    assert asked[1][-1]["stop_reason"] == "pause_turn"  # the paused message went back as it was
    rt.close()


def _anthropic_events(stop: str) -> list[dict[str, Any]]:
    return [
        {"type": "message_start", "message": {"id": "msg_1", "role": "assistant", "content": []}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": SEARCHING}},
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": {"type": "server_tool_use", "id": "s"}},
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": "{}"},
        },
        {"type": "content_block_stop", "index": 1},
        {"type": "message_delta", "delta": {"stop_reason": stop}},
        {"type": "message_stop"},
    ]


def _chat_chunks(finish: str) -> list[dict[str, Any]]:
    return [
        {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": SEARCHING}}]},
        {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]},
    ]


def _responses_events(kind: str, status: str, reason: str | None) -> list[dict[str, Any]]:
    details = {"reason": reason} if reason is not None else None
    return [
        {"type": "response.output_text.delta", "output_index": 0, "delta": SEARCHING},
        {"type": kind, "response": {"status": status, "incomplete_details": details}},
    ]


STREAMS: list[tuple[Provider, list[dict[str, Any]], bool, str]] = [
    ("anthropic", _anthropic_events("pause_turn"), False, "pause_turn"),
    ("anthropic", _anthropic_events("max_tokens"), False, "max_tokens"),
    ("anthropic", _anthropic_events("end_turn"), True, "end_turn"),
    ("openai_chat", _chat_chunks("length"), False, "length"),
    ("openai_chat", _chat_chunks("stop"), True, "stop"),
    (
        "openai_responses",
        _responses_events("response.incomplete", "incomplete", "max_output_tokens"),
        False,
        "max_output_tokens",
    ),
    ("openai_responses", _responses_events("response.completed", "completed", None), True, "completed"),
]


@pytest.mark.parametrize("handed", ["parser", "output", "result"])
@pytest.mark.parametrize("stream", STREAMS, ids=[f"{c[0]}-{c[3]}" for c in STREAMS])
def test_a_streamed_output_says_the_same_as_a_whole_one(
    stream: tuple[Provider, list[dict[str, Any]], bool, str], handed: str
) -> None:
    provider, events, finished, stop = stream
    parser = StreamParser()
    for event in events:
        assert parser.feed(event) == []
    assert parser.finish().stop_reason == stop
    assert parse(parser.output()).stop_reason == stop
    rt = _runtime()
    s = rt.session(provider=provider)
    given = {"parser": parser, "output": parser.output(), "result": parser.finish()}[handed]
    turn = s.handle(given)
    assert turn.observations == () and turn.content == SEARCHING
    assert (turn.done, turn.unfinished, turn.stop_reason) == (finished, not finished, stop)
    rt.close()


def test_a_raw_text_stream_the_token_limit_cut_is_not_done() -> None:
    rt = _runtime()
    s = rt.session(provider="openai_chat")
    for reason, finished in (("length", False), ("stop", True)):
        parser = StreamParser()
        parser.feed(SEARCHING)
        parser.end(reason)
        assert parser.finish().stop_reason == reason
        turn = s.handle(parser)
        assert turn.done is finished and turn.content == SEARCHING
    rt.close()


def test_a_paused_turn_with_a_call_runs_the_call_and_is_not_done() -> None:
    """Calls of the client's beside a pause run as any; the turn is not done either way."""
    rt = _runtime()
    s = rt.session(provider="anthropic")
    message = _claude("pause_turn")
    message["content"].append(
        {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Oslo"}}
    )
    turn = s.handle(message)
    assert [o.data for o in turn.observations] == ["sunny"]
    assert not turn.done and turn.unfinished and turn.stop_reason == "pause_turn"
    rt.close()


stops = st.one_of(
    st.sampled_from(["pause_turn", "max_tokens", "length", "end_turn", "stop", "tool_use", "", "incomplete"]),
    st.text(max_size=12),
    st.integers(),
    st.none(),
    st.lists(st.text(max_size=3), max_size=2),
    st.dictionaries(st.text(max_size=3), st.text(max_size=3), max_size=2),
)


@settings(max_examples=150, deadline=None)
@given(stop=stops, calls=st.booleans(), where=st.sampled_from(["anthropic", "chat", "responses"]))
def test_any_stop_value_reads_as_its_string_or_none_and_never_raises(
    stop: Any, calls: bool, where: str
) -> None:
    """Whatever a provider (or a hostile proxy) puts where the stop reason goes, the parse keeps a
    non-empty string as it came, anything else as None, and ``unfinished`` follows it."""
    if where == "anthropic":
        output: Any = _claude("end_turn")
        output["stop_reason"] = stop
        if calls:
            output["content"].append(
                {"type": "tool_use", "id": "t1", "name": "weather", "input": {"city": "x"}}
            )
    elif where == "chat":
        output = _chat("stop")
        output["choices"][0]["finish_reason"] = stop
    else:
        output = _responses("incomplete", None)
        output["incomplete_details"] = {"reason": stop}
    read = parse(output)
    kept = stop if isinstance(stop, str) and stop else None
    if where == "responses" and kept is None:
        kept = "incomplete"  # no reason given: the status says it
    if read.error is None:
        assert read.stop_reason == kept
        assert read.unfinished is (
            kept in ("pause_turn", "max_tokens", "length", "max_output_tokens", "incomplete")
        )
        assert ParseResult.from_dict(read.to_dict()) == read
    else:  # a cut output's calls: refused, the whole input
        assert read.calls == () and read.error.category == "parse_error"
