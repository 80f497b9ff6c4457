"""Plain nodes (no references, alternatives, members or verifier) take a shorter path through the
scheduler; for generated plans it ends exactly as the general path: same observations, same
events per call, same plan events."""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace import Plan, Runtime
from actionspace.plan import driver
from actionspace.plan.node import is_plain

TOOLS = ("quick", "nap", "add", "picky", "total")


def _runtime() -> Runtime:
    rt = Runtime("memory://", recover_on_start=False)

    @rt.tool(effect="none")
    async def quick(x: int) -> int:
        return x

    @rt.tool(effect="none")
    async def nap(x: int) -> int:
        await asyncio.sleep(0.0005 * (x % 3))
        return x + 1

    @rt.tool(effect="none")
    def add(x: int) -> int:
        return x + 2

    @rt.tool(effect="none")
    async def picky(x: int) -> int:
        if x % 4 == 0:
            raise ValueError(f"{x} is not accepted")
        return x

    @rt.tool(effect="none")
    def total(xs: list[int], x: int = 0) -> int:
        xs.append(99)  # a tool that mutates its arguments must not change the plan
        return sum(xs) + x

    return rt


@st.composite
def plans(draw: st.DrawFn) -> dict[str, Any]:
    n = draw(st.integers(min_value=1, max_value=10))
    nodes: list[dict[str, Any]] = []
    for i in range(n):
        tool = draw(st.sampled_from(TOOLS))
        x: Any = draw(st.integers(0, 9))
        if i and draw(st.booleans()):  # a reference: the general path in both runs
            x = {"$ref": f"n{draw(st.integers(0, i - 1))}.data"}
        arguments: dict[str, Any] = {"xs": [1, 2], "x": x} if tool == "total" else {"x": x}
        deps = draw(st.lists(st.integers(0, i - 1), max_size=2, unique=True)) if i else []
        node = {"id": f"n{i}", "tool": tool, "arguments": arguments}
        if deps:
            node["depends_on"] = [f"n{d}" for d in deps]
        nodes.append(node)
    return {"nodes": nodes, "max_concurrency": draw(st.sampled_from([1, 2, 16]))}


CLOCKS = frozenset({"fetched_at", "wall_s", "max_parallel"})
"""Fields that read a clock, or depend on how calls that wait overlap (a plain node's call begins
in its wave and waits in a task of its own; the general path keeps its first waiting node in the
driver's task): they differ between runs. ``max_parallel`` is checked against the limit."""


def _normal(value: Any, run_id: str) -> Any:
    if isinstance(value, str):
        return value.replace(run_id, "RUN")
    if isinstance(value, dict):
        return {k: _normal(v, run_id) for k, v in value.items() if k not in CLOCKS}
    if isinstance(value, (list, tuple)):
        return [_normal(v, run_id) for v in value]
    return value


def _outcome(rt: Runtime, plan: dict[str, Any]) -> tuple[Any, Any, Any, int]:
    result = rt.run_plan(Plan.from_dict(plan))
    run_id = result.run_id
    nodes = {k: _normal(o.to_dict(), run_id) for k, o in result.nodes.items()}
    per_call: dict[str, list[Any]] = {}
    plan_events: list[Any] = []
    for e in rt.engine.trace.events(run_id):
        if e.kind == "run_started":
            continue
        entry = (e.kind, _normal(dict(e.data), run_id))
        if e.call_id is None:
            plan_events.append(entry)
        else:
            per_call.setdefault(_normal(e.call_id, run_id), []).append(entry)
    return nodes, per_call, plan_events, result.stats["max_parallel"]


FIXTURES_OK = [HealthCheck.function_scoped_fixture]  # monkeypatch is undone inside each example


@settings(max_examples=60, deadline=None, suppress_health_check=FIXTURES_OK)
@given(plan=plans())
def test_the_plain_path_ends_as_the_general_path(plan: dict[str, Any], monkeypatch: Any) -> None:
    fast = _outcome(_runtime(), plan)
    with monkeypatch.context() as m:
        m.setattr(driver, "is_plain", lambda node: False)
        slow = _outcome(_runtime(), plan)
    assert fast[0] == slow[0]
    assert fast[1] == slow[1]
    # the plan's own events: the same, plan_started first and plan_finished last; nodes blocked by
    # failures in different branches are recorded in the order those failures ended, which
    # depends on how the calls that wait overlap
    assert fast[2][0] == slow[2][0] and fast[2][-1] == slow[2][-1]
    assert sorted(fast[2], key=repr) == sorted(slow[2], key=repr)
    for seen in (fast[3], slow[3]):
        assert 1 <= seen <= plan["max_concurrency"]


def test_a_plan_of_plain_nodes_takes_the_plain_path(monkeypatch: Any) -> None:
    taken: dict[str, bool] = {}

    def spy(node: Any) -> bool:
        taken[node.id] = is_plain(node)
        return taken[node.id]

    monkeypatch.setattr(driver, "is_plain", spy)
    plan = {
        "nodes": [
            {"id": "a", "tool": "quick", "arguments": {"x": 1}},
            {"id": "b", "tool": "quick", "arguments": {"x": {"$ref": "a.data"}}},
        ]
    }
    nodes, _per_call, _plan_events, _parallel = _outcome(_runtime(), plan)
    assert nodes["b"]["data"] == 1
    assert taken == {"a": True, "b": False}
