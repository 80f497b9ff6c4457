"""Budgets and the read cache across processes: usage in the store, reads dropped by writes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actionspace import Runtime
from actionspace.policy import Principal
from actionspace.policy.budget import Budget
from tests.pg import fresh_schema

ALICE = Principal(id="alice", scopes=("*",), tenant="t1")


@pytest.fixture(params=["sqlite", "postgres"])
def shared_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'shared.db'}"
    else:
        yield from fresh_schema(request.getfixturevalue("pg_url"))


def _runtime(url: str, budget: Budget, calls: list[Any]) -> Runtime:
    rt = Runtime(url, budgets=budget, principal=ALICE, recover_on_start=False)

    @rt.tool(effect="read")
    def lookup(q: str) -> str:
        """Look something up."""
        calls.append(q)
        return q.upper()

    @rt.tool(effect="read", items_from="ids")
    def get_many(ids: list[str]) -> list[str]:
        """Fetch several records."""
        calls.append(ids)
        return ids

    return rt


def test_two_processes_share_a_principals_budget(shared_url: str) -> None:
    calls: list[Any] = []
    budget = Budget(calls=3, per="principal")
    first, second = _runtime(shared_url, budget, calls), _runtime(shared_url, budget, calls)
    run1, run2 = first.new_run(), second.new_run()
    assert first.call({"name": "lookup", "arguments": {"q": "a"}}, run_id=run1).ok
    assert second.call({"name": "lookup", "arguments": {"q": "b"}}, run_id=run2).ok
    assert first.call({"name": "lookup", "arguments": {"q": "c"}}, run_id=run1).ok
    refused = second.call({"name": "lookup", "arguments": {"q": "d"}}, run_id=run2)
    assert refused.error is not None and refused.error.category == "budget_exceeded"
    assert calls == ["a", "b", "c"]
    first.close()
    second.close()


def test_a_restart_does_not_reset_a_budget(shared_url: str) -> None:
    calls: list[Any] = []
    budget = Budget(calls=2, per="principal")
    first = _runtime(shared_url, budget, calls)
    run = first.new_run()
    for q in ("a", "b"):
        assert first.call({"name": "lookup", "arguments": {"q": q}}, run_id=run).ok
    first.close()
    again = _runtime(shared_url, budget, calls)
    refused = again.call({"name": "lookup", "arguments": {"q": "c"}}, run_id=again.new_run())
    assert refused.error is not None and refused.error.category == "budget_exceeded"
    assert calls == ["a", "b"]
    again.close()


def test_a_list_of_ids_counts_as_that_many_items_and_the_rest_is_shown(tmp_path: Path) -> None:
    calls: list[Any] = []
    rt = _runtime(f"sqlite:///{tmp_path / 'b.db'}", Budget(items=5, calls=10), calls)
    run = rt.new_run()
    first = rt.call({"name": "get_many", "arguments": {"ids": ["1", "2", "3"]}}, run_id=run)
    assert first.ok, first.error
    assert first.diagnostics["budget_remaining"] == {"items": 2, "calls": 9}
    refused = rt.call({"name": "get_many", "arguments": {"ids": ["4", "5", "6"]}}, run_id=run)
    assert refused.error is not None and refused.error.category == "budget_exceeded"
    assert rt.call({"name": "get_many", "arguments": {"ids": ["4", "5"]}}, run_id=run).ok
    assert calls == [["1", "2", "3"], ["4", "5"]]
    rt.close()


def test_a_committed_write_drops_the_cached_reads_it_overlaps() -> None:
    balances = {"a1": 100, "a2": 50}
    reads: list[str] = []
    rt = Runtime("memory://")

    @rt.tool(effect="read", cache_ttl=3600, reads=("acct:{account}",))
    def balance(account: str) -> int:
        """An account's balance."""
        reads.append(account)
        return balances[account]

    @rt.tool(effect="write", writes=("acct:{account}",))
    def deposit(account: str, amount: int) -> int:
        """Add to an account."""
        balances[account] += amount
        return balances[account]

    run = rt.new_run()

    def read(account: str, **options: Any) -> Any:
        return rt.call({"name": "balance", "arguments": {"account": account}}, run_id=run, **options).data

    assert read("a1") == 100 and read("a2") == 50
    assert read("a1") == 100 and reads == ["a1", "a2"]  # served from the cache
    assert rt.call({"name": "deposit", "arguments": {"account": "a1", "amount": 5}}, run_id=run).ok
    assert read("a1") == 105  # the write dropped it: read again
    assert read("a2") == 50  # another account's entry stays
    assert reads == ["a1", "a2", "a1"]
    balances["a2"] = 70  # changed behind the runtime's back: the caller asks for a fresh read
    assert read("a2", fresh=True) == 70
    assert read("a2") == 70  # and the fresh result is what is cached now
    assert reads == ["a1", "a2", "a1", "a2"]
