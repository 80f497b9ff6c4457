"""A model answers with hostile tool names, call ids and arguments — random JSON, lone surrogates,
10k-deep nesting, huge numbers, duplicate keys — whole or streamed. Every call ends in a typed
observation, each call id the model gave is answered exactly once, and the tool's own table holds
exactly one send per call that was accepted (never one for a rejected or replayed call)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace import CATEGORIES, Runtime
from actionspace.parse import StreamParser
from actionspace.session import Provider
from tests.session.w47_world import answered_ids, sends, world
from tests.text_strategies import any_text, json_values

DEEP = "[" * 10_000 + "]" * 10_000
HOSTILE_ARGUMENTS = [
    '{"to": "+1", "text": ' + DEEP + "}",
    '{"to": "+1", "text": "a", "copies": ' + "9" * 5000 + "}",
    '{"to": "+1", "text": "a", "copies": 1e999999}',
    '{"to": "+1", "text": "a", "copies": -1e-999999}',
    '{"to": "+1", "to": "+2", "text": "a"}',
    '{"to": "\\ud800", "text": "a"}',
    '{"to": "+1", "text": "\\udfff\\ud800"}',
    '{"to": "+1", "text": "a"',
    '{"to": "+1", "text": "a"}}',
    "[]",
    "null",
    "",
    '"{\\"to\\": \\"+1\\", \\"text\\": \\"a\\"}"',
    '{"to": "+1", "text": "a", "copies": NaN}',
    '{"to": "+1", "text": "a", "copies": true}',
    '{"to": "+1", "text": "\x00"}',
]
names = (
    st.sampled_from(["send_sms", "send_sms@1", "read_counter", "", " send_sms", "send_sms\ud800"]) | any_text
)
ids = st.none() | st.sampled_from(["c1", "c2", "", "\ud800", "c" * 5000]) | any_text | st.integers()
arguments = st.sampled_from(HOSTILE_ARGUMENTS) | json_values.map(json.dumps) | any_text
proposals = st.lists(st.tuples(names, ids, arguments), min_size=1, max_size=4)


def _message(provider: Provider, proposed: list[tuple[Any, Any, str]]) -> Any:
    if provider == "openai_chat":
        entries = [
            {"id": i, "type": "function", "function": {"name": n, "arguments": a}} for n, i, a in proposed
        ]
        return {"role": "assistant", "content": None, "tool_calls": entries}
    if provider == "openai_responses":
        return [{"type": "function_call", "call_id": i, "name": n, "arguments": a} for n, i, a in proposed]
    events: list[dict[str, Any]] = [{"type": "message_start", "message": {"id": "m", "content": []}}]
    for index, (n, i, a) in enumerate(proposed):
        block = {"type": "tool_use", "id": i, "name": n, "input": {}}
        events.append({"type": "content_block_start", "index": index, "content_block": block})
        for k in range(0, max(len(a), 1), 97):
            delta = {"type": "input_json_delta", "partial_json": a[k : k + 97]}
            events.append({"type": "content_block_delta", "index": index, "delta": delta})
        events.append({"type": "content_block_stop", "index": index})
    events.append({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {}})
    return events


@pytest.fixture(scope="module")
def loop(tmp_path_factory: pytest.TempPathFactory) -> Any:
    root = tmp_path_factory.mktemp("w47")
    rt = world(f"sqlite:///{root / 'rt.db'}", root / "outbox.db")
    yield rt, root / "outbox.db"
    rt.close()


def _check(rt: Runtime, outbox: Path, provider: Provider, raw: Any, proposed: list[Any]) -> None:
    s = rt.session(provider=provider)
    s.user("text whoever the model names")
    before = len(sends(outbox))
    if provider == "anthropic":
        stream = StreamParser()
        for event in raw:
            stream.feed(event)
        raw = stream.output()
    turn = s.handle(raw)
    for obs in turn.observations:
        assert obs.status in ("ok", "error")
        if obs.status == "error":
            assert obs.error is not None and obs.error.category in CATEGORIES and obs.error.recovery
    given_ids = [i for _, i, _ in proposed if isinstance(i, str) and i]
    answered = answered_ids(provider, turn.messages)
    assert len(answered) == len(set(answered))
    assert set(given_ids) <= set(answered)  # each id the model gave, once
    if all(isinstance(i, str) and i for _, i, _ in proposed):
        assert set(answered) == set(given_ids)
    json.dumps(turn.messages)  # every rendered message is JSON
    ran = [o for o in turn.observations if o.status == "ok" and o.tool == "send_sms"]
    assert len(sends(outbox)) - before == len([o for o in ran if not o.diagnostics.get("replayed")])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(proposed=proposals, provider=st.sampled_from(["openai_chat", "openai_responses", "anthropic"]))
def test_any_hostile_message_ends_in_typed_observations_one_answer_per_id_and_no_stray_send(
    loop: Any, proposed: list[tuple[Any, Any, str]], provider: Provider
) -> None:
    rt, outbox = loop
    _check(rt, outbox, provider, _message(provider, proposed), proposed)


@pytest.mark.parametrize("arguments", HOSTILE_ARGUMENTS)
@pytest.mark.parametrize("provider", ["openai_chat", "openai_responses", "anthropic"])
def test_each_hostile_argument_text_is_typed_and_never_sent_twice(
    loop: Any, arguments: str, provider: Provider
) -> None:
    rt, outbox = loop
    proposed = [("send_sms", "c1", arguments), ("send_sms", "c2", arguments)]
    _check(rt, outbox, provider, _message(provider, proposed), proposed)
