"""``check_plan`` decides the commonest node (one tool, scalar arguments, no read/write sets to
work out) in one short step and orders a plan listed in dependency order without a heap. For
generated plans — valid or not — it ends exactly as the general path: the same checked plan
(nodes, sets, references, edges, orders) or the same error."""

from __future__ import annotations

import sys
from types import FrameType
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace import Plan, Runtime
from actionspace.errors import ActionError
from actionspace.plan import check, order
from actionspace.plan.check import CheckedPlan
from actionspace.plan.run import preflight
from actionspace.policy.principal import Principal

TOOLS = ("quick", "fetch", "put", "log", "secret", "missing")
"""``missing`` is not in the catalog; ``secret`` needs a scope only the full principal holds."""


def _runtime() -> Runtime:
    rt = Runtime("memory://", recover_on_start=False)

    @rt.tool(effect="none")
    def quick(x: int = 0) -> int:
        return x

    @rt.tool(effect="read", reads=["doc:{x}"])
    def fetch(x: int = 0) -> int:
        return x

    @rt.tool(effect="write", writes=["doc:{x}"])
    def put(x: int = 0) -> int:
        return x

    @rt.tool(effect="write", writes=["log"], write_mode="append")
    def log(x: int = 0) -> int:
        return x

    @rt.tool(effect="none", scopes=("vault:open",))
    def secret(x: int = 0) -> int:
        return x

    return rt


RT = _runtime()
PRINCIPALS = (Principal(id="all", scopes=("*",)), Principal(id="some", scopes=("none:*", "read:*")))


@st.composite
def plans(draw: st.DrawFn) -> dict[str, Any]:
    n = draw(st.integers(min_value=1, max_value=9))
    ids = [f"n{i}" for i in range(n)]
    if draw(st.integers(0, 9)) == 0:  # now and then a duplicate id
        ids[-1] = ids[0]
    nodes: list[dict[str, Any]] = []
    names = [*ids, "ghost"]  # "ghost" names no node
    for i in range(n):
        tool = draw(st.sampled_from(TOOLS))
        x: Any = draw(st.integers(0, 3))
        shape = draw(st.integers(0, 9))
        if shape == 0:
            x = {"$ref": f"{draw(st.sampled_from(names))}.data"}
        elif shape == 1:
            x = [x, 1]
        node: dict[str, Any] = {"id": ids[i], "tool": tool, "arguments": {"x": x}}
        deps = draw(st.lists(st.sampled_from(names), max_size=3, unique=True))
        if deps:
            node["depends_on"] = deps
        if draw(st.integers(0, 5)) == 0:
            node["independent_of"] = [draw(st.sampled_from(names))]
        if draw(st.integers(0, 7)) == 0:
            node["reads"] = ["doc:1"]
        if draw(st.integers(0, 7)) == 0:
            node["writes"] = ["doc:*"]
        if draw(st.integers(0, 11)) == 0:
            node.pop("tool")
            node["first_of"] = [
                {"tool": "quick", "arguments": {"x": 1}},
                {"tool": draw(st.sampled_from(TOOLS)), "arguments": {"x": 2}},
            ]
        nodes.append(node)
    return {"nodes": nodes}


def _view(checked: CheckedPlan | ActionError) -> Any:
    if isinstance(checked, ActionError):
        return checked.to_dict()
    nodes = [
        (
            k,
            c.index,
            [s.key for s in c.specs],
            c.reads,
            c.writes,
            [r.text for r in c.refs],
            sorted(c.preds),
            sorted(c.needs),
            list(c.succs),
            c.scalar_arguments,
        )
        for k, c in checked.nodes.items()
    ]
    return nodes, checked.edges, checked.added_edges, checked.order, checked.topo


def _checked(plan: dict[str, Any], principal: Principal) -> Any:
    try:
        parsed = Plan.from_dict(plan)
    except Exception as exc:  # the JSON form itself is refused: the same in both paths
        return repr(exc)
    run = RT.engine.run(RT.new_run(principal=principal), principal)
    return _view(preflight(RT.engine, parsed, run, principal))


FIXTURES_OK = [HealthCheck.function_scoped_fixture]  # monkeypatch is undone inside each example


@settings(max_examples=150, deadline=None, suppress_health_check=FIXTURES_OK)
@given(plan=plans(), who=st.sampled_from(PRINCIPALS))
def test_the_shortcuts_check_as_the_general_path(
    plan: dict[str, Any], who: Principal, monkeypatch: Any
) -> None:
    fast = _checked(plan, who)
    with monkeypatch.context() as m:
        m.setattr(check, "_simple_node", lambda *a, **k: None)
        m.setattr(order, "_listed_in_order", lambda nodes: False)
        general = _checked(plan, who)
    assert fast == general


def test_a_plan_listed_out_of_order_still_gets_kahns_order() -> None:
    plan = {
        "nodes": [
            {"id": "c", "tool": "quick", "depends_on": ["b"]},
            {"id": "a", "tool": "quick"},
            {"id": "b", "tool": "quick", "depends_on": ["a"]},
        ]
    }
    nodes, _edges, _added, order, topo = _checked(plan, PRINCIPALS[0])
    assert order == ["c", "a", "b"]
    assert topo == ["a", "b", "c"]
    assert [n[0] for n in nodes if n[6]] == ["c", "b"]  # the nodes with predecessors


def _calls_while(work: Any) -> int:
    """Python-level function calls (generators resumed included) made while ``work()`` runs."""
    count = 0

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        nonlocal count
        if event == "call":
            count += 1

    sys.setprofile(profile)
    try:
        work()
    finally:
        sys.setprofile(None)
    return count


def test_checking_a_plain_node_takes_a_handful_of_calls() -> None:
    """A plan of plain nodes (the bench's DAG shape) is checked in a few Python calls per node,
    not by re-running the general per-node checks (before: 13 per node)."""
    who = PRINCIPALS[0]
    run = RT.engine.run(RT.new_run(principal=who), who)

    def plan(n: int) -> Plan:
        deps = ({"depends_on": [f"n{i - 1}"]} for i in range(n))
        return Plan.from_dict(
            {
                "nodes": [
                    {"id": f"n{i}", "tool": "quick", "arguments": {"x": i}, **(d if i else {})}
                    for i, d in enumerate(deps)
                ]
            }
        )

    small, large = plan(10), plan(410)
    calls = [_calls_while(lambda p=p: preflight(RT.engine, p, run, who)) for p in (small, large)]
    per_node = (calls[1] - calls[0]) / 400
    assert per_node <= 3, per_node
