"""A plan's ``plan_started`` event lists its nodes (with their read/write sets) and its edges, the
same on the memory store and on SQLite."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from actionspace import Plan, PlanNode, Runtime


def _runtime(url: str) -> Runtime:
    rt = Runtime(url)

    @rt.tool(effect="read", reads=["doc:{name}"])
    def read_doc(name: str) -> str:
        """Read a document."""
        return name.upper()

    return rt


PLAN = Plan(
    nodes=[
        PlanNode(id="a", tool="read_doc", arguments={"name": "x"}),
        PlanNode(id="b", tool="read_doc", arguments={"name": "y"}, depends_on=("a",)),
        PlanNode(id="c", tool="read_doc", arguments={"name": "z"}, depends_on=("a", "b")),
    ]
)
WANT = {
    "nodes": [
        {"id": "a", "tool": "read_doc@1", "reads": ["doc:x"]},
        {"id": "b", "tool": "read_doc@1", "reads": ["doc:y"]},
        {"id": "c", "tool": "read_doc@1", "reads": ["doc:z"]},
    ],
    "edges": [["a", "b"], ["a", "c"], ["b", "c"]],
    "added_edges": [],
    "retry": False,
}


def _started(rt: Runtime, run: str) -> dict[str, Any]:
    (event,) = [e for e in rt.trace.events(run) if e.kind == "plan_started"]
    return dict(event.data)


@pytest.mark.parametrize("store", ["memory", "sqlite"])
def test_plan_started_lists_the_nodes_and_edges_as_checked(store: str, tmp_path: Path) -> None:
    rt = _runtime("memory://" if store == "memory" else f"sqlite:///{tmp_path / 'a.db'}")
    run = rt.new_run()
    assert rt.run_plan(PLAN, run_id=run).status == "ok"
    got = _started(rt, run)
    assert {**got, "edges": sorted(got["edges"])} == WANT
    rt.close()
