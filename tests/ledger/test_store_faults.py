"""The ledger's store failing around a send (locked past its busy timeout, a full disk, a lost
connection), injected on SQLite and PostgreSQL.

- The intent not taken: nothing is sent, and the call is ``transient`` (``details["sent"]`` False):
  asking again is safe. Before, the call failed as ``internal``.
- The outcome not taken after the tool answered: the caller gets the tool's observation; this
  process keeps the settled entry, so a new proposal of the action replays it (and writes it to the
  store then) instead of reading the store's ``dispatched``. Before, the call failed as
  ``internal``, and every new proposal of it read ``transient: another caller is executing this
  action``, for as long as the process lived.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from actionspace import Runtime
from actionspace.session import Session
from tests import store_faults
from tests.store_faults import down

url = store_faults.url  # the fixture: a fresh SQLite file or PostgreSQL schema


def _runtime(url: str, sent: list[int]) -> Runtime:
    rt = Runtime(url, recover_on_start=False)

    @rt.tool(effect="write")
    def pay(amount: int) -> str:
        """Pay an amount."""
        sent.append(amount)
        return f"paid {amount}"

    return rt


def _pay(s: Session, call_id: str, mode: str) -> Any:
    function = {"name": "pay", "arguments": '{"amount": 5}'}
    message = {"role": "assistant", "tool_calls": [{"id": call_id, "type": "function", "function": function}]}
    turn = s.handle(message) if mode == "sync" else asyncio.run(s.ahandle(message))
    return turn.observations[0]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_an_intent_the_store_does_not_take_is_never_sent(url: str, mode: str) -> None:
    sent: list[int] = []
    with _runtime(url, sent) as rt:
        s = rt.session()
        s.user("pay 5")
        ledger = rt.engine.ledger
        up = down(ledger, "begin_unless_pending" if hasattr(ledger, "begin_unless_pending") else "begin")
        first = _pay(s, "a", mode)
        assert first.error is not None and first.error.category == "transient", first.error
        assert first.error.details["sent"] is False and first.error.retryable
        assert sent == []
        up()
        again = _pay(s, "b", mode)
        assert again.status == "ok" and sent == [5]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_an_outcome_the_store_does_not_take_is_kept_and_replayed(url: str, mode: str) -> None:
    sent: list[int] = []
    with _runtime(url, sent) as rt:
        s = rt.session()
        s.user("pay 5")
        up = down(rt.engine.ledger, "transition")
        first = _pay(s, "a", mode)
        assert (first.status, first.data) == ("ok", "paid 5"), first.error
        key = first.diagnostics["idempotency_key"]
        events = rt.engine.trace.events(s.run_id)
        written = [e.data for e in events if e.kind == "ledger" and e.data.get("to") == "committed"]
        assert written and written[-1]["recorded"] is False
        still_down = _pay(s, "b", mode)  # the store still fails: replayed from this process
        assert still_down.diagnostics.get("replayed") is True and still_down.data == "paid 5"
        up()
        again = _pay(s, "c", mode)  # the store is back: replayed, and written to it
        assert again.diagnostics.get("replayed") is True and again.data == "paid 5"
        assert sent == [5]
        entry = rt.engine.ledger.get(key)
        assert entry is not None and entry.state == "committed"
    with _runtime(url, sent) as other:  # another process reads the settlement
        entry = other.engine.ledger.get(key)
        assert entry is not None and entry.state == "committed"
        assert entry.observation is not None and entry.observation["data"] == "paid 5"
