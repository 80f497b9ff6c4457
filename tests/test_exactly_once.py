"""Exactly once where the world allows it: counted at the tool's own store, under injected faults."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from actionspace import Runtime, ToolCall
from actionspace.catalog import RetryPolicy
from actionspace.errors import DEFAULT_RECOVERY
from actionspace.ledger.commit import new_entry
from actionspace.ledger.status import Committed, NotCommitted, StatusAnswer, StillUnknown

TIMEOUT_S = 0.25
"""Generous enough that an answered call never times out on a loaded machine."""
LOST_S = 0.6
"""How long a lost response keeps the caller waiting: well past the timeout."""
FAST = RetryPolicy(max_attempts=3, deadline_s=5.0, initial_backoff_s=0.001)
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"to": {"type": "string"}, "amount": {"type": "integer"}},
    "required": ["to", "amount"],
}


class Bank:
    """The tool's own store: what really happened, whatever the runtime believes."""

    def __init__(self) -> None:
        self.payments: list[dict[str, Any]] = []
        self.by_key: dict[str, dict[str, Any]] = {}
        self.lock = threading.Lock()
        self.lose_next_response = 0
        self.fail_before_commit = 0
        self.fail_after_s = LOST_S
        self.lost_s = LOST_S
        self.lose_first_response_of_each_amount = False
        self.lost_amounts: set[int] = set()
        self.answer_lost_once_asked_again = False
        """A lost response arrives only once the same key is asked again (at most ``lost_s``)."""
        self.asked_again = threading.Event()

    def _maybe_lose(self, amount: int = -1) -> None:
        with self.lock:
            lose = self.lose_next_response > 0
            if lose:
                self.lose_next_response -= 1
            elif self.lose_first_response_of_each_amount and amount not in self.lost_amounts:
                self.lost_amounts.add(amount)
                lose = True
        if lose and self.answer_lost_once_asked_again:
            self.asked_again.wait(self.lost_s)
        elif lose:
            time.sleep(self.lost_s)  # the response never arrives within the timeout

    def pay_none(self, to: str, amount: int) -> dict[str, Any]:
        with self.lock:
            payment = {"id": f"p{len(self.payments) + 1}", "to": to, "amount": amount}
            self.payments.append(payment)
        self._maybe_lose(amount)
        return payment

    def pay_native(self, to: str, amount: int, idempotency_key: str) -> dict[str, Any]:
        with self.lock:
            if idempotency_key in self.by_key:
                self.asked_again.set()
                return self.by_key[idempotency_key]
            payment = {"id": f"p{len(self.payments) + 1}", "to": to, "amount": amount, "key": idempotency_key}
            self.payments.append(payment)
            self.by_key[idempotency_key] = payment
        self._maybe_lose(amount)
        return payment

    def pay_query(self, to: str, amount: int, idempotency_key: str) -> dict[str, Any]:
        if self.fail_before_commit > 0:
            self.fail_before_commit -= 1
            time.sleep(self.fail_after_s)  # hangs before committing anything
            raise TimeoutError("never reached the bank")
        return self.pay_native(to, amount, idempotency_key)

    def status(self, *, key: str, arguments: dict[str, Any]) -> StatusAnswer:
        found = self.by_key.get(key)
        return Committed(found, remote_id=found["id"]) if found else NotCommitted()


STORE = ["memory://"]
"""The store URL of the running test: every test runs on memory, SQLite and PostgreSQL."""


@pytest.fixture(autouse=True, params=["memory", "sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "memory":
        STORE[0] = "memory://"
        yield STORE[0]
    elif request.param == "sqlite":
        STORE[0] = f"sqlite:///{tmp_path / 'actionspace.db'}"
        yield STORE[0]
    else:
        from tests.pg import fresh_schema

        for url in fresh_schema(request.getfixturevalue("pg_url")):
            STORE[0] = url
            yield url


def _runtime(bank: Bank, kind: str, **extra: Any) -> Runtime:
    rt = Runtime(STORE[0], recover_on_start=False)
    # a query tool receives the key too, so its status query can find the payment by it
    fns: dict[str, Callable[..., Any]] = {
        "none": bank.pay_none,
        "native": bank.pay_native,
        "query": bank.pay_query,
    }
    fn = fns[kind]
    options: dict[str, Any] = {"idempotency": kind, "timeout_s": TIMEOUT_S, "retry": FAST}
    if kind == "query":
        options["status_query"] = bank.status
    rt.add_tool(name="pay", input_schema=SCHEMA, fn=fn, effect="external", **{**options, **extra})
    return rt


def _call(rt: Runtime, node: str = "n1", amount: int = 5) -> Any:
    return rt.call(ToolCall(name="pay", arguments={"to": "bob", "amount": amount}), run_id="r1", node_id=node)


@pytest.mark.parametrize("kind", ["none", "native", "query"])
def test_repeating_a_committed_node_returns_the_original_observation_without_sending(kind: str) -> None:
    bank = Bank()
    rt = _runtime(bank, kind)
    first = _call(rt)
    again = _call(rt)
    assert first.ok and again.ok
    assert again.data == first.data
    assert again.diagnostics["replayed"] is True
    assert len(bank.payments) == 1
    entry = rt.ledger.get_node("r1", "n1")
    assert entry is not None and entry.state == "committed" and entry.attempts == 1


def test_the_same_node_with_other_arguments_is_a_conflict_not_a_second_payment() -> None:
    bank = Bank()
    rt = _runtime(bank, "none")
    assert _call(rt, amount=5).ok
    other = _call(rt, amount=500)
    assert other.error is not None and other.error.category == "conflict"
    assert len(bank.payments) == 1


def test_changed_arguments_on_a_new_node_mint_a_new_key() -> None:
    bank = Bank()
    rt = _runtime(bank, "native")
    a, b = _call(rt, "n1", 5), _call(rt, "n2", 6)
    assert a.diagnostics["idempotency_key"] != b.diagnostics["idempotency_key"]
    assert len(bank.payments) == 2


def test_native_tool_whose_response_is_lost_is_asked_again_with_the_same_key_and_commits_once() -> None:
    # the lost response stays away until the key is asked again: its late answer never settles
    # the entry first, however late the second ask comes on a loaded machine
    bank = Bank()
    bank.lose_next_response = 1
    bank.answer_lost_once_asked_again, bank.lost_s = True, 60.0
    rt = _runtime(bank, "native", timeout_s=1.0)  # the second ask answers at once: far within it
    obs = _call(rt)
    assert obs.ok, obs.error
    assert bank.asked_again.is_set()
    assert len(bank.payments) == 1
    assert obs.data["key"] == obs.diagnostics["idempotency_key"]
    entry = rt.ledger.get_node("r1", "n1")
    assert entry is not None and entry.state == "committed" and entry.attempts == 2
    rt.close(wait=True)


def test_query_tool_whose_response_is_lost_is_found_by_its_status_query() -> None:
    bank = Bank()
    bank.lose_next_response = 1
    rt = _runtime(bank, "query")
    obs = _call(rt)
    assert obs.ok, obs.error
    assert obs.data == bank.payments[0]
    assert len(bank.payments) == 1


def test_query_tool_that_never_committed_is_sent_again_with_the_same_key() -> None:
    bank = Bank()
    bank.fail_before_commit = 1
    bank.fail_after_s = 0.0  # its client gave up at once: the attempt is over, the status query is the truth
    rt = _runtime(bank, "query")
    obs = _call(rt)
    assert obs.ok, obs.error
    assert len(bank.payments) == 1


def test_query_tool_is_not_sent_again_while_its_timed_out_attempt_still_runs() -> None:
    bank = Bank()
    bank.fail_before_commit = 1  # hangs past the timeout (and past one more), then fails
    rt = _runtime(bank, "query")
    obs = _call(rt)
    assert obs.error is not None and obs.error.category == "unknown_commit"
    assert "still runs" in obs.error.message
    assert bank.payments == []  # the status query said "not committed", truthfully; nothing was resent
    rt.close(wait=True)
    assert bank.payments == []


def test_a_tool_without_status_query_ends_in_unknown_commit_and_a_person_resolves_it() -> None:
    bank = Bank()
    bank.lose_next_response = 1
    bank.lost_s = 3.0  # its late answer (which would settle the entry) stays away while the test asks again
    rt = _runtime(bank, "none")
    obs = _call(rt)
    assert obs.error is not None and obs.error.category == "unknown_commit"
    assert obs.error.recovery == ("query_status", "reconcile_by_hand")
    assert len(bank.payments) == 1  # it did pay; the runtime honestly does not know
    again = _call(rt)
    assert again.error is not None and again.error.category == "unknown_commit"
    assert len(bank.payments) == 1  # never re-sent blindly
    entry = rt.ledger.get_node("r1", "n1")
    assert entry is not None and entry.state == "unknown_commit"
    resolved = rt.resolve(entry.key, outcome="committed", by="alice", reason="saw p1 in the bank statement")
    assert resolved.state == "committed" and resolved.resolution is not None
    assert resolved.resolution["by"] == "alice"
    assert _call(rt).ok and len(bank.payments) == 1


def test_64_concurrent_threads_with_one_key_execute_once() -> None:
    bank = Bank()
    rt = _runtime(bank, "none", timeout_s=10.0)  # waiting callers must not make the one send time out
    with ThreadPoolExecutor(16) as pool:
        results = list(pool.map(lambda _: _call(rt), range(64)))
    assert all(r.ok for r in results), [r.error for r in results if not r.ok]
    assert len(bank.payments) == 1
    assert len({r.data["id"] for r in results}) == 1


def test_64_concurrent_async_calls_with_one_key_execute_once() -> None:
    bank = Bank()
    rt = _runtime(bank, "none", timeout_s=10.0)
    call = ToolCall(name="pay", arguments={"to": "bob", "amount": 5})

    async def main() -> list[Any]:
        return await asyncio.gather(*(rt.acall(call, run_id="r1", node_id="n1") for _ in range(64)))

    results = asyncio.run(main())
    assert all(r.ok for r in results), [r.error for r in results if not r.ok][:2]
    assert len(bank.payments) == 1


def _stuck(rt: Runtime, node: str, state: str) -> str:
    spec = rt.catalog.get("pay")
    entry = new_entry(
        key=f"as1_{node:0>32}", run_id="r1", node_id=node, spec=spec, arguments={"to": "bob", "amount": 5}
    )
    rt.ledger.begin(entry)
    rt.ledger.transition(entry.key, ("accepted",), entry.evolve(state="dispatched", attempts=1))
    if state == "unknown":
        stored = rt.ledger.get(entry.key)
        assert stored is not None
        rt.ledger.transition(entry.key, ("dispatched",), stored.evolve(state="unknown"))
    return entry.key


@pytest.mark.parametrize(
    ("kind", "bank_has_it", "expected"),
    [
        ("query", True, "committed"),
        ("query", False, "accepted"),
        ("native", False, "accepted"),
        ("none", False, "unknown_commit"),
    ],
)
def test_recover_settles_crashed_entries_without_sending(kind: str, bank_has_it: bool, expected: str) -> None:
    bank = Bank()
    rt = _runtime(bank, kind)
    key = _stuck(rt, "n1", "dispatched")
    if bank_has_it:
        bank.pay_native("bob", 5, key)
    before = len(bank.payments)
    report = rt.recover()
    entry = rt.ledger.get(key)
    assert entry is not None and entry.state == expected
    assert len(bank.payments) == before
    assert key in {
        **{k: 1 for k in report.committed},
        **{k: 1 for k in report.redispatchable},
        **{k: 1 for k in report.unknown_commit},
    }


def test_recover_in_a_process_without_the_tool_reports_unknown_commit_with_its_recovery() -> None:
    if STORE[0] == "memory://":
        pytest.skip("a memory store does not outlive its runtime")
    bank = Bank()
    crashed = _runtime(bank, "native")
    key = _stuck(crashed, "n1", "dispatched")
    crashed.close()
    restarted = Runtime(STORE[0], recover_on_start=False)  # `pay` is not registered here
    try:
        report = restarted.recover()
        entry = restarted.ledger.get(key)
    finally:
        restarted.close()
    assert key in report.unknown_commit and bank.payments == []
    assert entry is not None and entry.state == "unknown_commit" and entry.error is not None
    assert entry.error["category"] == "unknown_commit"
    assert entry.error["recovery"] == list(DEFAULT_RECOVERY["unknown_commit"])
    assert entry.error["resource_ids"] == [key]


def test_status_query_that_cannot_tell_ends_in_unknown_commit() -> None:
    bank = Bank()
    rt = _runtime(bank, "query", status_query=lambda **_: StillUnknown("bank is down"))
    key = _stuck(rt, "n1", "unknown")
    rt.recover()
    entry = rt.ledger.get(key)
    assert entry is not None and entry.state == "unknown_commit"
    assert entry.error is not None and "bank is down" in entry.error["message"]


@pytest.mark.parametrize("kind", ["none", "native", "query"])
def test_execute_and_timeout_never_retries_blindly_and_never_duplicates(kind: str) -> None:
    bank = Bank()
    rt = _runtime(bank, kind, timeout_s=0.1)
    bank.lose_first_response_of_each_amount = True
    trials = 15
    for i in range(trials):
        obs = _call(rt, f"n{i}", amount=i)
        if kind == "none":
            assert obs.error is not None and obs.error.category == "unknown_commit"
        else:
            assert obs.ok, obs.error
    rt.close(wait=True)  # let every timed-out send finish before counting
    assert len(bank.payments) == trials
    assert len({(p["to"], p["amount"]) for p in bank.payments}) == trials
