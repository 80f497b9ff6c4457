"""A model stops mid-output: its streamed chunks end inside the arguments' JSON, inside a tag of an
open-model format, or after a complete call but before the message ends, and the provider then
says the output was cut (``length`` / ``max_tokens`` / ``incomplete``). ``StreamParser.feed`` may
have shown a call already (it cannot know the cut is coming); the whole stream handed to the
session (``s.handle(stream.output())``) runs none of the cut message's calls and answers each call
id once with a ``parse_error`` whose recovery is to re-emit the call."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace import ActionError, parse
from actionspace.parse import StreamParser
from actionspace.session import Provider
from tests.session.w47_world import answered_ids, sends, world

_REEMIT = ActionError.of("parse_error", "x").recovery
A = json.dumps({"to": "+15550100", "text": "running late"})
B = json.dumps({"to": "+15550199", "text": "me too"})


def _chat(pieces: list[tuple[int, str | None, str]], finish: str) -> list[dict[str, Any]]:
    def chunk(delta: dict[str, Any], reason: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "finish_reason": reason}
        return {"id": "x", "object": "chat.completion.chunk", "created": 0, "model": "m", "choices": [choice]}

    out = []
    for index, call_id, arguments in pieces:
        entry: dict[str, Any] = {"index": index, "function": {"arguments": arguments}}
        if call_id is not None:
            entry.update(id=call_id, type="function", function={"name": "send_sms", "arguments": arguments})
        out.append(chunk({"tool_calls": [entry]}))
    return [*out, chunk({}, finish)]


def _anthropic(calls: list[tuple[str, str, bool]], stop: str) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = [{"type": "message_start", "message": {"id": "m", "content": []}}]
    for index, (call_id, arguments, closed) in enumerate(calls):
        block = {"type": "tool_use", "id": call_id, "name": "send_sms", "input": {}}
        delta = {"type": "input_json_delta", "partial_json": arguments}
        events += [
            {"type": "content_block_start", "index": index, "content_block": block},
            {"type": "content_block_delta", "index": index, "delta": delta},
        ]
        if closed:
            events.append({"type": "content_block_stop", "index": index})
    events.append({"type": "message_delta", "delta": {"stop_reason": stop}, "usage": {}})
    return [*events, {"type": "message_stop"}]


def _responses(calls: list[tuple[str, str, bool]], status: str) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    for index, (call_id, arguments, closed) in enumerate(calls):
        item = {"type": "function_call", "id": f"fc_{call_id}", "call_id": call_id, "name": "send_sms"}
        events += [
            {"type": "response.output_item.added", "output_index": index, "item": {**item, "arguments": ""}},
            {"type": "response.function_call_arguments.delta", "output_index": index, "delta": arguments},
        ]
        if closed:
            done = {"type": "response.function_call_arguments.done", "output_index": index}
            events.append({**done, "arguments": arguments})
    end = "response.incomplete" if status == "incomplete" else "response.completed"
    return [*events, {"type": end, "response": {"id": "r", "status": status}}]


CUT: list[tuple[str, Provider, list[dict[str, Any]], list[str]]] = [
    ("chat inside the JSON", "openai_chat", _chat([(0, "c1", A[:17])], "length"), ["c1"]),
    ("chat after a call", "openai_chat", _chat([(0, "c1", A), (1, "c2", B)], "length"), ["c1", "c2"]),
    ("chat, second open", "openai_chat", _chat([(0, "c1", A), (1, "c2", B[:5])], "length"), ["c1", "c2"]),
    ("anthropic inside", "anthropic", _anthropic([("t1", A[:9], False)], "max_tokens"), ["t1"]),
    ("anthropic after", "anthropic", _anthropic([("t1", A, True)], "max_tokens"), ["t1"]),
    (
        "anthropic two",
        "anthropic",
        _anthropic([("t1", A, True), ("t2", B, True)], "max_tokens"),
        ["t1", "t2"],
    ),
    ("responses inside", "openai_responses", _responses([("f1", A[:20], False)], "incomplete"), ["f1"]),
    ("responses after", "openai_responses", _responses([("f1", A, True)], "incomplete"), ["f1"]),
]


def _fed(events: list[dict[str, Any]]) -> tuple[StreamParser, list[str]]:
    stream = StreamParser()
    shown = [c.id or "" for e in events for c in stream.feed(e)]
    return stream, shown


@pytest.mark.parametrize(("case", "provider", "events", "ids"), CUT, ids=[c[0] for c in CUT])
def test_a_cut_stream_handed_whole_to_the_session_runs_none_of_its_calls(
    tmp_path: Path, case: str, provider: Provider, events: list[dict[str, Any]], ids: list[str]
) -> None:
    outbox = tmp_path / "outbox.db"
    rt = world(f"sqlite:///{tmp_path / 'rt.db'}", outbox)
    s = rt.session(provider=provider)
    s.user("text Bob")
    stream, _shown = _fed(events)
    turn = s.handle(stream.output())
    assert sends(outbox) == []
    assert [o.call_id for o in turn.observations] == ids
    for obs in turn.observations:
        assert obs.error is not None and obs.error.category == "parse_error"
        assert obs.error.details["reason"] == "cut_off" and obs.error.recovery == _REEMIT
    assert answered_ids(provider, turn.messages) == ids
    assert stream.finish().calls == () and stream.finish().error is not None
    rt.close()


def test_feed_shows_an_anthropic_call_before_the_max_tokens_signal_that_voids_it() -> None:
    stream, shown = _fed(_anthropic([("t1", A, True)], "max_tokens"))
    assert shown == ["t1"]  # shown, never to be run: the whole stream is what is acted on
    result = stream.finish()
    assert result.calls == () and result.error is not None and result.error.details["reason"] == "cut_off"


WHOLE: list[tuple[Provider, list[dict[str, Any]], list[str]]] = [
    ("openai_chat", _chat([(0, "c1", A), (1, "c2", B)], "tool_calls"), ["c1", "c2"]),
    ("anthropic", _anthropic([("t1", A, True), ("t2", B, True)], "tool_use"), ["t1", "t2"]),
    ("openai_responses", _responses([("f1", A, True), ("f2", B, True)], "completed"), ["f1", "f2"]),
]


@pytest.mark.parametrize(("provider", "events", "ids"), WHOLE)
def test_a_whole_stream_handed_to_the_session_runs_each_call_once(
    tmp_path: Path, provider: Provider, events: list[dict[str, Any]], ids: list[str]
) -> None:
    outbox = tmp_path / "outbox.db"
    rt = world(f"sqlite:///{tmp_path / 'rt.db'}", outbox)
    s = rt.session(provider=provider)
    s.user("text Bob and Ann")
    stream, shown = _fed(events)
    assert shown == ids
    turn = s.handle(stream.output())
    assert [o.status for o in turn.observations] == ["ok", "ok"]
    assert answered_ids(provider, turn.messages) == ids
    again = s.handle(stream.output())  # handed twice (a retried loop step): replayed, not sent
    assert all(o.diagnostics.get("replayed") for o in again.observations)
    assert len(sends(outbox)) == 2
    rt.close()


HERMES = '<tool_call>{"name": "send_sms", "arguments": ' + A + "}</tool_call>"
QWEN = (
    "<tool_call><function=send_sms><parameter=to>+15550100</parameter>"
    "<parameter=text>running late</parameter></function></tool_call>"
)
KIMI = (
    "<|tool_calls_section_begin|><|tool_call_begin|>functions.send_sms:0<|tool_call_argument_begin|>"
    + A
    + "<|tool_call_end|><|tool_calls_section_end|>"
)
HARMONY = (
    "<|start|>assistant<|channel|>commentary to=functions.send_sms <|constrain|>json<|message|>"
    + A
    + "<|call|>"
)
TEXTS = [HERMES, QWEN, KIMI, HARMONY]


@pytest.mark.parametrize("text", TEXTS)
def test_a_raw_text_stream_the_server_says_was_cut_runs_none_of_its_whole_looking_calls(
    tmp_path: Path, text: str
) -> None:
    outbox = tmp_path / "outbox.db"
    rt = world(f"sqlite:///{tmp_path / 'rt.db'}", outbox)
    s = rt.session(provider="openai_chat")
    s.user("text Bob")
    stream = StreamParser(in_reasoning=False)
    shown = [c for i in range(0, len(text), 7) for c in stream.feed(text[i : i + 7])]
    assert [c.name for c in shown] == ["send_sms"]  # the closing token was seen: shown at once
    stream.end("length")
    result = stream.finish()
    assert result.calls == () and result.error is not None
    assert result.error.details["reason"] == "cut_off" and result.error.recovery == _REEMIT
    (obs,) = s.handle(stream.output()).observations
    assert obs.error is not None and obs.error.category == "parse_error" and obs.error.recovery == _REEMIT
    assert sends(outbox) == []
    rt.close()


@pytest.mark.parametrize("reason", ["stop", "eos", None])
def test_a_raw_text_stream_that_ended_normally_runs_its_call_once(tmp_path: Path, reason: str | None) -> None:
    outbox = tmp_path / "outbox.db"
    rt = world(f"sqlite:///{tmp_path / 'rt.db'}", outbox)
    s = rt.session(provider="openai_chat")
    s.user("text Bob")
    stream = StreamParser()
    for i in range(0, len(HERMES), 5):
        stream.feed(HERMES[i : i + 5])
    stream.end(reason)
    assert stream.output() == HERMES
    (obs,) = s.handle(stream.output()).observations
    assert obs.status == "ok" and len(sends(outbox)) == 1
    rt.close()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    text=st.sampled_from(TEXTS), cuts=st.lists(st.integers(1, 400), max_size=8), cut_at=st.integers(0, 400)
)
def test_any_chunking_of_any_prefix_of_a_raw_call_cut_by_the_limit_finishes_with_no_call(
    text: str, cuts: list[int], cut_at: int
) -> None:
    prefix = text[: min(cut_at, len(text))]
    stream = StreamParser()
    points = sorted({0, len(prefix), *(c for c in cuts if c < len(prefix))})
    for a, b in itertools.pairwise(points):
        stream.feed(prefix[a:b])
    stream.end("max_tokens")
    assert stream.finish().calls == ()
    assert parse(stream.output()).calls == ()
