"""Budgets: admission before dispatch, metering after, in calls, items, bytes and money."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace import Cost, Observation, Plan, Principal, Runtime, ToolCall
from actionspace.errors import ConfigurationError
from actionspace.execution.guarded import observation_bytes
from actionspace.policy.budget import Budget, Budgets, Meter, Reservation, Usage, estimate

ITEMS_SCHEMA = {
    "type": "object",
    "properties": {"items": {"type": "array", "items": {"type": "object"}}},
    "required": ["items"],
}
LOOKUP_SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}


class Tools:
    """A read tool, an async read tool and a per-item batch tool that count what they were sent."""

    def __init__(self) -> None:
        self.lookups: list[str] = []
        self.items: list[str] = []
        self._lock = threading.Lock()

    def lookup(self, q: str) -> dict[str, str]:
        with self._lock:
            self.lookups.append(q)
        return {"q": q}

    async def alookup(self, q: str) -> dict[str, str]:
        await asyncio.sleep(0)  # let the other calls of a gather interleave
        return self.lookup(q)

    def tag(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        with self._lock:
            self.items.extend(str(i["id"]) for i in items)
        return [{"tagged": i["id"]} for i in items]


def make(*budgets: Budget, per_call: float = 0.0, **lookup: Any) -> tuple[Runtime, Tools]:
    tools = Tools()
    rt = Runtime("memory://", budgets=list(budgets))
    cost = Cost(per_call=per_call)
    rt.add_tool(
        name="lookup", input_schema=LOOKUP_SCHEMA, fn=tools.lookup, effect="read", cost=cost, **lookup
    )
    rt.add_tool(name="alookup", input_schema=LOOKUP_SCHEMA, fn=tools.alookup, effect="read", cost=cost)
    rt.add_tool(
        name="tag",
        input_schema=ITEMS_SCHEMA,
        fn=tools.tag,
        effect="write",
        batch="per_item",
        cost=Cost(per_item=0.1),
    )
    return rt, tools


def lookup(q: str = "x") -> ToolCall:
    return ToolCall(name="lookup", arguments={"q": q})


def tag(*ids: str) -> ToolCall:
    return ToolCall(name="tag", arguments={"items": [{"id": i} for i in ids]})


def test_a_call_over_the_calls_budget_is_refused_and_nothing_is_dispatched() -> None:
    rt, tools = make(Budget(calls=2))
    assert [rt.call(lookup(q), run_id="r").status for q in "ab"] == ["ok", "ok"]
    refused = rt.call(lookup("c"), run_id="r")
    assert refused.error is not None and refused.error.category == "budget_exceeded"
    assert tools.lookups == ["a", "b"]
    kinds = [e.kind for e in rt.trace.events("r")]
    assert kinds.count("dispatched") == 2


def test_budget_exceeded_names_the_budget_the_usage_the_estimate_and_what_remains() -> None:
    rt, _ = make(Budget(calls=1))
    rt.call(lookup("a"), run_id="r")
    error = rt.call(lookup("b"), run_id="r").error
    assert error is not None
    assert error.details["budget"] == {"per": "run", "calls": 1}
    assert error.details["unit"] == "calls"
    assert error.details["used"]["calls"] == 1
    assert error.details["estimate"]["calls"] == 1
    assert error.details["remaining"] == {"calls": 0}
    assert error.recovery == ("cheaper_path", "request_budget")


def test_the_trace_records_the_estimate_and_remaining_before_dispatch_and_the_charge_after() -> None:
    rt, _ = make(Budget(calls=1, money=1.0), per_call=0.25)
    rt.call(lookup("a"), run_id="r")
    rt.call(lookup("b"), run_id="r")
    events = rt.trace.events("r")
    kinds = [e.kind for e in events]
    budget = [e.data for e in events if e.kind == "budget"]
    assert budget[0]["verdict"] == "allowed"
    assert budget[0]["estimate"]["money"] == 0.25
    assert budget[0]["remaining"] == {"calls": 1, "money": 1.0}
    assert budget[1]["verdict"] == "denied" and budget[1]["unit"] == "calls"
    assert budget[1]["remaining"] == {"calls": 0, "money": 0.75}
    assert kinds.index("budget") < kinds.index("dispatched") < kinds.index("metered")
    charged = next(e.data["charged"] for e in events if e.kind == "metered")
    assert charged["calls"] == 1 and charged["money"] == 0.25


def test_per_run_budgets_start_afresh_in_each_run_and_per_principal_budgets_do_not() -> None:
    rt, _ = make(Budget(calls=1))
    assert rt.call(lookup(), run_id="r1").ok and rt.call(lookup(), run_id="r2").ok
    shared, _ = make(Budget(calls=1, per="principal"))
    alice = Principal(id="alice", scopes=("*",))
    bob = Principal(id="bob", scopes=("*",))
    assert shared.call(lookup(), run_id="r1", principal=alice).ok
    second = shared.call(lookup(), run_id="r2", principal=alice)
    assert second.error is not None and second.error.category == "budget_exceeded"
    assert shared.call(lookup(), run_id="r3", principal=bob).ok


def test_money_is_charged_from_the_tool_cost_until_it_runs_out() -> None:
    rt, tools = make(Budget(money=0.5), per_call=0.25)
    statuses = [rt.call(lookup(q), run_id="r").status for q in "abc"]
    assert statuses == ["ok", "ok", "error"]
    assert rt.budget(run_id="r") == {"money": 0.0}
    assert tools.lookups == ["a", "b"]


def test_observation_bytes_are_charged_as_shown_and_a_call_needs_room_for_its_largest_observation() -> None:
    rt, tools = make(Budget(bytes=300), max_observation_bytes=256)
    shown: list[Observation] = []
    while True:
        obs = rt.call(lookup("x" * 10), run_id="r")
        if not obs.ok:
            break
        shown.append(obs)
    assert obs.error is not None and obs.error.details["estimate"]["bytes"] == 256
    assert rt.meter is not None
    used = rt.meter.used(run_id="r")
    assert used.bytes == sum(observation_bytes(o) for o in shown) > 0
    assert used.bytes <= 300 and 300 - used.bytes < 256
    assert len(tools.lookups) == len(shown)


def test_splitting_a_batch_into_single_calls_does_not_escape_the_items_budget() -> None:
    rt, tools = make(Budget(items=5))
    assert rt.call(tag("a", "b", "c"), run_id="r").ok
    singles = [rt.call(tag(i), run_id="r").status for i in "defg"]
    assert singles == ["ok", "ok", "error", "error"]
    assert tools.items == ["a", "b", "c", "d", "e"]
    assert rt.meter is not None and rt.meter.used(run_id="r").items == 5

    rt2, tools2 = make(Budget(items=5))
    assert [rt2.call(tag(i), run_id="r").status for i in "ab"] == ["ok", "ok"]
    too_big = rt2.call(tag("c", "d", "e", "f"), run_id="r")
    assert too_big.error is not None and too_big.error.details["estimate"]["items"] == 4
    assert tools2.items == ["a", "b"]


def test_a_batch_counts_one_call_and_every_item() -> None:
    rt, _ = make(Budget(calls=10), per_call=0.0)
    rt.call(tag("a", "b", "c"), run_id="r")
    assert rt.meter is not None
    used = rt.meter.used(run_id="r")
    assert (used.calls, used.items) == (1, 3)
    assert used.money == pytest.approx(0.3)


def test_budgets_compose_and_the_tightest_one_refuses() -> None:
    combined = Budget(calls=10) & Budget(money=0.5, per="principal")
    assert isinstance(combined, Budgets) and len(combined) == 2
    rt, _ = make(*combined, per_call=0.25)
    statuses = [rt.call(lookup(q), run_id="r").status for q in "abc"]
    assert statuses == ["ok", "ok", "error"]
    assert rt.budget(run_id="r") == {"calls": 8, "money": 0.0}
    assert rt.budget() == {"money": 0.0}


def test_concurrent_calls_never_overrun_the_budget() -> None:
    rt, tools = make(Budget(calls=5))

    async def burst() -> list[Observation]:
        calls = [ToolCall(name="alookup", arguments={"q": str(i)}) for i in range(20)]
        return await asyncio.gather(*(rt.acall(c, run_id="r") for c in calls))

    results = asyncio.run(burst())
    assert sum(o.ok for o in results) == 5
    assert all(o.error is not None and o.error.category == "budget_exceeded" for o in results if not o.ok)
    assert len(tools.lookups) == 5


def test_estimate_shows_the_cost_and_what_remains_before_a_call() -> None:
    rt, _ = make(Budget(calls=3, money=1.0), per_call=0.25)
    rt.call(lookup(), run_id="r")
    seen = rt.estimate(lookup(), run_id="r")
    assert seen["estimate"]["calls"] == 1 and seen["estimate"]["money"] == 0.25
    assert seen["remaining"] == {"calls": 2, "money": 0.75}
    assert seen["fits"] is True
    batch = rt.estimate(tag("a", "b"), run_id="r")
    assert batch["estimate"]["items"] == 2


def test_a_write_replayed_by_the_ledger_costs_no_call() -> None:
    rt, tools = make(Budget(calls=5))
    first = rt.call(tag("a"), run_id="r", node_id="n1")
    again = rt.call(tag("a"), run_id="r", node_id="n1")
    assert first.ok and again.ok
    assert tools.items == ["a"]
    assert rt.meter is not None and rt.meter.used(run_id="r").calls == 1


def test_plan_nodes_are_admitted_against_the_run_budget() -> None:
    rt, tools = make(Budget(calls=2))
    plan = Plan.from_dict(
        {"nodes": [{"id": f"n{i}", "tool": "lookup", "arguments": {"q": str(i)}} for i in range(3)]}
    )
    result = rt.run_plan(plan, run_id="p")
    categories = sorted(o.error.category if o.error else "ok" for o in result.nodes.values())
    assert categories == ["budget_exceeded", "ok", "ok"]
    assert len(tools.lookups) == 2


def test_without_budgets_nothing_is_metered_or_traced() -> None:
    rt, _ = make()
    assert rt.call(lookup(), run_id="r").ok
    assert rt.meter is None and rt.budget(run_id="r") == {}
    assert "budget" not in [e.kind for e in rt.trace.events("r")]


@pytest.mark.parametrize(
    "options",
    [{}, {"calls": -1}, {"money": -0.5}, {"calls": 1, "per": "tenant"}],
)
def test_a_budget_without_limits_or_with_a_bad_limit_is_a_configuration_error(options: Any) -> None:
    with pytest.raises(ConfigurationError):
        Budget(**options)


def test_the_estimate_bounds_bytes_by_the_observation_limit_per_item() -> None:
    rt, _ = make()
    spec = rt.catalog.get("tag")
    usage = estimate(spec, {"items": [{"id": "a"}, {"id": "b"}]})
    assert usage == Usage(calls=1, items=2, bytes=2 * spec.max_observation_bytes, money=0.2)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    sizes=st.lists(st.integers(min_value=1, max_value=4), max_size=12),
    items_limit=st.integers(min_value=0, max_value=12),
    calls_limit=st.integers(min_value=0, max_value=8),
)
def test_metered_usage_never_exceeds_the_limit_and_equals_what_ran(
    sizes: Sequence[int], items_limit: int, calls_limit: int
) -> None:
    rt, tools = make(Budget(items=items_limit, calls=calls_limit))
    ran = 0
    for n, size in enumerate(sizes):
        ids = [f"{n}.{k}" for k in range(size)]
        call = tag(*ids) if size > 1 or n % 2 else lookup(ids[0])
        if rt.call(call, run_id="r").ok:
            ran += 1
    assert rt.meter is not None
    used = rt.meter.used(run_id="r")
    assert used.items <= items_limit and used.calls <= calls_limit
    assert used.items == len(tools.items) + len(tools.lookups)
    assert used.calls == ran


def test_the_meter_settles_a_reservation_to_the_actual_usage() -> None:
    meter = Meter(Budgets(Budget(items=10)))
    reservation = meter.admit("r", ("p", None), Usage(calls=1, items=4, bytes=100))
    assert isinstance(reservation, Reservation)
    assert meter.used(run_id="r").items == 4
    meter.settle(reservation, Usage(calls=1, items=3, bytes=12))
    assert meter.used(run_id="r") == Usage(calls=1, items=3, bytes=12)
    assert meter.used(principal=("p", None)) == Usage(calls=1, items=3, bytes=12)


def test_a_streamed_call_is_charged_once_on_its_final_observation() -> None:
    rt = Runtime("memory://", budgets=[Budget(calls=1)])
    started: list[int] = []

    @rt.tool(effect="read")
    async def tail(n: int) -> AsyncIterator[str]:
        """Stream ``n`` lines."""
        started.append(n)
        for i in range(n):
            yield f"line {i}\n"

    async def stream(n: int) -> list[Observation]:
        return [obs async for obs in rt.astream(ToolCall(name="tail", arguments={"n": n}), run_id="r")]

    first = asyncio.run(stream(3))
    final = first[-1]
    assert final.ok and not final.provisional
    assert rt.meter is not None
    used = rt.meter.used(run_id="r")
    assert used.calls == 1 and used.bytes == observation_bytes(final)
    refused = asyncio.run(stream(2))
    assert len(refused) == 1 and refused[0].error is not None
    assert refused[0].error.category == "budget_exceeded"
    assert started == [3]
