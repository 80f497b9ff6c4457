"""A model message that gives one call id to several calls is malformed: providers refuse such a
message, so none of its calls runs, every call is answered ``parse_error`` (reason
``duplicate_call_id``), and a session answers each distinct call id exactly once."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from anthropic.types import ToolResultBlockParam
from google.genai.types import Content
from openai.types.chat import ChatCompletionToolMessageParam
from openai.types.responses.response_input_param import FunctionCallOutput
from pydantic import TypeAdapter

from actionspace import Runtime, ToolCall, parse
from actionspace.parse import StreamParser
from actionspace.session import PROVIDERS, Provider
from actionspace.types import Observation

A = {"to": "a", "body": "x"}
B = {"to": "b", "body": "y"}


def message(provider: Provider, calls: list[tuple[str, dict[str, Any]]]) -> Any:
    """What a model of ``provider`` emits for ``calls`` = [(call id, arguments)] of ``send``."""
    if provider == "openai_chat":
        entries = [
            {"id": i, "type": "function", "function": {"name": "send", "arguments": json.dumps(a)}}
            for i, a in calls
        ]
        return {"role": "assistant", "content": None, "tool_calls": entries}
    if provider == "openai_responses":
        return [
            {"type": "function_call", "call_id": i, "name": "send", "arguments": json.dumps(a)}
            for i, a in calls
        ]
    if provider == "gemini":
        return {
            "role": "model",
            "parts": [{"functionCall": {"id": i, "name": "send", "args": a}} for i, a in calls],
        }
    return {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": i, "name": "send", "input": a} for i, a in calls],
    }


def chat_stream(calls: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    chunks: list[dict[str, Any]] = []
    for index, (i, a) in enumerate(calls):
        entry = {
            "index": index,
            "id": i,
            "type": "function",
            "function": {"name": "send", "arguments": json.dumps(a)},
        }
        chunks.append({"choices": [{"index": 0, "delta": {"tool_calls": [entry]}, "finish_reason": None}]})
    chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    return chunks


def anthropic_stream(calls: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    for index, (i, a) in enumerate(calls):
        block = {"type": "tool_use", "id": i, "name": "send", "input": {}}
        events.append({"type": "content_block_start", "index": index, "content_block": block})
        delta = {"type": "input_json_delta", "partial_json": json.dumps(a)}
        events.append({"type": "content_block_delta", "index": index, "delta": delta})
        events.append({"type": "content_block_stop", "index": index})
    events.append({"type": "message_delta", "delta": {"stop_reason": "tool_use"}})
    return events


def responses_stream(calls: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    for index, (i, a) in enumerate(calls):
        item = {"type": "function_call", "call_id": i, "name": "send", "arguments": ""}
        events.append({"type": "response.output_item.added", "output_index": index, "item": item})
        args = json.dumps(a)
        events.append(
            {"type": "response.function_call_arguments.done", "output_index": index, "arguments": args}
        )
    events.append({"type": "response.completed", "response": {"status": "completed"}})
    return events


STREAMS = {"chat": chat_stream, "anthropic": anthropic_stream, "responses": responses_stream}


def runtime() -> tuple[Runtime, list[tuple[str, str]]]:
    rt = Runtime("memory://")
    sent: list[tuple[str, str]] = []

    @rt.tool(effect="write", writes=["mail:{to}"])
    def send(to: str, body: str) -> dict[str, bool]:
        """Send a message."""
        sent.append((to, body))
        return {"sent": True}

    return rt, sent


def assert_refused(observations: list[Observation] | tuple[Observation, ...], ids: list[str]) -> None:
    assert [o.call_id for o in observations] == ids
    for obs in observations:
        assert obs.status == "error" and obs.error is not None
        assert obs.error.category == "parse_error"
        assert obs.error.details["reason"] == "duplicate_call_id"
        assert "re_emit_call" in obs.error.recovery


def answered_ids(provider: Provider, messages: list[dict[str, Any]]) -> list[str]:
    """The call ids the messages answer, in order, each message validated by the provider's SDK type."""
    if provider == "openai_chat":
        for m in messages:
            TypeAdapter(ChatCompletionToolMessageParam).validate_python(m)
        return [m["tool_call_id"] for m in messages]
    if provider == "openai_responses":
        for m in messages:
            TypeAdapter(FunctionCallOutput).validate_python(m)
        return [m["call_id"] for m in messages]
    if provider == "gemini":  # one Content of functionResponse parts, each under its call's id
        assert len(messages) == 1 and messages[0]["role"] == "user"
        Content.model_validate(messages[0])
        out = []
        for part in messages[0]["parts"]:
            if "functionResponse" in part:  # no id: the call had none (answered in the calls' order)
                out.extend([part["functionResponse"]["id"]] if "id" in part["functionResponse"] else [])
            else:  # a message none of whose calls could be read: its parse_error, as text
                assert set(part) == {"text"}
                assert json.loads(part["text"])["error"]["category"] == "parse_error"
        return out
    assert len(messages) == 1 and messages[0]["role"] == "user"
    for block in messages[0]["content"]:
        TypeAdapter(ToolResultBlockParam).validate_python(block)
    return [b["tool_use_id"] for b in messages[0]["content"]]


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("second", [A, B], ids=["equal_arguments", "other_arguments"])
def test_parse_refuses_a_message_whose_calls_share_an_id(provider: Provider, second: dict[str, Any]) -> None:
    parsed = parse(message(provider, [("c1", A), ("c1", second)]))
    assert parsed.error is not None and parsed.error.category == "parse_error"
    assert parsed.error.details["reason"] == "duplicate_call_id"
    assert parsed.error.details["index"] == 1 and parsed.error.details["id"] == "c1"
    assert [c.id for c in parsed.calls] == ["c1"]  # the calls before the fault, as for any fault


@pytest.mark.parametrize("kind", sorted(STREAMS))
def test_a_stream_whose_calls_share_an_id_finishes_as_a_parse_error_and_reports_the_id_once(
    kind: str,
) -> None:
    events = STREAMS[kind]([("c1", A), ("c1", B)])
    stream = StreamParser()
    reported = [call for event in events for call in stream.feed(event)]
    assert [c.arguments for c in reported] == [A]
    result = stream.finish()
    assert result.error is not None and result.error.details["reason"] == "duplicate_call_id"
    whole = parse(events)
    assert whole.error is not None and whole.error.details["reason"] == "duplicate_call_id"


def test_calls_without_ids_or_with_distinct_ids_are_not_duplicates() -> None:
    calls = [
        ToolCall(name="send", arguments=A),
        ToolCall(name="send", arguments=A),
        ToolCall(name="send", arguments=B, id="x"),
    ]
    assert parse(calls).error is None
    assert parse(message("openai_chat", [("c1", A), ("c2", A)])).error is None


@pytest.mark.parametrize("provider", PROVIDERS)
def test_call_all_runs_none_of_a_message_whose_calls_share_an_id(provider: Provider) -> None:
    rt, sent = runtime()
    out = rt.call_all(message(provider, [("c1", A), ("c2", B), ("c1", B)]))
    assert_refused(out, ["c1", "c2"])  # each distinct id once, as the trace holds them
    assert sent == [] and list(rt.ledger.list()) == []


@pytest.mark.parametrize("kind", sorted(STREAMS))
def test_acall_all_runs_none_of_a_streamed_message_whose_calls_share_an_id(kind: str) -> None:
    rt, sent = runtime()
    out = asyncio.run(rt.acall_all(STREAMS[kind]([("c1", A), ("c1", B)])))
    assert [o.error.details["reason"] for o in out if o.error is not None] == ["duplicate_call_id"]
    assert all(o.status == "error" for o in out) and sent == []


def test_astream_runs_none_of_a_message_whose_calls_share_an_id() -> None:
    rt, sent = runtime()

    async def observed() -> list[Observation]:
        return [o async for o in rt.astream(message("openai_chat", [("c1", A), ("c1", B)]))]

    out = asyncio.run(observed())
    assert out and all(o.error is not None and o.error.category == "parse_error" for o in out)
    assert sent == []


def test_a_list_of_tool_calls_sharing_an_id_runs_none_of_them() -> None:
    rt, sent = runtime()
    out = rt.call_all(
        [ToolCall(name="send", arguments=A, id="k"), ToolCall(name="send", arguments=B, id="k")]
    )
    assert all(o.error is not None and o.error.category == "parse_error" for o in out)
    assert sent == []


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("handle", ["sync", "async"])
def test_a_session_answers_each_distinct_call_id_once_and_runs_nothing(
    provider: Provider, handle: str
) -> None:
    rt, sent = runtime()
    s = rt.session(run_id="conv", provider=provider)
    s.user("write to a and b")
    raw = message(provider, [("c1", A), ("c2", B), ("c1", A)])
    turn = s.handle(raw) if handle == "sync" else asyncio.run(s.ahandle(raw))
    assert_refused(turn.observations, ["c1", "c2", "c1"])
    assert answered_ids(provider, turn.messages) == ["c1", "c2"]
    assert sent == []
    again = s.handle(message(provider, [("c1", A), ("c3", B)]))  # re-emitted with distinct ids
    assert all(o.ok for o in again.observations) and sent == [("a", "x"), ("b", "y")]


def test_the_trace_names_the_duplicate_call_id() -> None:
    rt, _ = runtime()
    run = rt.new_run()
    rt.call_all(message("openai_chat", [("c1", A), ("c1", B)]), run_id=run)
    parsed = [e.data for e in rt.trace.events(run) if e.kind == "parsed"]
    assert parsed and "c1" in parsed[0]["error"] and "id" in parsed[0]["error"]


def test_the_service_runs_none_of_a_message_whose_calls_share_an_id() -> None:
    from actionspace.service import BackgroundRuns, RunnerConfig
    from tests.service.apptools import World, build_runtime

    rt, _ = build_runtime(World())
    runner = BackgroundRuns(rt, RunnerConfig())
    entry = {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": '{"city": "Oslo"}'}}
    try:
        rt.new_run("dup")
        runner.start_calls(
            [{"role": "assistant", "tool_calls": [entry, entry]}], run_id="dup", principal=rt.principal
        )
        assert runner.wait("dup", timeout=20) == "error"
        events = rt.trace.events("dup")
    finally:
        runner.close()
        rt.close()
    assert not [e for e in events if e.kind == "dispatched"]
    observed = [(e.call_id, e.data.get("category")) for e in events if e.kind == "observation"]
    assert observed == [("c1", "parse_error")]  # one answer per id: the model cannot tell two apart
