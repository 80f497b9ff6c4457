"""A call the budget check lets through uncharged as a replay of its ledger entry is admitted by
the budget after all when the ledger would send it: the entry was purged between the check and
the ledger's read (the send is a fresh one), or the tool is an ``all_or_nothing`` batch whose
failed unit the batch sends again under its next attempt's node. Refused: ``budget_exceeded``,
nothing written or sent. Admitted: charged and settled as any admitted call."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actionspace import Budget, Runtime
from actionspace.catalog.spec import RetryPolicy
from actionspace.ledger.entries import LedgerStore
from actionspace.pipeline import stages
from actionspace.types import Observation

SCHEMA = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}
ITEMS = {
    "type": "object",
    "properties": {"items": {"type": "array", "items": {"type": "object"}}},
    "required": ["items"],
}


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    yield "memory://" if request.param == "memory" else f"sqlite:///{tmp_path / 'exempt.db'}"


def _call(rt: Runtime, caller: str, raw: dict[str, Any]) -> Observation:
    if caller == "sync":
        return rt.call(raw, run_id="r", node_id="n1")
    return asyncio.run(asyncio.wait_for(rt.acall(raw, run_id="r", node_id="n1"), 10))


def _purge_after_the_check(monkeypatch: pytest.MonkeyPatch, rt: Runtime) -> list[bool]:
    decisions: list[bool] = []
    decide = stages.replayed

    def decide_then_purge(ledger: LedgerStore, key: str) -> bool:
        exempt = decide(ledger, key)
        decisions.append(exempt)
        assert rt.ledger.purge(older_than=float("inf")) == 1  # between the check and the ledger's read
        return exempt

    monkeypatch.setattr(stages, "replayed", decide_then_purge)
    return decisions


def _put_runtime(store: str, budget: Budget, sent: list[int]) -> Runtime:
    def put(x: int) -> int:
        sent.append(x)
        return x * 10

    rt = Runtime(store, recover_on_start=False, budgets=budget)
    rt.add_tool(name="put", input_schema=SCHEMA, fn=put, effect="write", retry=RetryPolicy(max_attempts=1))
    return rt


@pytest.mark.parametrize("caller", ["sync", "async"])
def test_a_replay_whose_entry_is_purged_before_the_ledger_reads_it_is_refused_over_budget(
    monkeypatch: pytest.MonkeyPatch, store: str, caller: str
) -> None:
    sent: list[int] = []
    with _put_runtime(store, Budget(calls=1), sent) as rt:
        assert _call(rt, "sync", {"name": "put", "arguments": {"x": 1}}).ok
        decisions = _purge_after_the_check(monkeypatch, rt)

        again = _call(rt, caller, {"name": "put", "arguments": {"x": 1}})

        assert decisions == [True]
        assert sent == [1], again.to_dict()
        assert again.error is not None and again.error.category == "budget_exceeded", again.error
        assert rt.meter is not None and rt.meter.used(run_id="r").calls == 1
        assert rt.ledger.get_node("r", "n1") is None  # nothing written for the refused send


@pytest.mark.parametrize("caller", ["sync", "async"])
def test_a_replay_whose_entry_is_purged_is_sent_and_charged_when_the_budget_fits(
    monkeypatch: pytest.MonkeyPatch, store: str, caller: str
) -> None:
    sent: list[int] = []
    with _put_runtime(store, Budget(calls=2), sent) as rt:
        assert _call(rt, "sync", {"name": "put", "arguments": {"x": 1}}).ok
        decisions = _purge_after_the_check(monkeypatch, rt)

        again = _call(rt, caller, {"name": "put", "arguments": {"x": 1}})

        assert decisions == [True]
        assert again.ok and again.data == 10 and not again.diagnostics.get("replayed"), again.to_dict()
        assert sent == [1, 1]
        assert rt.meter is not None and rt.meter.used(run_id="r").calls == 2
        assert again.diagnostics.get("budget_remaining") == {"calls": 0}
        entry = rt.ledger.get_node("r", "n1")
        assert entry is not None and entry.state == "committed"
        monkeypatch.undo()
        third = _call(rt, caller, {"name": "put", "arguments": {"x": 1}})
        assert third.ok and third.diagnostics.get("replayed") is True  # a replay again: free
        assert sent == [1, 1] and rt.meter.used(run_id="r").calls == 2


@pytest.mark.parametrize("caller", ["sync", "async"])
def test_an_all_or_nothing_batch_that_failed_for_good_is_charged_when_sent_again(
    store: str, caller: str
) -> None:
    sent: list[list[dict[str, Any]]] = []

    def place(items: list[dict[str, Any]]) -> str:
        sent.append(items)
        if len(sent) == 1:
            raise ValueError("the order book rejected it")
        return "placed"

    rt = Runtime(store, recover_on_start=False, budgets=Budget(calls=1))
    rt.add_tool(
        name="place",
        input_schema=ITEMS,
        fn=place,
        effect="write",
        batch="all_or_nothing",
        retry=RetryPolicy(max_attempts=1),
    )
    raw = {"name": "place", "arguments": {"items": [{"id": "a"}, {"id": "b"}]}}
    with rt:
        first = _call(rt, "sync", raw)
        assert first.error is not None and first.error.category == "unclassified", first.to_dict()
        entry = rt.ledger.get_node("r", "n1")
        assert entry is not None and entry.state == "failed"

        again = _call(rt, caller, raw)  # the batch sends its failed unit again, under n1~2

        assert len(sent) == 1, again.to_dict()
        assert again.error is not None and again.error.category == "budget_exceeded", again.to_dict()
        assert rt.meter is not None and rt.meter.used(run_id="r").calls == 1
