"""A user turn the store did not save has not begun.

``s.user(text)`` saves the run's new turn before it returns; when the run-state store does not
answer, it raises. The turn must then stay where the store has it: before, it moved in memory
anyway, so the write the model proposed again right after (still the same request: the store
never heard of a new one) was sent a second time, a retry of ``s.user`` skipped a turn, and the
process's count of turns parted from the store's (a process continuing the run read another).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actionspace import Runtime
from tests.store_faults import StoreDown, down


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'a.db'}"
    else:
        from tests.pg import fresh_schema

        yield from fresh_schema(request.getfixturevalue("pg_url"))


def _world(url: str) -> tuple[Runtime, list[str]]:
    rt = Runtime(url, recover_on_start=False)
    paid: list[str] = []

    @rt.tool(effect="external", idempotency="none", writes=["payee:{to}"])
    def pay(to: str, cents: int) -> str:
        """Pay someone."""
        paid.append(to)
        return f"paid {to}"

    return rt, paid


def _pay(call_id: str) -> dict[str, Any]:
    call = {
        "id": call_id,
        "type": "function",
        "function": {"name": "pay", "arguments": json.dumps({"to": "bob", "cents": 5})},
    }
    return {"role": "assistant", "content": None, "tool_calls": [call]}


def test_a_turn_the_store_did_not_save_does_not_begin(url: str) -> None:
    rt, paid = _world(url)
    try:
        s = rt.session(run_id="conv-unsaved", provider="openai_chat")
        s.user("pay bob 5 cents")
        [first] = s.handle(_pay("c1")).observations
        assert first.ok and paid == ["bob"] and s.turn == 1
        put_back = down(rt.engine.runs.run_states, "save")
        try:
            with pytest.raises(StoreDown):
                s.user("pay bob 5 cents again")
        finally:
            put_back()
        assert s.turn == 1  # not saved: the turn has not moved
        [again] = s.handle(_pay("c2")).observations  # the model asks again in the same turn
        assert again.ok and again.diagnostics.get("replayed") is True and paid == ["bob"]
        s.user("pay bob 5 cents again")  # the store answers now: one new turn
        assert s.turn == 2
        [new] = s.handle(_pay("c3")).observations
        assert new.ok and new.diagnostics.get("replayed") is not True and paid == ["bob", "bob"]
    finally:
        rt.close()
    later, _ = _world(url)
    try:
        assert later.session(run_id="conv-unsaved", provider="openai_chat").turn == 2
    finally:
        later.close()
