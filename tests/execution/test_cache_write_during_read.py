"""A read that was under way when a write landed never leaves its (older) answer in the cache."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from actionspace import Runtime, ToolCall
from actionspace.execution.cache import ReadCache

WAIT_S = 10.0


class Ledger:
    """Balances whose reads can be held open, so a write lands while a read is under way."""

    def __init__(self) -> None:
        self.balances = {"a": 100, "b": 5}
        self.hold = False
        self.reading = threading.Event()
        self.release = threading.Event()
        self.reads = 0

    def balance(self, account: str) -> int:
        value = self.balances[account]
        self.reads += 1
        if self.hold:
            self.hold = False
            self.reading.set()
            assert self.release.wait(WAIT_S)
        return value

    def deposit(self, account: str, amount: int) -> int:
        self.balances[account] += amount
        return self.balances[account]


def make() -> tuple[Runtime, Ledger]:
    ledger = Ledger()
    rt = Runtime("memory://", cache=ReadCache())
    rt.add_tool(
        name="balance",
        input_schema={"type": "object", "properties": {"account": {"type": "string"}}},
        fn=ledger.balance,
        effect="read",
        reads=["acct:{account}"],
        cache_ttl=3600.0,
    )
    rt.add_tool(
        name="deposit",
        input_schema={
            "type": "object",
            "properties": {"account": {"type": "string"}, "amount": {"type": "integer"}},
        },
        fn=ledger.deposit,
        effect="write",
        writes=["acct:{account}"],
    )
    return rt, ledger


def balance(account: str) -> ToolCall:
    return ToolCall(name="balance", arguments={"account": account})


def deposit(account: str, amount: int) -> ToolCall:
    return ToolCall(name="deposit", arguments={"account": account, "amount": amount})


def read_during_write(rt: Runtime, ledger: Ledger, account: str, written: str) -> Any:
    """``balance(account)`` held open while ``deposit(written, 7)`` commits; the read's observation."""
    ledger.hold = True
    out: dict[str, Any] = {}
    reader = threading.Thread(target=lambda: out.update(obs=rt.call(balance(account), run_id="reader")))
    reader.start()
    assert ledger.reading.wait(WAIT_S)
    assert rt.call(deposit(written, 7), run_id="writer").status == "ok"
    ledger.release.set()
    reader.join(WAIT_S)
    return out["obs"]


def test_a_read_answered_before_an_overlapping_write_is_not_served_after_it() -> None:
    rt, ledger = make()
    racing = read_during_write(rt, ledger, "a", "a")
    assert racing.data == 100  # what the account held when the read looked
    later = rt.call(balance("a"), run_id="later")
    assert later.data == 107
    assert later.provenance.source == "tool"


def test_a_read_overlapping_a_write_is_dropped_while_other_entries_stay() -> None:
    rt, ledger = make()
    assert rt.call(balance("b"), run_id="first").data == 5
    read_during_write(rt, ledger, "a", "a")
    assert rt.call(balance("a"), run_id="later").data == 107
    kept = rt.call(balance("b"), run_id="later")
    assert kept.provenance.source == "cache"


def test_a_read_under_way_during_a_write_elsewhere_is_cached() -> None:
    rt, ledger = make()
    racing = read_during_write(rt, ledger, "a", "b")
    assert racing.data == 100
    reads = ledger.reads
    again = rt.call(balance("a"), run_id="later")
    assert again.data == 100 and again.provenance.source == "cache"
    assert ledger.reads == reads


def test_an_async_read_overlapping_a_write_is_not_served_after_it() -> None:
    rt, ledger = make()

    async def scenario() -> tuple[Any, Any]:
        ledger.hold = True
        reading = asyncio.ensure_future(rt.acall(balance("a"), run_id="reader"))
        assert await asyncio.to_thread(ledger.reading.wait, WAIT_S)
        assert (await asyncio.to_thread(rt.call, deposit("a", 7), run_id="writer")).status == "ok"
        ledger.release.set()
        first = await reading
        return first, await rt.acall(balance("a"), run_id="later")

    first, later = asyncio.run(scenario())
    assert first.data == 100
    assert later.data == 107 and later.provenance.source == "tool"


def test_a_read_that_fails_leaves_nothing_under_way() -> None:
    cache = ReadCache()
    rt = Runtime("memory://", cache=cache)

    def broken(account: str) -> int:
        raise RuntimeError("down")

    rt.add_tool(
        name="balance",
        input_schema={"type": "object", "properties": {"account": {"type": "string"}}},
        fn=broken,
        effect="read",
        cache_ttl=60.0,
    )
    assert rt.call(balance("a")).status == "error"
    assert len(cache) == 0
