"""A plan object run again is not checked again (``plan/_simple_plan.py`` ``keep`` / ``kept``),
yet the check it gets is always what a new check of it would give: its arguments changed in
place, a tool replaced in the catalog, a principal refused a tool, another run."""

from __future__ import annotations

import asyncio
import gc
import importlib
import weakref
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace import Plan, PlanNode, Runtime
from actionspace.errors import ActionError
from actionspace.plan.check import CheckedPlan
from actionspace.plan.run import preflight
from actionspace.policy.principal import Principal

ALL = Principal(id="all", scopes=("*",))
SOME = Principal(id="some", scopes=("none:*",))
"""Lacks ``vault:open``, which tool ``b`` needs."""
SCHEMA = {"type": "object", "properties": {"x": {}}, "required": ["x"]}


def _runtime() -> Runtime:
    rt = Runtime("memory://", recover_on_start=False)
    rt.add_tool(name="a", input_schema=SCHEMA, fn=lambda x: x, effect="none", version="1")
    rt.add_tool(name="b", input_schema=SCHEMA, fn=lambda x: x, effect="none", scopes=("vault:open",))
    rt.add_tool(name="c", input_schema=SCHEMA, fn=lambda x: x, effect="none")
    return rt


def _view(checked: CheckedPlan | ActionError) -> Any:
    """Everything a check decides, each spec by identity (a kept check must hold the very spec a
    new check resolves)."""
    if isinstance(checked, ActionError):
        return checked.to_dict()
    nodes = [
        (
            k,
            c.node,
            c.index,
            [id(s) for s in c.specs],
            c.reads,
            c.writes,
            c.refs,
            sorted(c.preds),
            sorted(c.needs),
            list(c.succs),
            c.scalar_arguments,
            c.needs is c.preds,
            (c.members, c.group),
        )
        for k, c in checked.nodes.items()
    ]
    plan = (checked.edges, checked.added_edges, checked.order, checked.topo, checked.units)
    return nodes, plan, checked.max_concurrency, checked.bare, checked.plain


@st.composite
def plans(draw: st.DrawFn) -> Plan:
    n = draw(st.integers(min_value=1, max_value=7))
    nodes = []
    for i in range(n):
        earlier = [f"n{j}" for j in range(i)]
        deps = draw(st.lists(st.sampled_from(earlier), max_size=3, unique=True)) if earlier else []
        tool = draw(st.sampled_from(("a", "b", "c")))
        x = draw(st.integers(0, 9))
        nodes.append(PlanNode(id=f"n{i}", tool=tool, arguments={"x": x}, depends_on=tuple(deps)))
    return Plan(nodes=nodes, max_concurrency=draw(st.sampled_from((None, 2))))


CHANGES = ("none", "nested", "text", "replaced", "retired", "refused", "run")


def _change(rt: Runtime, plan: Plan, change: str, at: int) -> tuple[Principal, str | None]:
    """Apply ``change`` between two checks of ``plan``: the principal and the run (None: the
    first one) of the second check."""
    node = plan.nodes[at % len(plan.nodes)]
    arguments: Any = node.arguments
    if change == "nested":  # the caller's dict, changed in place: the node now needs a copy
        arguments["x"] = [1, {"y": 2}]
    elif change == "text":
        arguments["x"] = "still a scalar"
    elif change == "replaced":  # a new version of ``a``, the old one retired
        rt.add_tool(name="a", input_schema=SCHEMA, fn=lambda x: -x, effect="none", version="2")
        rt.catalog.retire("a@1")
    elif change == "retired":
        rt.catalog.retire("a@1")
    elif change == "refused":
        return SOME, None
    elif change == "run":
        return ALL, rt.new_run()
    return ALL, None


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plan=plans(), change=st.sampled_from(CHANGES), at=st.integers(0, 6))
def test_a_plan_checked_again_is_checked_as_a_new_check_would(plan: Plan, change: str, at: int) -> None:
    with _runtime() as rt:
        run = rt.engine.run(rt.new_run(), ALL)
        first = preflight(rt.engine, plan, run, ALL)
        principal, other = _change(rt, plan, change, at)
        if other is not None:
            run = rt.engine.run(other, principal)
        again = preflight(rt.engine, plan, run, principal)
        # a plan object never checked before, with the same (frozen) nodes: checked anew
        same = Plan(nodes=plan.nodes, max_concurrency=plan.max_concurrency)
        anew = preflight(rt.engine, same, run, principal)
        assert _view(again) == _view(anew)
        if change in ("none", "text", "run") and isinstance(first, CheckedPlan):
            assert again is first  # nothing a check reads changed: the check is kept


def test_a_plan_object_run_again_is_not_checked_again() -> None:
    plan = Plan(nodes=[PlanNode(id=f"n{i}", tool="a", arguments={"x": i}) for i in range(3)])
    with _runtime() as rt:
        run = rt.engine.run(rt.new_run(), ALL)
        first = preflight(rt.engine, plan, run, ALL)
        assert isinstance(first, CheckedPlan)
        assert preflight(rt.engine, plan, run, ALL) is first
        # a plan holding what a plan checked across the plan cannot hold is checked each time
        grouped = Plan(nodes=[PlanNode(id="n0", tool="a", arguments={"x": [1]})])
        assert preflight(rt.engine, grouped, run, ALL) is not preflight(rt.engine, grouped, run, ALL)


def test_a_plan_run_again_after_its_arguments_changed_runs_them() -> None:
    """The kept check is only what was decided of the arguments' types; the node's call reads the
    arguments themselves each time (and copies them once they nest)."""
    seen: list[Any] = []

    def a(x: Any) -> Any:
        seen.append(x)
        if isinstance(x, list):
            x.append("changed by the tool")
        return x

    plan = Plan(nodes=[PlanNode(id="n0", tool="a", arguments={"x": 1})])
    with Runtime("memory://", recover_on_start=False) as rt:
        rt.add_tool(name="a", input_schema=SCHEMA, fn=a, effect="none")
        run_id = rt.new_run()
        assert rt.run_plan(plan, run_id=run_id).nodes["n0"].data == 1
        plan.nodes[0].arguments["x"] = [2]  # type: ignore[index]
        result = asyncio.run(rt.arun_plan(plan, run_id=run_id))
    assert result.status == "ok" and seen[-1] == [2, "changed by the tool"]
    assert plan.nodes[0].arguments == {"x": [2]}  # the plan's own list was not the tool's


def test_only_a_few_plans_are_kept() -> None:
    from actionspace.plan._simple_plan import KEPT_MAX

    with _runtime() as rt:
        run = rt.engine.run(rt.new_run(), ALL)
        for i in range(30):
            plan = Plan(nodes=[PlanNode(id="n0", tool="a", arguments={"x": i})])
            assert isinstance(preflight(rt.engine, plan, run, ALL), CheckedPlan)
            assert 1 <= len(rt.engine.checked_plans) <= KEPT_MAX


class _Watched(Plan):
    """A plan that takes weak references (a Plan has slots, no ``__weakref__``)."""


def _run_and_close(plans: list[Plan]) -> tuple[list[weakref.ref[Any]], list[weakref.ref[Any]]]:
    """Run each plan twice (its check kept) over a runtime of its own tool, close it; weak
    references to the plans and to the tools' functions (nothing else holds them)."""
    tools: list[weakref.ref[Any]] = []
    for plan in plans:

        def fn(x: Any) -> Any:
            return x

        with Runtime("memory://", recover_on_start=False) as rt:
            rt.add_tool(name="a", input_schema=SCHEMA, fn=fn, effect="none")
            for _ in range(2):
                assert rt.run_plan(plan).status == "ok"
        tools.append(weakref.ref(fn))
    return [weakref.ref(plan) for plan in plans], tools


SHARED_SPEC_CACHES = (
    ("actionspace.validation.validator", "_COMPILED"),
    ("actionspace.discovery.runs", "_HASHES"),
    ("actionspace.catalog._callables", "_PARAMETERS"),
)
"""Bounded caches by spec or function that every runtime shares (so a tool registered again is
not compiled or hashed again), outside the plan package: emptied before the tools are counted."""


def test_a_closed_runtime_keeps_none_of_its_plans_or_tools_alive() -> None:
    """The kept checks go with their engine: once a closed runtime is dropped, the plans it ran,
    their checks and specs, and the tools' functions are collectable (a cache in the plan package
    held the last plans run, and through their specs the tools' functions)."""
    nodes = [PlanNode(id=f"n{i}", tool="a", arguments={"x": i}) for i in range(3)]
    plans, tools = _run_and_close([_Watched(nodes=nodes) for _ in range(3)])
    gc.collect()
    assert [ref() for ref in plans] == [None] * 3
    for module, name in SHARED_SPEC_CACHES:
        getattr(importlib.import_module(module), name, {}).clear()
    gc.collect()
    assert [ref() for ref in tools] == [None] * 3
