"""The read cache: opt-in per tool, bound to principal, tenant, tool version and canonical arguments."""

from __future__ import annotations

import asyncio
import hashlib
import time
from typing import Any

import pytest
import rfc8785

from actionspace import Principal, Runtime, ToolCall, ToolError
from actionspace.catalog.spec import NO_RETRY
from actionspace.errors import ConfigurationError
from actionspace.execution.cache import ReadCache
from actionspace.policy.budget import Budget

SCHEMA = {
    "type": "object",
    "properties": {"account": {"type": "string"}, "currency": {"type": "string"}},
    "required": ["account"],
}


class Clock:
    """Wall-clock time plus a controllable offset, so tests age entries without sleeping."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset


class Bank:
    """A balance service that counts the requests it serves."""

    def __init__(self) -> None:
        self.requests: list[str] = []
        self.fail_next = False

    def balance(self, account: str, currency: str = "EUR") -> dict[str, Any]:
        self.requests.append(account)
        if self.fail_next:
            self.fail_next = False
            raise ToolError("transient", "the bank is busy")
        return {"account": account, "balance": 100 + len(self.requests), "currency": currency}


def make(
    ttl: float | None = 60.0, *, max_entries: int = 16, effect: str = "read", **options: Any
) -> tuple[Runtime, Bank, Clock]:
    bank, clock = Bank(), Clock()
    rt = Runtime("memory://", cache=ReadCache(max_entries=max_entries, clock=clock), **options)
    rt.add_tool(
        name="balance",
        input_schema=SCHEMA,
        fn=bank.balance,
        effect=effect,
        cache_ttl=ttl,
        retry=NO_RETRY,
    )
    return rt, bank, clock


def balance(account: str = "a", **more: Any) -> ToolCall:
    return ToolCall(name="balance", arguments={"account": account, **more})


def test_a_repeated_read_is_served_from_the_cache_and_says_so() -> None:
    rt, bank, clock = make(ttl=60.0)
    fresh = rt.call(balance(), run_id="r")
    clock.offset = 5.0
    cached = rt.call(balance(), run_id="r")
    assert bank.requests == ["a"]
    assert cached.data == fresh.data and cached.content_hash == fresh.content_hash
    assert fresh.provenance.source == "tool" and cached.provenance.source == "cache"
    assert cached.provenance.fetched_at == fresh.provenance.fetched_at
    assert cached.diagnostics["cache"]["ttl_s"] == 60.0
    assert 5.0 <= cached.diagnostics["cache"]["age_s"] < 6.0
    assert cached.call_id != fresh.call_id
    hits = [e.data for e in rt.trace.events("r") if e.kind == "cache_hit"]
    assert len(hits) == 1 and hits[0]["tool"] == "balance" and hits[0]["ttl_s"] == 60.0


def test_an_entry_older_than_its_ttl_is_fetched_again() -> None:
    rt, bank, clock = make(ttl=10.0)
    rt.call(balance())
    clock.offset = 10.0
    again = rt.call(balance())
    assert again.provenance.source == "tool"
    assert bank.requests == ["a", "a"]


def test_errors_are_never_cached() -> None:
    rt, bank, _ = make()
    bank.fail_next = True
    failed = rt.call(balance())
    assert failed.error is not None and failed.error.category == "transient"
    retried = rt.call(balance())
    assert retried.ok and retried.provenance.source == "tool"
    assert bank.requests == ["a", "a"]


def test_entries_of_one_principal_or_tenant_never_serve_another() -> None:
    rt, bank, _ = make()
    alice = Principal(id="alice", scopes=("*",), tenant="t1")
    alice_elsewhere = Principal(id="alice", scopes=("*",), tenant="t2")
    bob = Principal(id="bob", scopes=("*",), tenant="t1")
    for who in (alice, alice_elsewhere, bob):
        assert rt.call(balance(), principal=who).provenance.source == "tool"
    assert rt.call(balance(), principal=alice).provenance.source == "cache"
    assert len(bank.requests) == 3


def test_a_new_tool_version_misses() -> None:
    rt, bank, _ = make()
    rt.call(balance(), run_id="r1")
    rt.add_tool(
        name="balance", version="2", input_schema=SCHEMA, fn=bank.balance, effect="read", cache_ttl=60.0
    )
    newer = rt.call(balance(), run_id="r2")
    assert newer.tool_version == "2" and newer.provenance.source == "tool"
    assert len(bank.requests) == 2


def test_argument_order_does_not_matter_but_argument_values_do() -> None:
    rt, bank, _ = make()
    rt.call(ToolCall(name="balance", arguments={"account": "a", "currency": "EUR"}))
    same = rt.call(ToolCall(name="balance", arguments={"currency": "EUR", "account": "a"}))
    other = rt.call(ToolCall(name="balance", arguments={"account": "a", "currency": "USD"}))
    assert same.provenance.source == "cache" and other.provenance.source == "tool"
    assert len(bank.requests) == 2


def test_the_cache_is_bounded_and_evicts_the_least_recently_used_entry() -> None:
    rt, bank, _ = make(max_entries=2)
    for account in ("a", "b", "a", "c"):  # "a" is used again, so "b" is the oldest when "c" arrives
        rt.call(balance(account))
    assert rt.call(balance("a")).provenance.source == "cache"
    assert rt.call(balance("b")).provenance.source == "tool"
    assert bank.requests == ["a", "b", "c", "b"]


def test_tools_with_side_effects_are_never_cached() -> None:
    rt, bank, _ = make(effect="write")
    rt.call(balance(), run_id="r", node_id="n1")
    second = rt.call(balance(), run_id="r", node_id="n2")
    assert second.provenance.source == "tool"
    assert len(bank.requests) == 2


def test_tools_without_a_ttl_are_not_cached() -> None:
    rt, bank, _ = make(ttl=None)
    rt.call(balance())
    assert rt.call(balance()).provenance.source == "tool"
    assert len(bank.requests) == 2


def test_a_static_tool_is_kept_however_old_its_entry_is() -> None:
    bank, clock = Bank(), Clock()
    rt = Runtime("memory://", cache=ReadCache(clock=clock))
    rt.add_tool(name="balance", input_schema=SCHEMA, fn=bank.balance, effect="none", cache_static=True)
    first = rt.call(balance())
    clock.offset = 365 * 24 * 3600.0
    later = rt.call(balance())
    assert later.provenance.source == "cache" and later.content_hash == first.content_hash
    assert later.diagnostics["cache"]["ttl_s"] is None and later.diagnostics["cache"]["static"] is True
    assert bank.requests == ["a"]


def test_the_async_path_is_served_from_the_cache_too() -> None:
    rt, bank, _ = make()

    async def twice() -> list[str]:
        first = await rt.acall(balance())
        second = await rt.acall(balance())
        return [first.provenance.source, second.provenance.source]

    assert asyncio.run(twice()) == ["tool", "cache"]
    assert bank.requests == ["a"]


def test_a_cache_hit_costs_no_call_even_when_the_call_budget_is_spent() -> None:
    rt, bank, _ = make(budgets=[Budget(calls=1)])
    assert rt.call(balance(), run_id="r").provenance.source == "tool"
    hit = rt.call(balance(), run_id="r")
    assert hit.ok and hit.provenance.source == "cache"
    refused = rt.call(balance("b"), run_id="r")
    assert refused.error is not None and refused.error.category == "budget_exceeded"
    assert rt.meter is not None and rt.meter.used(run_id="r").calls == 1
    assert bank.requests == ["a"]


def test_a_cacheable_tool_gets_a_default_cache_without_configuration() -> None:
    bank = Bank()
    rt = Runtime("memory://")
    rt.add_tool(name="balance", input_schema=SCHEMA, fn=bank.balance, effect="read", cache_ttl=30.0)
    rt.call(balance())
    assert rt.call(balance()).provenance.source == "cache"
    assert bank.requests == ["a"]


def test_a_cache_without_room_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError):
        ReadCache(max_entries=0)


@pytest.mark.parametrize(
    "arguments",
    [
        {"account": "a", "currency": "EUR"},
        {"b": [1, -2, True, None], "a": {"z": 'é\n"x\\', "y": 2**52}},
        {"amount": 1.0, "ratio": 1e21},
        {"\U0001f600": 1, "\u00e9": 2, "e": 3},
    ],
)
def test_the_cache_key_is_the_hash_of_the_rfc8785_canonical_json(arguments: dict[str, Any]) -> None:
    rt, _, _ = make()
    spec = rt.catalog.get("balance")
    who = Principal(id="alice", scopes=("*",), tenant="t1")
    expected = hashlib.sha256(rfc8785.dumps(["alice", "t1", "balance@1", arguments])).hexdigest()
    assert ReadCache.key(spec, who, arguments) == expected


def test_float_arguments_that_are_equal_numbers_share_an_entry() -> None:
    bank = Bank()
    rt = Runtime("memory://")
    schema = {"type": "object", "properties": {"account": {"type": "string"}, "min": {"type": "number"}}}

    def balance_over(account: str, min: float) -> dict[str, Any]:
        return bank.balance(account)

    rt.add_tool(name="over", input_schema=schema, fn=balance_over, effect="read", cache_ttl=30.0)
    rt.call(ToolCall(name="over", arguments={"account": "a", "min": 1.0}))
    again = rt.call(ToolCall(name="over", arguments={"account": "a", "min": 1}))
    assert again.provenance.source == "cache"
    assert bank.requests == ["a"]


def test_integers_outside_the_rfc8785_domain_still_key_distinct_entries() -> None:
    rt, _, _ = make()
    spec = rt.catalog.get("balance")
    who = Principal(id="alice", scopes=("*",))
    keys = {ReadCache.key(spec, who, {"account": "a", "n": n}) for n in (2**60, 2**60 + 1, 2**52)}
    assert len(keys) == 3
