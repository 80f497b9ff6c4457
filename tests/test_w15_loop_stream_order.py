"""A model sets a counter twice in one message — 1, then 2 — and its stream reaches the session
with the second call begun first (a proxy that reorders or interleaves output items). The calls
run in the message's order, so the counter ends at 2 as the whole response says, and each call
id is answered in that order. Read in arrival order, the counter ended at 1."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from actionspace.parse import StreamParser
from actionspace.session import Provider
from tests.session.w47_world import answered_ids, sends, world

FIRST = {"name": "x", "value": 1}
SECOND = {"name": "x", "value": 2}


def _responses(cut: bool) -> list[dict[str, Any]]:
    def item(call_id: str, args: dict[str, Any], status: str) -> dict[str, Any]:
        text = json.dumps(args) if status == "completed" else ""
        head = {"type": "function_call", "id": f"fc_{call_id}", "call_id": call_id, "name": "set_counter"}
        return {**head, "arguments": text, "status": status}

    events: list[dict[str, Any]] = [{"type": "response.created", "response": {"status": "in_progress"}}]
    for index, call_id, args in ((2, "call_2", SECOND), (0, "call_1", FIRST)):
        added = {"type": "response.output_item.added", "output_index": index}
        events.append({**added, "item": item(call_id, args, "in_progress")})
        if index == 2:  # a reasoning item between the two calls
            reasoning = {"type": "reasoning", "id": "rs_1", "summary": []}
            events.append({"type": "response.output_item.added", "output_index": 1, "item": reasoning})
    for index, call_id, args in ((2, "call_2", SECOND), (0, "call_1", FIRST)):
        delta = {
            "type": "response.function_call_arguments.delta",
            "output_index": index,
            "delta": json.dumps(args),
        }
        events.append({**delta, "item_id": f"fc_{call_id}"})
        done = {"type": "response.output_item.done", "output_index": index}
        events.append({**done, "item": item(call_id, args, "completed")})
    if cut:
        return [*events, {"type": "response.incomplete", "response": {"status": "incomplete"}}]
    return [*events, {"type": "response.completed", "response": {"status": "completed"}}]


def _chat() -> list[dict[str, Any]]:
    def chunk(delta: dict[str, Any], reason: str | None = None) -> dict[str, Any]:
        return {
            "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": delta, "finish_reason": reason}],
        }

    chunks = [chunk({"role": "assistant", "content": None})]
    for index, call_id, args in ((1, "call_2", SECOND), (0, "call_1", FIRST)):
        function = {"name": "set_counter", "arguments": json.dumps(args)}
        chunks.append(
            chunk({"tool_calls": [{"index": index, "id": call_id, "type": "function", "function": function}]})
        )
    return [*chunks, chunk({}, "tool_calls")]


@pytest.mark.parametrize("provider", ["openai_responses", "openai_chat"])
@pytest.mark.parametrize("how", ["parser", "output"])
def test_a_reordered_stream_runs_its_calls_in_the_messages_order(
    tmp_path: Path, provider: Provider, how: str
) -> None:
    outbox = tmp_path / "outbox.db"
    rt = world(f"sqlite:///{tmp_path / 'rt.db'}", outbox)
    s = rt.session(run_id="conv-1", provider=provider)
    s.user("set x to 1, then to 2")
    stream = StreamParser()
    for event in _responses(cut=False) if provider == "openai_responses" else _chat():
        stream.feed(event)
    turn = s.handle(stream if how == "parser" else stream.output())
    assert [(o.call_id, o.status) for o in turn.observations] == [("call_1", "ok"), ("call_2", "ok")]
    assert answered_ids(provider, turn.messages) == ["call_1", "call_2"]
    assert sends(outbox) == [("counter:x", "1"), ("counter:x", "2")]
    rt.close()


def test_a_reordered_stream_cut_off_answers_each_id_in_the_messages_order_and_runs_nothing(
    tmp_path: Path,
) -> None:
    outbox = tmp_path / "outbox.db"
    rt = world(f"sqlite:///{tmp_path / 'rt.db'}", outbox)
    s = rt.session(run_id="conv-1", provider="openai_responses")
    s.user("set x to 1, then to 2")
    stream = StreamParser()
    for event in _responses(cut=True):
        stream.feed(event)
    turn = s.handle(stream.output())
    assert sends(outbox) == []
    assert [o.call_id for o in turn.observations] == ["call_1", "call_2"]
    for obs in turn.observations:
        assert obs.error is not None and obs.error.category == "parse_error" and obs.error.recovery
    assert answered_ids("openai_responses", turn.messages) == ["call_1", "call_2"]
    rt.close()


@pytest.mark.parametrize("index", [0, None], ids=["zero", "absent"])
def test_responses_items_under_one_output_index_each_run_once_and_are_answered(
    tmp_path: Path, index: int | None
) -> None:
    outbox = tmp_path / "outbox.db"
    rt = world(f"sqlite:///{tmp_path / 'rt.db'}", outbox)
    s = rt.session(run_id="conv-1", provider="openai_responses")
    s.user("set x to 1, then to 2")
    stream = StreamParser()
    for event in _responses(cut=False):
        if "output_index" in event:
            event = {k: v for k, v in event.items() if k != "output_index"}
            if index is not None:
                event["output_index"] = index
        stream.feed(event)
    turn = s.handle(stream)
    # arrival order is the only order such a server gives: the second call began first
    assert [(o.call_id, o.status) for o in turn.observations] == [("call_2", "ok"), ("call_1", "ok")]
    assert answered_ids("openai_responses", turn.messages) == ["call_2", "call_1"]
    assert sends(outbox) == [("counter:x", "2"), ("counter:x", "1")]
    rt.close()
