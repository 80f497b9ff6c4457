"""A streamed model output the provider ends as cut off (chat ``finish_reason: "length"``, Anthropic
``stop_reason: "max_tokens"``, an incomplete Responses stream) is a ``cut_off`` parse error even
when its last chunk closes the arguments' JSON: none of its calls runs, each call id is answered."""

from __future__ import annotations

import json
from typing import Any

import pytest
from openai.types.chat import ChatCompletionChunk

from actionspace import ActionError, Runtime, parse
from actionspace.parse import StreamParser, call_ids
from actionspace.session import Provider

FIRST = json.dumps({"to": "bob@example.com", "body": "Running late"})
SECOND = json.dumps({"to": "carol@example.com", "body": "I'll be there at"})  # closed by the last chunk


def _chat(finish: str) -> list[dict[str, Any]]:
    def chunk(delta: dict[str, Any], reason: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "finish_reason": reason}
        return {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m", "choices": [choice]}

    def entry(index: int, call_id: str | None, arguments: str) -> dict[str, Any]:
        out: dict[str, Any] = {"index": index, "function": {"arguments": arguments}}
        if call_id is not None:
            out.update(id=call_id, type="function", function={"name": "send_email", "arguments": arguments})
        return out

    return [
        chunk({"role": "assistant", "tool_calls": [entry(0, "call_1", "")]}),
        chunk({"tool_calls": [entry(0, None, FIRST)]}),
        chunk({"tool_calls": [entry(1, "call_2", SECOND[:20])]}),
        chunk({"tool_calls": [entry(1, None, SECOND[20:])]}, finish),
    ]


def _anthropic(stop: str) -> list[dict[str, Any]]:
    def tool(index: int, call_id: str, arguments: str) -> list[dict[str, Any]]:
        block = {"type": "tool_use", "id": call_id, "name": "send_email", "input": {}}
        delta = {"type": "input_json_delta", "partial_json": arguments}
        return [
            {"type": "content_block_start", "index": index, "content_block": block},
            {"type": "content_block_delta", "index": index, "delta": delta},
            {"type": "content_block_stop", "index": index},
        ]

    start = {"id": "msg_1", "type": "message", "role": "assistant", "content": [], "model": "m"}
    return [
        {"type": "message_start", "message": start},
        *tool(0, "toolu_1", FIRST),
        *tool(1, "toolu_2", SECOND),
        {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None}, "usage": {}},
        {"type": "message_stop"},
    ]


def _responses(status: str) -> list[dict[str, Any]]:
    def item(index: int, call_id: str, arguments: str, item_status: str) -> list[dict[str, Any]]:
        fc = {"type": "function_call", "id": f"fc_{call_id}", "call_id": call_id, "name": "send_email"}
        return [
            {"type": "response.output_item.added", "output_index": index, "item": {**fc, "arguments": ""}},
            {"type": "response.function_call_arguments.delta", "output_index": index, "delta": arguments},
            {"type": "response.function_call_arguments.done", "output_index": index, "arguments": arguments},
            {
                "type": "response.output_item.done",
                "output_index": index,
                "item": {**fc, "arguments": arguments, "status": item_status},
            },
        ]

    end = "response.incomplete" if status == "incomplete" else "response.completed"
    return [
        {"type": "response.created", "response": {"id": "resp_1", "status": "in_progress"}},
        *item(0, "fc1", FIRST, "completed"),
        *item(1, "fc2", SECOND, status),
        {"type": end, "response": {"id": "resp_1", "status": status}},
    ]


CUT: list[tuple[Provider, list[Any], tuple[str, ...]]] = [
    ("openai_chat", _chat("length"), ("call_1", "call_2")),
    ("openai_chat", [ChatCompletionChunk.model_validate(c) for c in _chat("length")], ("call_1", "call_2")),
    ("anthropic", _anthropic("max_tokens"), ("toolu_1", "toolu_2")),
    ("openai_responses", _responses("incomplete"), ("fc1", "fc2")),
]
WHOLE: list[tuple[Provider, list[Any]]] = [
    ("openai_chat", _chat("tool_calls")),
    ("anthropic", _anthropic("tool_use")),
    ("openai_responses", _responses("completed")),
]


def _runtime() -> tuple[Runtime, list[str]]:
    rt = Runtime("memory://")
    sent: list[str] = []

    @rt.tool(effect="external")
    def send_email(to: str, body: str) -> dict[str, bool]:
        """Send an email."""
        sent.append(to)
        return {"sent": True}

    return rt, sent


@pytest.mark.parametrize(("provider", "chunks", "ids"), CUT)
def test_the_stream_parser_finishes_a_cut_off_stream_as_cut_off_with_no_call(
    provider: Provider, chunks: list[Any], ids: tuple[str, ...]
) -> None:
    parser = StreamParser()
    events = [c.model_dump() if hasattr(c, "model_dump") else c for c in chunks]
    for event in events[:-1]:
        parser.feed(event)
    assert all(c.id != ids[-1] for c in parser.feed(events[-1]))  # the cut chunk completes no call
    result = parser.finish()
    assert result.error is not None and result.error.details["reason"] == "cut_off"
    assert result.calls == ()


@pytest.mark.parametrize(("provider", "chunks", "ids"), CUT)
def test_parse_of_a_cut_off_chunk_sequence_is_cut_off_and_names_every_call_id(
    provider: Provider, chunks: list[Any], ids: tuple[str, ...]
) -> None:
    parsed = parse(chunks)
    assert parsed.error is not None and parsed.error.details["reason"] == "cut_off"
    assert parsed.calls == ()
    assert call_ids(chunks) == ids


@pytest.mark.parametrize(("provider", "chunks", "ids"), CUT)
def test_a_session_runs_none_of_a_cut_off_streams_calls_and_answers_each_call_id(
    provider: Provider, chunks: list[Any], ids: tuple[str, ...]
) -> None:
    rt, sent = _runtime()
    s = rt.session(provider=provider)
    s.user("tell Bob and Carol I'm late")
    turn = s.handle(chunks)
    assert sent == []
    assert [o.call_id for o in turn.observations] == list(ids)
    for obs in turn.observations:
        assert obs.error is not None and obs.error.category == "parse_error"
        assert obs.error.recovery == ActionError.of("parse_error", "x").recovery
        assert "cut off" in obs.error.message
    assert len(turn.messages) == (1 if provider == "anthropic" else len(ids))


@pytest.mark.parametrize(("provider", "chunks"), WHOLE)
def test_a_whole_stream_with_the_same_calls_runs_them(provider: Provider, chunks: list[Any]) -> None:
    parsed = parse(chunks)
    assert parsed.error is None and [c.arguments["to"] for c in parsed.calls] == [
        "bob@example.com",
        "carol@example.com",
    ]
    rt, sent = _runtime()
    s = rt.session(provider=provider)
    s.user("tell Bob and Carol I'm late")
    turn = s.handle(chunks)
    assert [o.status for o in turn.observations] == ["ok", "ok"]
    assert sent == ["bob@example.com", "carol@example.com"]
