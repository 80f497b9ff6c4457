"""An output the provider stopped before its end for another reason than the token limit — a chat
``finish_reason: "content_filter"``, an Anthropic ``stop_reason: "refusal"`` (its classifiers
stopped the message), a Responses ``status`` of ``failed`` or ``cancelled`` — may hold calls whose
arguments are not what the model meant to send, however closed their JSON looks. It gets the
verdict of a cut output: a ``parse_error`` of reason ``cut_off`` and nothing run, however it
arrives (a whole response, a message, a stream of events, a session's message)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from actionspace import Runtime, parse
from actionspace.parse import ParseResult, StreamParser

ARGS = {"to": "bob@example.com", "amount": 25}


def _chat(finish: str) -> dict[str, Any]:
    entry = {"id": "c1", "type": "function", "function": {"name": "pay", "arguments": json.dumps(ARGS)}}
    message = {"role": "assistant", "content": None, "tool_calls": [entry]}
    choice = {"index": 0, "message": message, "finish_reason": finish}
    return {"object": "chat.completion", "choices": [choice]}


def _anthropic(stop: str) -> dict[str, Any]:
    block = {"type": "tool_use", "id": "toolu_1", "name": "pay", "input": ARGS}
    return {"type": "message", "role": "assistant", "content": [block], "stop_reason": stop}


def _responses(status: str) -> dict[str, Any]:
    item = {
        "type": "function_call",
        "call_id": "fc_1",
        "name": "pay",
        "arguments": json.dumps(ARGS),
        "status": "completed",
    }
    return {"object": "response", "status": status, "output": [item]}


def _chat_stream(finish: str) -> StreamParser:
    stream = StreamParser()
    call = {"index": 0, "id": "c1", "type": "function", "function": {"name": "pay", "arguments": ""}}
    stream.feed({"choices": [{"index": 0, "delta": {"role": "assistant", "tool_calls": [call]}}]})
    piece = {"index": 0, "function": {"arguments": json.dumps(ARGS)}}
    stream.feed({"choices": [{"index": 0, "delta": {"tool_calls": [piece]}}]})
    stream.feed({"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    return stream


def _anthropic_stream(stop: str) -> StreamParser:
    stream = StreamParser()
    start = {"type": "tool_use", "id": "toolu_1", "name": "pay", "input": {}}
    stream.feed({"type": "content_block_start", "index": 0, "content_block": start})
    delta = {"type": "input_json_delta", "partial_json": json.dumps(ARGS)}
    stream.feed({"type": "content_block_delta", "index": 0, "delta": delta})
    stream.feed({"type": "content_block_stop", "index": 0})
    stream.feed({"type": "message_delta", "delta": {"stop_reason": stop}})
    stream.feed({"type": "message_stop"})
    return stream


def _responses_stream(status: str) -> StreamParser:
    stream = StreamParser()
    item = {"type": "function_call", "call_id": "fc_1", "name": "pay", "arguments": ""}
    stream.feed({"type": "response.output_item.added", "output_index": 0, "item": item})
    done = {**item, "arguments": json.dumps(ARGS), "status": "completed"}
    stream.feed({"type": "response.output_item.done", "output_index": 0, "item": done})
    stream.feed({"type": f"response.{status}", "response": {"status": status}})
    return stream


def _reason(result: ParseResult) -> tuple[int, str | None, str | None]:
    error = result.error
    if error is None:
        return len(result.calls), None, None
    return len(result.calls), error.category, error.details.get("reason")


STOPPED = [
    ("chat content_filter", _chat("content_filter"), lambda: _chat_stream("content_filter")),
    ("anthropic refusal", _anthropic("refusal"), lambda: _anthropic_stream("refusal")),
    ("responses failed", _responses("failed"), lambda: _responses_stream("failed")),
    ("responses cancelled", _responses("cancelled"), lambda: _responses_stream("cancelled")),
]


@pytest.mark.parametrize(("label", "whole", "streamed"), STOPPED, ids=[s[0] for s in STOPPED])
def test_a_stopped_output_is_cut_off_whole_and_streamed(label: str, whole: Any, streamed: Any) -> None:
    assert _reason(parse(whole)) == (0, "parse_error", "cut_off"), label
    stream = streamed()
    assert _reason(stream.finish()) == (0, "parse_error", "cut_off"), label
    assert _reason(parse(stream.output())) == (0, "parse_error", "cut_off"), label


@pytest.mark.parametrize(
    "whole",
    [_chat("stop"), _chat("tool_calls"), _anthropic("tool_use"), _responses("completed")],
    ids=["chat stop", "chat tool_calls", "anthropic tool_use", "responses completed"],
)
def test_an_output_that_ended_as_it_should_keeps_its_call(whole: Any) -> None:
    assert _reason(parse(whole)) == (1, None, None)


@pytest.mark.parametrize("durable", [False, True], ids=["memory", "sqlite"])
@pytest.mark.parametrize(("label", "whole", "streamed"), STOPPED, ids=[s[0] for s in STOPPED])
def test_nothing_is_paid_from_a_stopped_output(
    tmp_path: Path, durable: bool, label: str, whole: Any, streamed: Any
) -> None:
    paid: list[dict[str, Any]] = []
    store = f"sqlite:///{tmp_path / 'ledger.db'}" if durable else "memory://"
    with Runtime(store, recover_on_start=False) as rt:

        @rt.tool(effect="write")
        def pay(to: str, amount: int) -> str:
            paid.append({"to": to, "amount": amount})
            return "paid"

        session = rt.session(run_id=f"r-{label.replace(' ', '-')}")
        session.user("pay bob 25")
        observations = session.handle(whole).observations
        assert observations, label
        assert {(o.status, o.error.category if o.error else None) for o in observations} == {
            ("error", "parse_error")
        }
        assert all(o.error is not None and o.error.details.get("reason") == "cut_off" for o in observations)
        assert paid == []
        rt.call_all(streamed().output(), run_id=session.run_id)
        assert paid == []


def test_the_recovery_of_a_filtered_output_does_not_ask_for_a_shorter_one() -> None:
    filtered = parse(_chat("content_filter")).error
    cut = parse(_chat("length")).error
    assert filtered is not None and cut is not None
    assert "provider stopped the output" in filtered.message and "shorter" not in filtered.message
    assert "shorter arguments" in cut.message
