"""A streamed message reads as the same message whole (``StreamParser.finish`` = ``parse`` of the
assembled message), also when it holds blocks the provider runs itself or calls of custom tools:

- an Anthropic message using a server tool (``server_tool_use`` web search, ``mcp_tool_use``) streams
  that block's input as ``input_json_delta`` too; it is not a call of the client's, and the
  client's own ``tool_use`` beside it must run once (it was a ``parse_error``: none ran);
- an OpenAI custom (free-form) tool call streams as a Responses ``custom_tool_call`` item with
  ``response.custom_tool_call_input.delta`` events, or as chat chunks of a ``type: custom`` entry;
  it must be read as the call it is whole (the Responses one vanished: no call, nothing answered).
"""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace import Runtime
from actionspace.parse import StreamParser, parse

SEND = {"to": "bob", "text": "the search says: 42"}


def _pieces(text: str, cuts: list[int]) -> list[str]:
    points = sorted({c % (len(text) + 1) for c in cuts} | {0, len(text)})
    return [text[a:b] for a, b in itertools.pairwise(points) if b > a]


def anthropic_events(cuts: list[int], server: str = "server_tool_use") -> tuple[list[Any], dict[str, Any]]:
    """An Anthropic stream: text, a server tool block (its input streamed), the server's result
    block, thinking, then the client's ``tool_use``; and the message it assembles to."""
    query = json.dumps({"query": "meaning of life"})
    block = {"type": server, "id": "srvtoolu_1", "name": "web_search", "input": {}}
    if server == "mcp_tool_use":
        block["server_name"] = "docs"
    result_kind = "web_search_tool_result" if server == "server_tool_use" else "mcp_tool_result"
    result = {"type": result_kind, "tool_use_id": "srvtoolu_1", "content": [{"type": "text", "text": "42"}]}
    events: list[Any] = [
        {
            "type": "message_start",
            "message": {"id": "msg_1", "type": "message", "role": "assistant", "content": []},
        },
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Searching."}},
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": block},
    ]
    for piece in _pieces(query, cuts):
        delta = {"type": "input_json_delta", "partial_json": piece}
        events.append({"type": "content_block_delta", "index": 1, "delta": delta})
    events += [
        {"type": "content_block_stop", "index": 1},
        {"type": "content_block_start", "index": 2, "content_block": result},
        {"type": "content_block_stop", "index": 2},
        {
            "type": "content_block_start",
            "index": 3,
            "content_block": {"type": "tool_use", "id": "toolu_1", "name": "send", "input": {}},
        },
    ]
    for piece in _pieces(json.dumps(SEND), cuts[::-1]):
        delta = {"type": "input_json_delta", "partial_json": piece}
        events.append({"type": "content_block_delta", "index": 3, "delta": delta})
    events += [
        {"type": "content_block_stop", "index": 3},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}},
        {"type": "message_stop"},
    ]
    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Searching."},
            {**block, "input": json.loads(query)},
            result,
            {"type": "tool_use", "id": "toolu_1", "name": "send", "input": SEND},
        ],
        "stop_reason": "tool_use",
    }
    return events, message


def responses_custom_events(cuts: list[int]) -> tuple[list[Any], dict[str, Any]]:
    sql = "SELECT answer FROM facts WHERE q = 'life' LIMIT 1"
    item = {"type": "custom_tool_call", "id": "ctc_1", "call_id": "call_c", "name": "run_sql", "input": ""}
    events: list[Any] = [
        {"type": "response.created", "response": {"id": "resp_1", "status": "in_progress", "output": []}},
        {"type": "response.output_item.added", "output_index": 0, "item": item},
    ]
    for piece in _pieces(sql, cuts):
        events.append(
            {
                "type": "response.custom_tool_call_input.delta",
                "output_index": 0,
                "item_id": "ctc_1",
                "delta": piece,
            }
        )
    whole = {**item, "input": sql, "status": "completed"}
    events += [
        {"type": "response.custom_tool_call_input.done", "output_index": 0, "item_id": "ctc_1", "input": sql},
        {"type": "response.output_item.done", "output_index": 0, "item": whole},
        {"type": "response.completed", "response": {"id": "resp_1", "status": "completed"}},
    ]
    return events, {"object": "response", "status": "completed", "output": [whole]}


def chat_custom_events(cuts: list[int]) -> tuple[list[Any], dict[str, Any]]:
    sql = "SELECT 1 + 1"

    def chunk(delta: dict[str, Any], reason: str | None = None) -> dict[str, Any]:
        return {
            "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": delta, "finish_reason": reason}],
        }

    first = {"index": 0, "id": "call_c", "type": "custom", "custom": {"name": "run_sql", "input": ""}}
    events: list[Any] = [chunk({"role": "assistant", "tool_calls": [first]})]
    for piece in _pieces(sql, cuts):
        events.append(chunk({"tool_calls": [{"index": 0, "custom": {"input": piece}}]}))
    events.append(chunk({}, "tool_calls"))
    entry = {"id": "call_c", "type": "custom", "custom": {"name": "run_sql", "input": sql}}
    message = {"role": "assistant", "content": None, "tool_calls": [entry]}
    return events, message


def _read(events: list[Any]) -> Any:
    stream = StreamParser()
    for event in events:
        stream.feed(event)
    return stream.finish()


def _same(events: list[Any], message: dict[str, Any]) -> None:
    whole = parse(message)
    assert whole.error is None and whole.calls
    streamed = _read(events)
    assert streamed.error is None, streamed.error
    assert streamed.calls == whole.calls
    assert parse(events).calls == whole.calls


@settings(max_examples=60, deadline=None)
@given(
    cuts=st.lists(st.integers(0, 200), max_size=6),
    server=st.sampled_from(["server_tool_use", "mcp_tool_use"]),
)
def test_an_anthropic_stream_with_a_server_tool_reads_as_the_message_whole(
    cuts: list[int], server: str
) -> None:
    _same(*anthropic_events(cuts, server))


@settings(max_examples=40, deadline=None)
@given(cuts=st.lists(st.integers(0, 200), max_size=6))
def test_a_responses_stream_of_a_custom_tool_call_reads_as_the_output_whole(cuts: list[int]) -> None:
    _same(*responses_custom_events(cuts))


@settings(max_examples=40, deadline=None)
@given(cuts=st.lists(st.integers(0, 200), max_size=6))
def test_a_chat_stream_of_a_custom_tool_call_reads_as_the_message_whole(cuts: list[int]) -> None:
    _same(*chat_custom_events(cuts))


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
def test_a_session_runs_the_client_call_beside_a_server_tool_once_and_answers_only_it(
    use_async: bool,
) -> None:
    rt = Runtime("memory://")
    sent: list[dict[str, str]] = []

    @rt.tool(effect="write")
    def send(to: str, text: str) -> str:
        sent.append({"to": to, "text": text})
        return "sent"

    s = rt.session(run_id="search", provider="anthropic")
    s.user("look it up and tell bob")
    s.tools()
    events, _ = anthropic_events([7, 19])
    stream = StreamParser()
    for event in events:
        stream.feed(event)
    turn = asyncio.run(s.ahandle(stream)) if use_async else s.handle(stream)
    assert [o.status for o in turn.observations] == ["ok"]
    assert sent == [SEND]
    (message,) = turn.messages
    assert [b["tool_use_id"] for b in message["content"]] == ["toolu_1"]
    assert turn.content == "Searching."
    rt.close()
