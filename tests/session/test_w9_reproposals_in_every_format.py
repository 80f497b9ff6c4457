"""A model re-proposes a write after its answer was lost or after it committed, in whatever
format it writes: Llama ``<|python_tag|>``, Mistral ``[TOOL_CALLS]`` (both forms), pythonic,
bare and fenced JSON, OpenAI ``tool_calls`` JSON text, each with its arguments re-ordered, spaced
otherwise, ``1`` written ``1.0`` or ``1e0``, no node id and a fresh call id (or none). The write is
sent once and the repeat answered from the ledger; a different write (another value, other words
inside a string) is sent. Then one message of three calls — one failing validation, a write, a
read depending on nothing — gets the same observations per call id run one after the other and
together. On the memory, SQLite and PostgreSQL stores; sends are counted in the tool's own table."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.pg import fresh_schema
from tests.session.w47_world import answered_ids, chat, sends, world

ARGS = {"to": "+15550100", "text": "running late", "copies": 1}
SWAPPED = '{ "copies" : 1.0 ,\n  "text":"running late",  "to" : "+15550100" }'
PY = 'send_sms(copies=1.0, text="running late", to="+15550100")'

SAME_AGAIN = {
    "llama": '<|python_tag|>{"name": "send_sms", "parameters": ' + SWAPPED + "}",
    "mistral": '[TOOL_CALLS] [{"name": "send_sms", "arguments": ' + SWAPPED + "}]",
    "mistral_v11": "[TOOL_CALLS]send_sms[ARGS]" + SWAPPED,
    "pythonic": f"[{PY}]",
    "bare": '{"name": "send_sms", "arguments": ' + SWAPPED.replace("1.0", "1e0") + "}",
    "fenced": 'Sending again.\n```json\n[{"name": "send_sms", "arguments": ' + SWAPPED + "}]\n```",
    "openai_text": json.dumps(
        {
            "tool_calls": [
                {"id": "call_z", "type": "function", "function": {"name": "send_sms", "arguments": SWAPPED}}
            ]
        }
    ),
}
DIFFERENT = {
    "another value": '[TOOL_CALLS] [{"name": "send_sms", "arguments": ' + SWAPPED.replace("1.0", "2") + "}]",
    "other words": '<|python_tag|>{"name": "send_sms", "parameters": '
    + SWAPPED.replace("running late", "running  late")
    + "}",
    "another recipient": f"[{PY.replace('+15550100', '+15550101')}]",
}


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "memory":
        yield "memory://"
    elif request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'rt.db'}"
    else:
        yield from fresh_schema(request.getfixturevalue("pg_url"))


@pytest.mark.parametrize("fmt", sorted(SAME_AGAIN))
def test_a_lost_write_re_proposed_in_any_format_is_never_sent_again(
    store: str, tmp_path: Path, fmt: str
) -> None:
    outbox = tmp_path / "outbox.db"
    rt = world(store, outbox, lose_answer=True)
    s = rt.session(run_id="conv-lost", provider="openai_chat")
    s.user("text Bob I'm late")
    (first,) = s.handle(chat(("call_a", "send_sms", json.dumps(ARGS)))).observations
    assert first.error is not None and first.error.category == "unknown_commit"
    turn = s.handle(SAME_AGAIN[fmt])
    (again,) = turn.observations
    assert again.error is not None and again.error.category == "unknown_commit", again.error
    assert again.error.details.get("idempotency_key") == first.error.details.get("idempotency_key")
    assert answered_ids("openai_chat", turn.messages) == [again.call_id]
    assert len(sends(outbox)) == 1
    rt.close()


@pytest.mark.parametrize("fmt", sorted(SAME_AGAIN))
def test_a_committed_write_re_proposed_in_any_format_is_replayed_and_a_different_one_sent(
    store: str, tmp_path: Path, fmt: str
) -> None:
    outbox = tmp_path / "outbox.db"
    rt = world(store, outbox)
    s = rt.session(run_id="conv-done", provider="openai_chat")
    s.user("text Bob I'm late")
    (first,) = s.handle(chat(("call_a", "send_sms", json.dumps(ARGS)))).observations
    assert first.status == "ok"
    (again,) = s.handle(SAME_AGAIN[fmt]).observations
    assert again.status == "ok" and again.diagnostics.get("replayed") and again.data == first.data
    assert len(sends(outbox)) == 1
    for n, different in enumerate(DIFFERENT.values(), start=2):
        (other,) = s.handle(different).observations
        assert other.status == "ok" and not other.diagnostics.get("replayed")
        assert len(sends(outbox)) == n
    rt.close()


def _three(s: Any, together: bool, message: Any) -> list[tuple[str, str, str | None, Any, bool]]:
    turn = asyncio.run(s.ahandle(message)) if together else s.handle(message)
    assert answered_ids("openai_chat", turn.messages) == ["bad", "write", "read"]
    return [
        (
            o.call_id,
            o.status,
            o.error.category if o.error else None,
            o.data,
            bool(o.diagnostics.get("replayed")),
        )
        for o in turn.observations
    ]


def test_three_calls_at_once_get_the_same_observations_one_after_the_other_and_together(
    store: str, tmp_path: Path
) -> None:
    message = chat(
        ("bad", "set_counter", '{"name": "n", "value": "seven"}'),
        ("write", "set_counter", '{"value": 7, "name": "n"}'),
        ("read", "read_counter", '{"name": "other"}'),
    )
    seen = []
    for together in (False, True):
        outbox = tmp_path / f"outbox-{together}.db"
        rt = world(store, outbox)
        s = rt.session(run_id=f"conv-three-{together}", provider="openai_chat")
        s.user("set the counter and read the other")
        first = _three(s, together, message)
        again = _three(s, together, message)  # the same message again in the turn
        seen.append((first, again, sends(outbox)))
        rt.close()
    (first, again, sent), together_seen = seen[0], seen[1]
    assert together_seen == seen[0]
    assert first == [
        ("bad", "error", "invalid_arguments", None, False),
        ("write", "ok", None, {"name": "n", "value": 7}, False),
        ("read", "ok", None, {"name": "other", "value": None}, False),
    ]
    assert again[1] == ("write", "ok", None, {"name": "n", "value": 7}, True)
    assert sent == [("counter:n", "7")]
