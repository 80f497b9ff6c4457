"""A hostile model drives the loop: tool names that only look like an offered one, arguments as a
JSON string of a JSON string, absurd call ids, 10 MB arguments, 10,000 calls in one message. Each
call ends as a typed observation answered once under its own id; nothing a rejected call named
is sent, and what is sent is sent once (counted in the tool's own SQLite table)."""

from __future__ import annotations

import asyncio
import json
import unicodedata
from pathlib import Path
from typing import Any

import pytest

from actionspace import CATEGORIES, Runtime
from actionspace.session import PROVIDERS, Provider, Turn
from tests.session.w47_world import answered_ids, anthropic, chat, responses, sends, world

ARGS = {"name": "n", "value": 7}

LOOKALIKES = [
    "set_\u0441ounter",  # Cyrillic es
    "\uff53et_counter",  # fullwidth s
    "set_counter\u200b",  # zero-width space
    "\u200dset_counter",  # zero-width joiner first
    "set_co\u0075\u0308nter",  # u with a combining diaeresis
    "SET_COUNTER",
    "set\u2010counter",  # hyphen for underscore
    "set_counter\u202e",  # right-to-left override
    "set_\u0441ounter@1",
]


def _message(provider: Provider, calls: list[tuple[str, str, Any]]) -> Any:
    """One assistant message of (call id, tool, arguments as an object or as JSON text)."""
    text = [(cid, name, a if isinstance(a, str) else json.dumps(a)) for cid, name, a in calls]
    if provider == "openai_chat":
        return chat(*text)
    if provider == "openai_responses":
        return responses(*text)
    if provider == "gemini":
        parts = [
            {"functionCall": {"id": cid, "name": name, "args": a if isinstance(a, dict) else json.loads(a)}}
            for cid, name, a in calls
        ]
        return {"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP"}]}
    return anthropic(*((cid, name, a if isinstance(a, dict) else json.loads(a)) for cid, name, a in calls))


def _typed(turn: Turn, provider: Provider, ids: list[str]) -> None:
    assert [o.call_id for o in turn.observations] == ids
    assert answered_ids(provider, turn.messages) == ids
    for obs in turn.observations:
        if obs.status != "ok":
            assert obs.error is not None and obs.error.category in CATEGORIES and obs.error.recovery
    json.dumps(turn.messages)


@pytest.fixture
def loop(tmp_path: Path) -> Any:
    rt = world(f"sqlite:///{tmp_path / 'rt.db'}", tmp_path / "outbox.db")
    yield rt, tmp_path / "outbox.db"
    rt.close()


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("together", [False, True])
def test_a_tool_name_that_only_looks_like_an_offered_one_runs_nothing(
    loop: Any, provider: Provider, together: bool
) -> None:
    rt, outbox = loop
    s = rt.session(run_id="conv-look", provider=provider)
    s.user("set the counter")
    calls = [(f"c{i}", name, ARGS) for i, name in enumerate(LOOKALIKES)]
    message = _message(provider, calls)
    turn = asyncio.run(s.ahandle(message)) if together else s.handle(message)
    _typed(turn, provider, [c[0] for c in calls])
    for obs, name in zip(turn.observations, LOOKALIKES, strict=True):
        assert obs.error is not None and obs.error.category == "unknown_tool", (name, obs.error)
        assert unicodedata.normalize("NFC", name) != "set_counter"
    assert sends(outbox) == []


@pytest.mark.parametrize("provider", ["openai_chat", "openai_responses"])
@pytest.mark.parametrize("depth", [1, 2, 3])
def test_arguments_written_as_a_json_string_of_json_text_are_typed_and_not_sent(
    loop: Any, provider: Provider, depth: int
) -> None:
    rt, outbox = loop
    s = rt.session(run_id="conv-nested", provider=provider)
    s.user("set the counter")
    text = json.dumps(ARGS)
    for _ in range(depth):
        text = json.dumps(text)
    turn = s.handle(
        _message(provider, [("c1", "set_counter", text), ("c2", "read_counter", '{"name": "n"}')])
    )
    _typed(turn, provider, ["c1", "c2"])
    first, read = turn.observations
    assert first.error is not None and first.error.category in ("invalid_arguments", "parse_error")
    assert read.status == "ok" and read.data == {"name": "n", "value": None}
    assert sends(outbox) == []


ABSURD_IDS = [
    "x" * 1_000_000,
    "a\nb\x00c",
    "a\nb\x00c ",
    "caf\u00e9",
    "cafe\u0301",
    "call_1",
    "call_1\u200b",
    "\U0001f600" * 3,
    "conv-ids:parse",
    "conv-ids:n1",
]


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("together", [False, True])
def test_absurd_call_ids_are_each_answered_once_with_their_own_result(
    loop: Any, provider: Provider, together: bool
) -> None:
    rt, outbox = loop
    s = rt.session(run_id="conv-ids", provider=provider)
    s.user("set them")
    calls = [(cid, "set_counter", {"name": f"k{i}", "value": i}) for i, cid in enumerate(ABSURD_IDS)]
    message = _message(provider, calls)
    turn = asyncio.run(s.ahandle(message)) if together else s.handle(message)
    _typed(turn, provider, ABSURD_IDS)
    assert [o.data for o in turn.observations] == [{"name": f"k{i}", "value": i} for i in range(len(calls))]
    assert sorted(sends(outbox)) == sorted((f"counter:k{i}", str(i)) for i in range(len(calls)))


@pytest.mark.parametrize("provider", PROVIDERS)
def test_ten_megabyte_arguments_are_sent_once_and_replayed_or_refused_typed(
    loop: Any, provider: Provider
) -> None:
    rt, outbox = loop
    s = rt.session(run_id="conv-big", provider=provider)
    s.user("send the long text")
    big = {"to": "+15550100", "text": "x" * 10_000_000}
    junk = {"to": "+15550100", "text": "a", "junk": "y" * 10_000_000}
    turn = s.handle(_message(provider, [("c1", "send_sms", big), ("c2", "send_sms", junk)]))
    _typed(turn, provider, ["c1", "c2"])
    sent, refused = turn.observations
    assert sent.status == "ok"
    assert refused.error is not None and refused.error.category == "invalid_arguments"
    again = s.handle(_message(provider, [("c3", "send_sms", dict(reversed(big.items())))]))
    _typed(again, provider, ["c3"])
    assert again.observations[0].diagnostics.get("replayed")
    assert len(sends(outbox)) == 1
    assert all(len(json.dumps(m)) < 100_000 for m in turn.messages)  # what the model reads stays bounded


def test_ten_thousand_calls_in_one_message_are_each_answered_once_and_the_write_sent_once() -> None:
    rt = Runtime("memory://")
    seen: list[str] = []

    @rt.tool(effect="read")
    def look(q: str) -> str:
        """Look something up."""
        return f"found {q}"

    @rt.tool(effect="external", idempotency="none")
    def send(to: str) -> str:
        """Send a note."""
        seen.append(to)
        return "sent"

    s = rt.session(run_id="conv-many", provider="openai_chat")
    s.max_calls = 10_000  # past the default bound on calls per message
    s.user("look everything up")
    calls: list[tuple[str, str, str]] = []
    for i in range(10_000):
        if i == 5_000:
            calls.append((f"id{i}", "send", '{"to": "bob"}'))
        elif i % 3 == 0:
            calls.append((f"id{i}", "lo\u043ek", json.dumps({"q": str(i)})))  # a lookalike
        elif i % 3 == 1:
            calls.append((f"id{i}", "look", json.dumps({"q": i})))  # not a string
        else:
            calls.append((f"id{i}", "look", json.dumps({"q": str(i)})))
    turn = s.handle(chat(*calls))
    ids = [c[0] for c in calls]
    _typed(turn, "openai_chat", ids)
    for i, obs in enumerate(turn.observations):
        if i == 5_000:
            assert obs.status == "ok"
        elif i % 3 == 2:
            assert obs.data == f"found {i}"
        else:
            assert obs.error is not None
            assert obs.error.category == ("unknown_tool" if i % 3 == 0 else "invalid_arguments")
    assert seen == ["bob"]
    rt.close()
