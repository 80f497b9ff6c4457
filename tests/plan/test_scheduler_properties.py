"""Properties of plan execution: conflicting nodes never overlap, and conflicts keep listing order."""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace import Plan, PlanNode, Runtime
from actionspace.plan import conflicting

ALPHABET = ["res:a", "res:b", "res:c", "res:a/x", "res:d"]


@st.composite
def plans(draw: st.DrawFn) -> list[dict[str, Any]]:
    n = draw(st.integers(min_value=1, max_value=12))
    nodes = []
    for i in range(n):
        reads = draw(st.lists(st.sampled_from(ALPHABET), max_size=2, unique=True))
        writes = draw(st.lists(st.sampled_from(ALPHABET), max_size=2, unique=True))
        delay = draw(st.sampled_from([0, 0, 0.001, 0.003]))
        deps = draw(st.lists(st.integers(0, max(0, i - 1)), max_size=2, unique=True)) if i else []
        nodes.append({"id": f"n{i}", "reads": reads, "writes": writes, "delay": delay, "deps": deps})
    return nodes


def _runtime(
    active: dict[str, tuple[list[str], list[str]]], violations: list[str], log: list[tuple[str, str]]
) -> Runtime:
    rt = Runtime("memory://", recover_on_start=False)

    async def step(node: str, reads: list[str], writes: list[str], delay: float) -> str:
        for other, (r, w) in active.items():
            clash = conflicting(reads, writes, r, w)
            if clash is not None:
                violations.append(f"{node} started while {other} ran, both touching {clash}")
        active[node] = (reads, writes)
        log.append(("start", node))
        await asyncio.sleep(delay)
        del active[node]
        log.append(("end", node))
        return node

    schema = {
        "type": "object",
        "properties": {
            "node": {"type": "string"},
            "reads": {"type": "array", "items": {"type": "string"}},
            "writes": {"type": "array", "items": {"type": "string"}},
            "delay": {"type": "number"},
        },
        "required": ["node", "reads", "writes", "delay"],
    }
    rt.add_tool(
        name="reader",
        input_schema=schema,
        fn=step,
        effect="read",
        reads=["res:"],
    )
    rt.add_tool(
        name="writer",
        input_schema=schema,
        fn=step,
        effect="write",
        reads=["res:"],
        writes=["res:"],
    )
    return rt


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plans(), st.integers(min_value=1, max_value=8))
def test_no_execution_runs_two_conflicting_nodes_at_once(spec: list[dict[str, Any]], limit: int) -> None:
    active: dict[str, tuple[list[str], list[str]]] = {}
    violations: list[str] = []
    log: list[tuple[str, str]] = []
    rt = _runtime(active, violations, log)
    nodes = [
        PlanNode(
            id=s["id"],
            tool="writer" if s["writes"] else "reader",
            arguments={"node": s["id"], "reads": s["reads"], "writes": s["writes"], "delay": s["delay"]},
            reads=tuple(s["reads"]),
            writes=tuple(s["writes"]) if s["writes"] else None,
            depends_on=tuple(f"n{d}" for d in s["deps"]),
        )
        for s in spec
    ]
    result = rt.run_plan(Plan(nodes=nodes), max_concurrency=limit)
    assert violations == []
    assert result.status == "ok", result.failed
    assert list(result.nodes) == [s["id"] for s in spec]  # keyed by node id, in plan order
    assert all(result.nodes[s["id"]].data == s["id"] for s in spec)
    ends = {node: i for i, (kind, node) in enumerate(log) if kind == "end"}
    starts = {node: i for i, (kind, node) in enumerate(log) if kind == "start"}
    for i, a in enumerate(spec):
        for b in spec[i + 1 :]:
            if conflicting(a["reads"], a["writes"], b["reads"], b["writes"]) is not None:
                assert ends[a["id"]] < starts[b["id"]], f"{a['id']} must finish before {b['id']} starts"
        for d in a["deps"]:
            assert ends[f"n{d}"] < starts[a["id"]]
    assert result.stats["max_parallel"] <= limit
    rt.close()
