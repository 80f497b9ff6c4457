"""A session takes model output in every shape a caller holds it: the raw output, the
``StreamParser`` that read it (``s.handle(stream)``, read as ``stream.output()``: a cut message runs
nothing) or the ``ParseResult`` of the stream (``s.handle(stream.finish())``). Each shape gives the
same turn, content and trace as the raw output, for every provider's stream and raw text."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import pytest

from actionspace import Runtime
from actionspace.parse import StreamParser
from actionspace.session import Provider, Turn

A = {"to": "bob", "text": "late"}
B = {"to": "ann", "text": "me too"}


def _chunk(delta: dict[str, Any], reason: str | None = None) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta, "finish_reason": reason}
    return {"object": "chat.completion.chunk", "choices": [choice]}


def chat_events(
    calls: list[tuple[str, dict[str, Any]]], text: str = "", finish: str = "tool_calls"
) -> list[Any]:
    events = [_chunk({"role": "assistant", "content": text})] if text else []
    for index, (call_id, args) in enumerate(calls):
        function = {"name": "send_sms", "arguments": json.dumps(args)}
        events.append(
            _chunk(
                {"tool_calls": [{"index": index, "id": call_id, "type": "function", "function": function}]}
            )
        )
    return [*events, _chunk({}, finish)]


def anthropic_events(
    calls: list[tuple[str, dict[str, Any]]], text: str = "", stop: str = "tool_use"
) -> list[Any]:
    events: list[dict[str, Any]] = [{"type": "message_start", "message": {"id": "m", "content": []}}]
    blocks: list[tuple[str, Any]] = [("text", text)] if text else []
    for index, (kind, value) in enumerate([*blocks, *(("call", c) for c in calls)]):
        start: dict[str, Any]
        delta: dict[str, Any]
        if kind == "text":
            start = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": value}
        else:
            call_id, args = value
            start = {"type": "tool_use", "id": call_id, "name": "send_sms", "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(args)}
        events += [
            {"type": "content_block_start", "index": index, "content_block": start},
            {"type": "content_block_delta", "index": index, "delta": delta},
            {"type": "content_block_stop", "index": index},
        ]
    events.append({"type": "message_delta", "delta": {"stop_reason": stop}, "usage": {}})
    return [*events, {"type": "message_stop"}]


def responses_events(
    calls: list[tuple[str, dict[str, Any]]], text: str = "", status: str = "completed"
) -> list[Any]:
    events: list[dict[str, Any]] = []
    if text:
        events.append({"type": "response.output_text.delta", "output_index": 0, "delta": text})
    for index, (call_id, args) in enumerate(calls, start=1):
        item = {"type": "function_call", "id": f"fc_{call_id}", "call_id": call_id, "name": "send_sms"}
        arguments = json.dumps(args)
        events += [
            {"type": "response.output_item.added", "output_index": index, "item": {**item, "arguments": ""}},
            {"type": "response.function_call_arguments.delta", "output_index": index, "delta": arguments},
            {"type": "response.function_call_arguments.done", "output_index": index, "arguments": arguments},
        ]
    end = "response.incomplete" if status == "incomplete" else "response.completed"
    return [*events, {"type": end, "response": {"id": "r", "status": status}}]


def hermes_text(calls: list[tuple[str, dict[str, Any]]], text: str = "") -> list[Any]:
    body = "".join(
        "<tool_call>" + json.dumps({"name": "send_sms", "arguments": a}) + "</tool_call>" for _, a in calls
    )
    whole = text + body
    return [whole[i : i + 7] for i in range(0, len(whole), 7)] or [""]


SHAPES: list[tuple[str, Provider, Any]] = [
    ("chat", "openai_chat", chat_events),
    ("anthropic", "anthropic", anthropic_events),
    ("responses", "openai_responses", responses_events),
    ("raw text", "openai_chat", hermes_text),
]
HANDED = ["stream", "finish"]


def _world() -> tuple[Runtime, list[str]]:
    sent: list[str] = []
    rt = Runtime("memory://")

    @rt.tool(effect="external")
    def send_sms(to: str, text: str) -> str:
        """Send a text message."""
        sent.append(to)
        return "sent"

    return rt, sent


def _fed(deltas: list[Any]) -> StreamParser:
    stream = StreamParser()
    for delta in deltas:
        stream.feed(delta)
    return stream


def _handle(provider: Provider, handed: Any, *, is_async: bool) -> tuple[Turn, list[str], list[Any]]:
    rt, sent = _world()
    s = rt.session(run_id="conv", provider=provider)
    s.user("text Bob and Ann")
    turn = asyncio.run(s.ahandle(handed)) if is_async else s.handle(handed)
    events = [
        (e.kind, e.data) for e in rt.trace.events("conv") if e.kind not in ("model_output", "run_started")
    ]
    rt.close()
    return turn, sent, events


def _seen(turn: Turn) -> tuple[Any, ...]:
    observations = [
        (o.call_id, o.tool, o.status, o.data, o.error and o.error.category) for o in turn.observations
    ]
    messages = re.sub(r'\\?"fetched_at\\?":\\?"[^"\\]*\\?"', "", json.dumps(turn.messages))  # the clock
    return (observations, messages, turn.content, turn.refusal, turn.done)


def _stripped(events: list[Any]) -> list[Any]:
    return [(kind, data if kind == "parsed" else None) for kind, data in events]


@pytest.mark.parametrize("is_async", [False, True], ids=["handle", "ahandle"])
@pytest.mark.parametrize("how", HANDED)
@pytest.mark.parametrize(("shape", "provider", "build"), SHAPES, ids=[s[0] for s in SHAPES])
def test_a_stream_or_its_parse_handed_to_the_session_runs_its_calls_as_the_raw_output_does(
    shape: str, provider: Provider, build: Any, how: str, is_async: bool
) -> None:
    deltas = build([("c1", A), ("c2", B)], text="On it.")
    stream = _fed(deltas)
    raw_turn, raw_sent, raw_events = _handle(provider, stream.output(), is_async=is_async)
    handed = stream if how == "stream" else stream.finish()
    turn, sent, events = _handle(provider, handed, is_async=is_async)
    assert raw_sent == sent == ["bob", "ann"]
    assert [o.status for o in turn.observations] == ["ok", "ok"]
    assert turn.content == "On it."
    assert _seen(turn) == _seen(raw_turn)
    assert _stripped(events) == _stripped(raw_events)


@pytest.mark.parametrize("is_async", [False, True], ids=["handle", "ahandle"])
@pytest.mark.parametrize("how", HANDED)
@pytest.mark.parametrize(("shape", "provider", "build"), SHAPES, ids=[s[0] for s in SHAPES])
def test_a_streamed_plain_answer_handed_in_any_shape_is_a_finished_turn_with_its_content(
    shape: str, provider: Provider, build: Any, how: str, is_async: bool
) -> None:
    stream = _fed(build([], text="It is sunny in Paris."))
    handed = stream if how == "stream" else stream.finish()
    turn, sent, _ = _handle(provider, handed, is_async=is_async)
    assert turn.done and turn.observations == () and turn.messages == []
    assert turn.content == "It is sunny in Paris." and sent == []


CUT: list[tuple[str, Provider, Any, list[str]]] = [
    ("chat", "openai_chat", chat_events([("c1", A), ("c2", B)], finish="length"), ["c1", "c2"]),
    ("anthropic", "anthropic", anthropic_events([("t1", A)], stop="max_tokens"), ["t1"]),
    ("responses", "openai_responses", responses_events([("f1", A)], status="incomplete"), ["f1"]),
]


@pytest.mark.parametrize(("shape", "provider", "events", "ids"), CUT, ids=[c[0] for c in CUT])
def test_a_cut_stream_handed_itself_runs_nothing_and_answers_each_call_id(
    shape: str, provider: Provider, events: list[Any], ids: list[str]
) -> None:
    turn, sent, _ = _handle(provider, _fed(events), is_async=False)
    assert sent == []
    assert [o.call_id for o in turn.observations] == ids
    assert all(o.error is not None and o.error.details["reason"] == "cut_off" for o in turn.observations)


@pytest.mark.parametrize(("shape", "provider", "events", "ids"), CUT, ids=[c[0] for c in CUT])
def test_the_parse_of_a_cut_stream_handed_to_the_session_runs_nothing(
    shape: str, provider: Provider, events: list[Any], ids: list[str]
) -> None:
    turn, sent, _ = _handle(provider, _fed(events).finish(), is_async=False)
    assert sent == [] and not turn.done
    assert all(o.error is not None and o.error.category == "parse_error" for o in turn.observations)
    assert turn.observations[0].error is not None
    assert turn.observations[0].error.details["reason"] == "cut_off"


def test_a_raw_text_stream_the_server_cut_runs_nothing_when_handed_itself() -> None:
    stream = _fed(hermes_text([("", A)]))
    stream.end("length")
    turn, sent, _ = _handle("openai_chat", stream, is_async=False)
    (obs,) = turn.observations
    assert sent == [] and obs.error is not None and obs.error.details["reason"] == "cut_off"
