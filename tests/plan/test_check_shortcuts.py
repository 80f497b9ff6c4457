"""``check_plan`` decides the commonest node (one tool, scalar arguments, no read/write sets to
work out) in one short step and orders a plan listed in dependency order without a heap. For
generated plans — valid or not — it ends exactly as the general path: the same checked plan
(nodes, sets, references, edges, orders) or the same error."""

from __future__ import annotations

import sys
from types import FrameType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace import Plan, PlanNode, Runtime
from actionspace.errors import ActionError
from actionspace.plan import check, order
from actionspace.plan.check import CheckedPlan
from actionspace.plan.run import _node_event, preflight
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

    @rt.tool(effect="none", requires_approval=True)
    def ask(x: int = 0) -> int:
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
            c.needs is c.preds,  # one set until a conflict edge orders the node (order.py)
            (c.members, c.group),
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
        m.setattr(check, "simple_plan", lambda *a, **k: None)
        m.setattr(check, "_simple_node", lambda *a, **k: None)
        m.setattr(order, "_listed_in_order", lambda nodes: False)
        general = _checked(plan, who)
    assert fast == general


@st.composite
def mostly_simple_plans(draw: st.DrawFn) -> dict[str, Any]:
    """Plans whose nodes are nearly all simple and listed in dependency order, with now and then
    one thing that is not: an edge to a later node, to itself or to no node, a predecessor named
    twice, a nested or non-JSON argument, a tool that reads, is refused or is unknown, declared
    sets, an independence claim, alternatives, a duplicate or non-ASCII id."""
    n = draw(st.integers(min_value=1, max_value=12))
    ids = [f"n{i}" for i in range(n)]
    odd = draw(st.integers(0, 2 * n + 10))  # past the plan's nodes (most often): nothing odd
    what = draw(st.integers(0, 13))
    if odd < n and what == 0:
        ids[odd] = ids[0] if odd else "n\u00e9"
    nodes: list[dict[str, Any]] = []
    usual = draw(st.sampled_from(["quick", "quick", "ask"]))  # ask needs approval (plan_started says so)
    for i in range(n):
        deps = draw(st.lists(st.integers(0, max(i - 1, 0)), max_size=3, unique=True)) if i else []
        node: dict[str, Any] = {"id": ids[i], "tool": usual, "arguments": {"x": draw(st.integers(0, 3))}}
        if draw(st.booleans()):
            node["arguments"]["y"] = draw(st.sampled_from(["a", 1.5, None, True]))
        node["depends_on"] = [ids[d] for d in deps]
        if i == odd:
            if what == 1:
                node["depends_on"].append(draw(st.sampled_from([*ids, "ghost"])))
            elif what == 2 and node["depends_on"]:
                node["depends_on"].append(node["depends_on"][0])
            elif what == 3:
                node["arguments"]["x"] = draw(st.sampled_from([[1], {"k": 1}, {"$ref": f"{ids[0]}.data"}]))
            elif what == 4:
                node["tool"] = draw(st.sampled_from(["fetch", "put", "missing", "quick", "ask"]))
            elif what in (5, 10, 11):
                node["tool"] = "secret"  # refused to one of the two principals
            elif what == 6:
                node["reads"] = ["doc:1"]
            elif what == 7:
                node["writes"] = []
            elif what == 8:
                node["independent_of"] = [draw(st.sampled_from([*ids, "ghost"]))]
            elif what == 9:
                node.pop("tool")
                node["first_of"] = [{"tool": "quick", "arguments": {"x": 1}}]
        nodes.append(node)
    return {"nodes": nodes}


@settings(max_examples=300, deadline=None, suppress_health_check=FIXTURES_OK)
@given(plan=mostly_simple_plans(), who=st.sampled_from(PRINCIPALS))
def test_a_plan_checked_across_its_nodes_is_checked_as_node_by_node(
    plan: dict[str, Any], who: Principal, monkeypatch: Any
) -> None:
    whole = _checked(plan, who)
    _bare_says_as_node_events(plan, who)
    with monkeypatch.context() as m:
        m.setattr(check, "simple_plan", lambda *a, **k: None)
        by_node = _checked(plan, who)
        m.setattr(check, "_simple_node", lambda *a, **k: None)
        m.setattr(order, "_listed_in_order", lambda nodes: False)
        general = _checked(plan, who)
    assert whole == by_node == general


def _bare_says_as_node_events(plan: dict[str, Any], who: Principal) -> None:
    """A plan checked ``bare`` has nodes whose ``plan_started`` entry is their id and tool alone."""
    run = RT.engine.run(RT.new_run(principal=who), who)
    try:
        checked = preflight(RT.engine, Plan.from_dict(plan), run, who)
    except Exception:
        return
    if isinstance(checked, CheckedPlan) and checked.bare:
        for c in checked.nodes.values():
            assert _node_event(c) == {"id": c.node.id, "tool": c.specs[0].key}


def test_a_node_type_the_json_form_cannot_give_is_checked_node_by_node() -> None:
    """A plan built in code may hold what no JSON plan can (an unhashable predecessor, arguments
    that are not a mapping): checking it across the plan gives up and the per-node checks decide,
    as they did before."""
    run = RT.engine.run(RT.new_run(principal=PRINCIPALS[0]), PRINCIPALS[0])
    odd = [
        PlanNode(id="b", tool="quick", arguments={"x": 1}, depends_on=(["a"],)),  # type: ignore[arg-type]
        PlanNode(id="b", tool="quick", arguments={"x": 1}, depends_on=(3,)),  # type: ignore[arg-type]
        PlanNode(id="b", tool=["quick"], arguments={"x": 1}),  # type: ignore[arg-type]
    ]
    for node in odd:
        plan = Plan(nodes=[PlanNode(id="a", tool="quick", arguments={"x": 0}), node])
        outcomes = []
        for whole in (True, False):
            with pytest.MonkeyPatch.context() as m:
                if not whole:
                    m.setattr(check, "simple_plan", lambda *a, **k: None)
                try:
                    outcomes.append(_view(preflight(RT.engine, plan, run, PRINCIPALS[0])))
                except Exception as exc:
                    outcomes.append(type(exc).__name__)
        assert outcomes[0] == outcomes[1], node


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
