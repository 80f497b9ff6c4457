"""One model message proposes at most ``Session.max_calls`` calls (default 512).

A message over the bound runs none of its calls: each is answered ``budget_exceeded`` with the
recovery ``send_fewer_calls``, its own call id answered once, and nothing reaches the ledger. A
message at the bound runs every call. The bound is the session's own (not the run's): a session
of the same run elsewhere starts from the default.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from actionspace import Runtime
from tests.session.w47_world import answered_ids, chat

MAX_CALLS_PER_MESSAGE = 512
"""The documented default (docs/sessions.md)."""


def _world(store: str) -> tuple[Runtime, list[str]]:
    rt = Runtime(store)
    sent: list[str] = []

    @rt.tool(effect="write", writes=["counter:{name}"])
    def set_counter(name: str, value: int) -> dict[str, Any]:
        """Set a counter."""
        sent.append(name)
        return {"name": name, "value": value}

    return rt, sent


def _message(n: int) -> dict[str, Any]:
    return chat(*((f"w{i}", "set_counter", json.dumps({"name": f"k{i}", "value": i})) for i in range(n)))


def _handled(s: Any, message: Any, is_async: bool) -> Any:
    return asyncio.run(s.ahandle(message)) if is_async else s.handle(message)


@pytest.mark.parametrize("is_async", [False, True])
@pytest.mark.parametrize("over", [0, 1])
def test_a_message_at_the_bound_runs_and_one_call_over_runs_nothing(
    tmp_path: Path, is_async: bool, over: int
) -> None:
    rt, sent = _world(f"sqlite:///{tmp_path / 'a.db'}")
    s = rt.session(run_id="conv-bound", provider="openai_chat")
    s.user("set them all")
    n = MAX_CALLS_PER_MESSAGE + over
    turn = _handled(s, _message(n), is_async)
    ids = [f"w{i}" for i in range(n)]
    assert [o.call_id for o in turn.observations] == ids
    assert answered_ids("openai_chat", turn.messages) == ids
    entries = [e for e in rt.ledger.list(limit=10_000) if e.run_id == "conv-bound"]
    if over:
        assert sent == [] and entries == []
        for o in turn.observations:
            assert o.status == "error" and o.error is not None
            assert o.error.category == "budget_exceeded" and not o.error.retryable
            assert "send_fewer_calls" in o.error.recovery
            assert o.error.details["calls"] == n and o.error.details["max_calls_per_message"] == n - 1
        assert f"{n} calls" in turn.messages[0]["content"]
        assert s.max_calls == MAX_CALLS_PER_MESSAGE
    else:
        assert all(o.status == "ok" for o in turn.observations)
        assert sorted(sent) == sorted(f"k{i}" for i in range(n)) and len(entries) == n
    rt.close()


@pytest.mark.parametrize("is_async", [False, True])
def test_the_bound_is_set_on_the_session_and_a_smaller_message_runs_after_a_refused_one(
    is_async: bool,
) -> None:
    rt, sent = _world("memory://")
    s = rt.session(run_id="conv-small", provider="openai_chat")
    s.max_calls = 3
    s.user("set four")
    refused = _handled(s, _message(4), is_async)
    assert [o.error.category for o in refused.observations if o.error] == ["budget_exceeded"] * 4
    assert sent == []
    ran = _handled(s, _message(3), is_async)
    assert [o.status for o in ran.observations] == ["ok"] * 3
    assert sorted(sent) == ["k0", "k1", "k2"]
    rt.close()


def test_another_session_of_the_run_keeps_the_default_bound(tmp_path: Path) -> None:
    """The bound is not run state: a session continuing the run (as another process would, from
    the store) starts from the default, and a message over the first session's bound runs there."""
    url = f"sqlite:///{tmp_path / 'b.db'}"
    rt, sent = _world(url)
    first = rt.session(run_id="conv-shared", provider="openai_chat")
    first.max_calls = 2
    first.user("set three")
    assert all(o.error is not None for o in first.handle(_message(3)).observations)
    rt.close()
    rt2, sent2 = _world(url)
    second = rt2.session(run_id="conv-shared", provider="openai_chat")
    assert second.max_calls == MAX_CALLS_PER_MESSAGE
    assert [o.status for o in second.handle(_message(3)).observations] == ["ok"] * 3
    assert (sent, sorted(sent2)) == ([], ["k0", "k1", "k2"])
    rt2.close()
