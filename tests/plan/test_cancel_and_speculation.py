"""Cancellation in three phases, and bounded speculation over read-only alternatives."""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace import ActionError, CancelScope, Cost, Plan, PlanNode, Runtime
from actionspace.validation.verdicts import Accepted, Rejected


def _gated_runtime(gates: dict[str, asyncio.Event], log: list[str]) -> Runtime:
    rt = Runtime("memory://", recover_on_start=False)

    @rt.tool(effect="read", reads=["r:{name}"])
    async def slow_read(name: str) -> str:
        """A read that waits for its gate."""
        log.append(f"start {name}")
        await gates[name].wait()
        log.append(f"end {name}")
        return name

    @rt.tool(effect="write", writes=["w:{name}"])
    async def slow_write(name: str) -> str:
        """A write that waits for its gate."""
        log.append(f"start {name}")
        await gates[name].wait()
        log.append(f"commit {name}")
        return name

    @rt.tool(effect="none")
    def after(x: str) -> str:
        """Runs after another node."""
        log.append(f"after {x}")
        return x

    return rt


def test_three_phase_cancellation() -> None:
    log: list[str] = []

    async def scenario() -> Any:
        gates = {n: asyncio.Event() for n in ("read1", "write1", "read2")}
        rt = _gated_runtime(gates, log)
        scope = CancelScope()
        plan = Plan.from_dict(
            {
                "nodes": [
                    {"id": "r1", "tool": "slow_read", "arguments": {"name": "read1"}},
                    {"id": "w1", "tool": "slow_write", "arguments": {"name": "write1"}},
                    {"id": "r2", "tool": "slow_read", "arguments": {"name": "read2"}},
                    {"id": "w1_next", "tool": "after", "arguments": {"x": {"$ref": "w1.data"}}},
                ]
            }
        )
        task = asyncio.ensure_future(rt.arun_plan(plan, max_concurrency=2, cancel=scope))
        while len(log) < 2:
            await asyncio.sleep(0)
        scope.cancel(reason="user pressed stop")
        for _ in range(5):
            await asyncio.sleep(0)
        gates["write1"].set()  # the dispatched write completes after the cancel
        return await task, rt

    result, rt = asyncio.run(scenario())
    r1, w1, r2, nxt = (result.nodes[k] for k in ("r1", "w1", "r2", "w1_next"))
    assert (
        r1.error is not None and r1.error.category == "cancelled" and r1.error.details["phase"] == "running"
    )
    assert r2.error is not None and r2.error.details["phase"] == "not_dispatched"
    assert "start read2" not in log
    assert w1.ok and w1.diagnostics["cancel"] == {"phase": "committed", "undone": False}
    assert "commit write1" in log
    assert nxt.error is not None and nxt.error.category == "cancelled"
    assert "after write1" not in log
    events = [e for e in rt.trace.events(result.run_id) if e.kind == "plan_node_cancelled"]
    assert {e.data["node"]: e.data["phase"] for e in events} == {
        "r1": "running",
        "w1": "running",
        "r2": "not_dispatched",
    }
    assert [e.data["aborted"] for e in events if e.data["node"] == "w1"] == [False]


def _speculation_runtime(calls: list[str], delays: dict[str, float]) -> Runtime:
    rt = Runtime("memory://", recover_on_start=False)

    async def quote(source: str) -> dict[str, Any]:
        calls.append(source)
        await asyncio.sleep(delays[source])
        return {"source": source, "price": 10 if source != "bad" else None}

    for name, cost in (("quote_a", 1.0), ("quote_b", 1.0), ("quote_c", 5.0)):
        rt.add_tool(
            name=name,
            input_schema={
                "type": "object",
                "properties": {"source": {"type": "string"}},
                "required": ["source"],
            },
            fn=quote,
            effect="read",
            cost=Cost(per_call=cost),
        )
    return rt


def test_speculation_takes_the_first_sufficient_result_and_reports_extra_calls() -> None:
    calls: list[str] = []
    rt = _speculation_runtime(calls, {"bad": 0.0, "slow": 0.2, "fast": 0.01, "pricey": 0.0})

    def sufficient(obs: Any) -> Accepted | Rejected:
        if obs.data["price"] is None:
            return Rejected(ActionError.of("permanent", "no price"))
        return Accepted()

    plan = Plan(
        nodes=[
            PlanNode(
                id="price",
                first_of=(
                    _alt("quote_a", "bad"),
                    _alt("quote_b", "slow"),
                    _alt("quote_a", "fast"),
                    _alt("quote_c", "pricey"),
                ),
                cost_cap=3.0,
                verify=sufficient,
            )
        ]
    )
    result = rt.run_plan(plan)
    obs = result.nodes["price"]
    assert obs.ok and obs.data["source"] == "fast"
    assert obs.diagnostics["speculation"]["extra_calls"] == 2
    assert "pricey" not in calls  # over the cost cap: never launched
    assert result.stats["extra_calls"] == 2
    event = next(e for e in rt.trace.events(result.run_id) if e.kind == "speculation")
    assert event.data["winner"] == 2 and event.data["skipped_by_cost_cap"] == 1
    assert event.data["non_authoritative"] == [0] and event.data["cancelled"] == [1]
    (loser,) = result.speculative["price"]
    assert loser.data["source"] == "bad" and loser.diagnostics["authoritative"] is False
    assert loser.diagnostics["bound_to"] == {"run": result.run_id, "principal": "local", "tool": "quote_a@1"}


def _alt(tool: str, source: str) -> Any:
    from actionspace.plan import Alternative

    return Alternative(tool=tool, arguments={"source": source})


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=8),
        lambda inner: (
            st.lists(inner, max_size=4)
            | st.dictionaries(
                st.sampled_from(
                    [
                        "nodes",
                        "id",
                        "tool",
                        "arguments",
                        "depends_on",
                        "$ref",
                        "first_of",
                        "writes",
                        "reads",
                        "x",
                    ]
                ),
                inner,
                max_size=5,
            )
        ),
        max_leaves=20,
    )
)
def test_any_malformed_plan_is_a_typed_error_never_an_exception(raw: Any) -> None:
    rt = Runtime("memory://", recover_on_start=False)

    @rt.tool(effect="none")
    def echo(x: int = 0) -> int:
        """Echo."""
        return x

    result = rt.run_plan(raw)
    assert result.status in ("ok", "partial", "error")
    if result.status == "error" and not result.nodes:
        assert result.error is not None and result.error.category in (
            "invalid_arguments",
            "permission_denied",
        )


NEAR_VALID = st.lists(
    st.fixed_dictionaries(
        {
            "id": st.sampled_from(["a", "b", "c", ""]),
            "tool": st.sampled_from(["echo", "echo@1", "echo@9", "ghost"]),
            "arguments": st.fixed_dictionaries(
                {},
                optional={
                    "x": st.integers(-3, 3)
                    | st.sampled_from(
                        [{"$ref": "a.data"}, {"$ref": "b.data.k"}, {"$ref": "c"}, {"$ref": "a..x"}]
                    )
                },
            ),
        },
        optional={"depends_on": st.lists(st.sampled_from(["a", "b", "c", "z"]), max_size=2)},
    ),
    min_size=1,
    max_size=4,
)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(NEAR_VALID)
def test_near_valid_plans_end_in_typed_observations(nodes: list[dict[str, Any]]) -> None:
    rt = Runtime("memory://", recover_on_start=False)

    @rt.tool(effect="none")
    def echo(x: int = 0) -> int:
        """Echo."""
        return x

    result = rt.run_plan({"nodes": nodes})
    if result.error is not None:
        assert result.nodes == {} and result.error.category == "invalid_arguments"
    else:
        assert set(result.nodes) == {n["id"] for n in nodes}
        for obs in result.nodes.values():
            assert obs.ok or (
                obs.error is not None and obs.error.category in ("invalid_arguments", "cancelled")
            )
