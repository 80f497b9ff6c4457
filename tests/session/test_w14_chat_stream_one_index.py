"""A chat stream from a server that numbers every tool call ``0`` (or gives none an ``index``),
each call beginning with its own id, handed to the session: each call runs once and each id is
answered once. Read as one call, the first call's id went unanswered (the provider then refuses
the conversation) and neither send happened."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from actionspace.parse import StreamParser
from tests.session.w47_world import answered_ids, sends, world

A = {"to": "+15550100", "text": "running late"}
B = {"to": "+15550199", "text": "me too"}


def _chunk(delta: dict[str, Any], reason: str | None = None) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta, "finish_reason": reason}
    return {"id": "x", "object": "chat.completion.chunk", "created": 0, "model": "m", "choices": [choice]}


def _events(index: object, finish: str) -> list[dict[str, Any]]:
    out = [_chunk({"role": "assistant", "content": None})]
    for call_id, args in (("call_1", A), ("call_2", B)):
        text = json.dumps(args)
        head: dict[str, Any] = {"id": call_id, "type": "function", "function": {"name": "send_sms"}}
        tail: dict[str, Any] = {"function": {"arguments": text[8:]}}
        head["function"]["arguments"] = text[:8]
        if index != "absent":
            head["index"] = tail["index"] = index
        out += [_chunk({"tool_calls": [head]}), _chunk({"tool_calls": [tail]})]
    return [*out, _chunk({}, finish)]


@pytest.mark.parametrize("index", [0, None, "absent"])
@pytest.mark.parametrize("how", ["stream", "output"])
def test_each_call_of_a_one_index_stream_runs_once_and_is_answered(
    tmp_path: Path, index: object, how: str
) -> None:
    outbox = tmp_path / "outbox.db"
    rt = world(f"sqlite:///{tmp_path / 'rt.db'}", outbox)
    s = rt.session(run_id="conv-1", provider="openai_chat")
    s.user("text Bob and Ann")
    stream = StreamParser()
    for event in _events(index, "tool_calls"):
        stream.feed(event)
    turn = s.handle(stream if how == "stream" else stream.output())
    assert [(o.call_id, o.status) for o in turn.observations] == [("call_1", "ok"), ("call_2", "ok")]
    assert answered_ids("openai_chat", turn.messages) == ["call_1", "call_2"]
    assert sends(outbox) == [(A["to"], A["text"]), (B["to"], B["text"])]
    again = s.handle(stream.output())  # the same message again: replayed, never sent twice
    assert all(o.status == "ok" and o.diagnostics.get("replayed") for o in again.observations)
    assert len(sends(outbox)) == 2
    rt.close()


@pytest.mark.parametrize("index", [0, None, "absent"])
def test_a_cut_one_index_stream_answers_every_call_id_and_runs_none(tmp_path: Path, index: object) -> None:
    outbox = tmp_path / "outbox.db"
    rt = world(f"sqlite:///{tmp_path / 'rt.db'}", outbox)
    s = rt.session(run_id="conv-1", provider="openai_chat")
    s.user("text Bob and Ann")
    stream = StreamParser()
    for event in _events(index, "length"):
        stream.feed(event)
    turn = s.handle(stream.output())
    assert sends(outbox) == []
    assert [o.call_id for o in turn.observations] == ["call_1", "call_2"]
    for obs in turn.observations:
        assert obs.error is not None and obs.error.category == "parse_error" and obs.error.recovery
        assert obs.error.details["reason"] == "cut_off"
    assert answered_ids("openai_chat", turn.messages) == ["call_1", "call_2"]
    rt.close()
