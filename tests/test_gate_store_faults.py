"""The approval and budget stores failing under a call (locked past their busy timeout, a lost
connection), injected on SQLite and PostgreSQL, sync and async.

- Before the send (an approval looked up, filed or consumed; a budget reserved): nothing is sent
  and the call is ``transient`` with ``details["sent"]`` False, so asking again is safe. Before,
  the call failed as ``internal`` (recovery ``report``).
- After the send (the budget's usage settled): the caller gets the tool's observation, with a
  note that the usage is not recorded. Before, a payment that went through was answered
  ``internal``, as if it had not.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from actionspace import Runtime
from actionspace.policy.budget import Budget
from actionspace.session import Session
from tests import store_faults
from tests.store_faults import down

url = store_faults.url  # the fixture: a fresh SQLite file or PostgreSQL schema


def _runtime(url: str, sent: list[int], **options: Any) -> Runtime:
    rt = Runtime(url, recover_on_start=False, **options)

    @rt.tool(effect="write", requires_approval=options.get("budgets") is None)
    def pay(amount: int) -> str:
        """Pay an amount."""
        sent.append(amount)
        return f"paid {amount}"

    @rt.tool(effect="read")
    def balance(account: str) -> int:
        """An account's balance."""
        return 42

    return rt


def _call(s: Session, call_id: str, mode: str, name: str = "pay", arguments: str = '{"amount": 5}') -> Any:
    function = {"name": name, "arguments": arguments}
    message = {"role": "assistant", "tool_calls": [{"id": call_id, "type": "function", "function": function}]}
    turn = s.handle(message) if mode == "sync" else asyncio.run(s.ahandle(message))
    return turn.observations[0]


def _meter(rt: Runtime) -> Any:
    guard = rt.engine.stages.guard
    assert guard is not None and guard.meter is not None
    return guard.meter


def _unsent(obs: Any) -> None:
    assert obs.error is not None and obs.error.category == "transient", obs.error
    assert obs.error.details["sent"] is False and obs.error.retryable
    assert "StoreDown" in obs.error.message


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("method", ["find", "create"])
def test_an_approval_store_that_does_not_answer_holds_the_call_unsent(
    url: str, mode: str, method: str
) -> None:
    sent: list[int] = []
    with _runtime(url, sent) as rt:
        s = rt.session()
        s.user("pay 5")
        up = down(rt.approvals.store, method)
        _unsent(_call(s, "a", mode))
        assert sent == []
        up()
        held = _call(s, "b", mode)
        assert held.error is not None and held.error.category == "needs_approval"
        rt.approvals.approve(held.error.details["request_id"], by="alice")
        assert _call(s, "c", mode).status == "ok" and sent == [5]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_an_approval_the_store_cannot_consume_is_unsent_and_runs_once_after(url: str, mode: str) -> None:
    sent: list[int] = []
    with _runtime(url, sent) as rt:
        s = rt.session()
        s.user("pay 5")
        held = _call(s, "a", mode)
        assert held.error is not None and held.error.category == "needs_approval"
        rt.approvals.approve(held.error.details["request_id"], by="alice")
        up = down(rt.approvals.store, "update")
        _unsent(_call(s, "b", mode))
        assert sent == []
        up()
        assert _call(s, "c", mode).status == "ok"
        assert _call(s, "d", mode).diagnostics.get("replayed") is True
        assert sent == [5]


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("tool", ["pay", "balance"])
def test_a_budget_store_that_does_not_answer_admits_nothing(url: str, mode: str, tool: str) -> None:
    sent: list[int] = []
    with _runtime(url, sent, budgets=[Budget(calls=10)]) as rt:
        s = rt.session()
        s.user("pay 5")
        arguments = '{"amount": 5}' if tool == "pay" else '{"account": "a"}'
        up = down(_meter(rt), "admit")
        _unsent(_call(s, "a", mode, tool, arguments))
        assert sent == []
        up()
        assert _call(s, "b", mode, tool, arguments).status == "ok"
        assert rt.budget(run_id=s.run_id) == {"calls": 9}


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_budget_store_that_cannot_settle_keeps_the_committed_result(url: str, mode: str) -> None:
    sent: list[int] = []
    with _runtime(url, sent, budgets=[Budget(calls=10, bytes=100_000)]) as rt:
        s = rt.session()
        s.user("pay 5")
        up = down(_meter(rt), "settle")
        paid = _call(s, "a", mode)
        assert (paid.status, paid.data) == ("ok", "paid 5"), paid.error
        assert "StoreDown" in paid.diagnostics["budget_unsettled"]
        read = _call(s, "b", mode, "balance", '{"account": "a"}')
        assert (read.status, read.data) == ("ok", 42), read.error
        assert "budget_unsettled" in read.diagnostics
        events = rt.engine.trace.events(s.run_id)
        metered = [e.data for e in events if e.kind == "metered"]
        assert [m["recorded"] for m in metered] == [False, False]
        up()
        again = _call(s, "c", mode)
        assert again.diagnostics.get("replayed") is True and sent == [5]
        assert "budget_unsettled" not in again.diagnostics
        assert rt.budget(run_id=s.run_id)["calls"] == 8  # the two reservations stand


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_run_state_store_that_does_not_answer_ends_the_turn_transient(url: str, mode: str) -> None:
    """The run's state (its label, turn, pins) is saved before the model is shown anything that
    depends on it; when the store does not take it, each call of the turn answers ``transient``
    and the turn still returns (before, ``handle`` raised the driver's exception after the calls
    ran: the loop lost the turn). The write committed once; asking again replays it."""
    sent: list[int] = []
    with _runtime(url, sent, budgets=[Budget(calls=10)]) as rt:
        s = rt.session()
        s.user("pay 5")
        up = down(rt.engine.runs.run_states, "save")
        turn_obs = _call(s, "a", mode)
        assert turn_obs.error is not None and turn_obs.error.category == "transient", turn_obs.error
        up()
        again = _call(s, "b", mode)
        assert (again.status, again.data) == ("ok", "paid 5"), again.error
        assert again.diagnostics.get("replayed") is True and sent == [5]
