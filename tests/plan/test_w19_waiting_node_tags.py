"""A plain node whose tool waits ends with its observation's tags taken from its tool's entry (the
output label's tags, made once per entry), as a node that answers at once does: its end no longer
asks the label for its tags again (a Python call and a new tuple a node), and its observation is
the one the stages make."""

from __future__ import annotations

import asyncio
import sys
from types import FrameType
from typing import Any

import pytest

from actionspace import Plan, PlanNode, Runtime
from actionspace.policy.labels import Label

BUDGET = 23.5
"""24 while each waiting node's end asked its label for its tags (``Label.tags``)."""


def _runtime(labels: dict[str, Any] | None = None) -> Runtime:
    rt = Runtime("memory://", recover_on_start=False)

    @rt.tool(effect="none", **({"labels": labels} if labels else {}))
    async def nap(x: int) -> int:
        await asyncio.sleep(0)
        return x

    return rt


def _plan(n: int) -> Plan:
    nodes = [PlanNode(id=f"n{i}", tool="nap", arguments={"x": i}) for i in range(n)]
    return Plan(nodes=nodes, max_concurrency=n)


def _calls(rt: Runtime, plan: Plan) -> tuple[int, int, Any]:
    """Python calls in ``actionspace`` while ``plan`` runs on a warm run, those of ``Label.tags``
    among them, and the plan's result."""
    counts = [0, 0]
    tags_code = Label.tags.__code__

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call" and "/actionspace/" in frame.f_code.co_filename:
            counts[0] += 1
            counts[1] += frame.f_code is tags_code

    async def run() -> Any:
        run_id = rt.new_run()
        await rt.arun_plan(plan, run_id=run_id)  # warm: the run's tool entries exist
        sys.setprofile(profile)
        try:
            return await rt.arun_plan(plan, run_id=run_id)
        finally:
            sys.setprofile(None)

    result = asyncio.run(run())
    return counts[0], counts[1], result


def test_a_waiting_nodes_end_asks_its_label_for_no_tags() -> None:
    """One ``Label.tags`` call a node before (each waiting node's end made its tags anew); none now."""
    with _runtime() as rt:
        _, small, ok_small = _calls(rt, _plan(20))
        _, large, ok_large = _calls(rt, _plan(220))
    assert ok_small.status == ok_large.status == "ok"
    assert [o.data for o in ok_large.nodes.values()] == list(range(220))
    assert (large - small) / 200 < 0.1, (small, large)


def test_a_waiting_node_costs_the_whole_package_under_its_budget() -> None:
    """Python calls in every module of ``actionspace`` per node whose tool waits (the fewest of
    three tries: a time-driven flush of a slow machine is no node's cost)."""
    per_node = float("inf")
    with _runtime() as rt:
        for _ in range(3):
            small, _, ok_small = _calls(rt, _plan(20))
            large, _, ok_large = _calls(rt, _plan(220))
            assert ok_small.status == ok_large.status == "ok"
            per_node = min(per_node, (large - small) / 200)
    assert per_node <= BUDGET, per_node


@pytest.mark.parametrize(
    "labels",
    [None, {"confidentiality": "secret"}, {"confidentiality": "internal", "readers": ["ann", "bob"]}],
)
def test_a_waiting_nodes_observation_is_the_stages_one(labels: dict[str, Any] | None) -> None:
    """The same data, provenance tags and trust as the stages give the same node (the precompiled
    path switched off), whatever the tool's label."""
    seen = []
    for fast in (True, False):
        with _runtime(labels) as rt:
            rt.engine.fast.enabled = fast
            result = rt.run_plan(_plan(12), run_id=rt.new_run())
            assert result.status == "ok"
            seen.append(
                [
                    (o.data, o.provenance.labels, o.provenance.trust, o.content_hash)
                    for o in result.nodes.values()
                ]
            )
    assert seen[0] == seen[1]
    assert all(tags for _, tags, _, _ in seen[0])
