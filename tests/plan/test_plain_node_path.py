"""A plain node's call does per node only what depends on the node: its tool's precompiled entry is
asked of the fast path once per plan and tool, not per node, while nothing it was decided from
changed, an
``int`` result is put in its envelope without the generic shaping, and a plan whose every node is
plain says so once. Each shortcut ends as the general path does: the same observations, events and
flow state, and a tool that changes the catalog, the flow policy or the engine's stages mid-plan is
still noticed by the nodes after it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from actionspace import Plan, PlanNode, Runtime
from actionspace.errors import ActionError
from actionspace.pipeline import fast_nodes
from actionspace.pipeline.fast import FastPath
from actionspace.pipeline.observe import plain_observation
from actionspace.plan.check import CheckedPlan, check_plan
from actionspace.policy.flow_policies import ReadClearance
from actionspace.policy.principal import Principal
from tests.pipeline.test_fast import _strip


def _chain(n: int, tool: str = "quick") -> Plan:
    """``n`` nodes, each after the one before: node i passes ``x=i``."""
    nodes = [
        PlanNode(id=f"n{i}", tool=tool, arguments={"x": i}, depends_on=(f"n{i - 1}",) if i else ())
        for i in range(n)
    ]
    return Plan(nodes=nodes, max_concurrency=n)


def _runtime(*, waits: bool = False, fast: bool = True) -> Runtime:
    rt = Runtime("memory://", recover_on_start=False)
    rt.engine.fast.enabled = fast

    @rt.tool(effect="none")
    async def quick(x: int) -> int:
        if waits:
            await asyncio.sleep(0)
        return x * 3

    return rt


def _play(rt: Runtime, plan: Plan, runs: int = 2) -> tuple[Any, ...]:
    """The last of ``runs`` plans on one run (the first resolves the tool), as read back."""
    run_id = rt.new_run("run-plain")
    for _ in range(runs):
        result = rt.run_plan(plan, run_id=run_id)
    nodes = {k: _strip(o.to_dict()) for k, o in result.nodes.items()}
    events = [(e.seq, e.kind, e.call_id, _strip(e.data)) for e in rt.trace.events(run_id)]
    flow = rt.engine.run(run_id).flow
    return result.status, nodes, events, flow.context, dict(flow.pending), list(flow.seen)


@pytest.mark.parametrize("waits", [False, True])
def test_an_int_result_of_a_plain_node_is_enveloped_without_the_generic_shaping(
    monkeypatch: pytest.MonkeyPatch, waits: bool
) -> None:
    shaped: list[Any] = []
    original = plain_observation

    def spy(*args: Any, **kwargs: Any) -> Any:
        shaped.append(args[2])
        return original(*args, **kwargs)

    with _runtime(waits=waits) as rt:
        staged = _runtime(waits=waits, fast=False)
        with staged:
            want = _play(staged, _chain(30))
        monkeypatch.setattr(fast_nodes, "plain_observation", spy)
        got = _play(rt, _chain(30))
    assert got == want
    assert got[0] == "ok" and [o["data"] for o in got[1].values()] == [3 * i for i in range(30)]
    assert shaped == []


def test_a_plain_node_reads_its_tools_entry_without_asking_the_fast_path_per_node(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked: list[str] = []
    original = FastPath.entry

    def spy(self: FastPath, run: Any, name: str, *args: Any) -> Any:
        asked.append(name)
        return original(self, run, name, *args)

    monkeypatch.setattr(FastPath, "entry", spy)
    with _runtime() as rt:
        run_id = rt.new_run("run-plain")
        assert rt.run_plan(_chain(5), run_id=run_id).status == "ok"  # resolves the tool, builds the entry
        asked.clear()
        result = rt.run_plan(_chain(40), run_id=run_id)
        assert result.status == "ok" and [o.data for o in result.nodes.values()] == [3 * i for i in range(40)]
        longer = rt.run_plan(_chain(120), run_id=run_id)
    assert longer.status == "ok" and [o.data for o in longer.nodes.values()] == [3 * i for i in range(120)]
    # at most once per plan and tool (the plan's runner keeps the entry), never once per node
    assert len(asked) <= 2 and set(asked) <= {"quick"}, asked


def _changing(fast: bool, change: str) -> tuple[Any, ...]:
    """A chain whose node n3's tool changes what the entries were decided from, then the nodes
    after it; played on the precompiled path or on the stages alone."""
    rt = Runtime("memory://", recover_on_start=False)
    rt.engine.fast.enabled = fast
    calls = [0]

    async def secret(x: int) -> int:
        calls[0] += 1
        if calls[0] == 7:  # node n3 of the second plan (the first has three nodes)
            if change == "policy":
                rt.flow_policy = ReadClearance()
            elif change == "stage":  # a stage of the engine's, added while the plan runs
                rt.engine.add_stage(lambda _inp, _draft: ActionError.of("policy_violation", "closed"))
            else:
                rt.add_tool(
                    name="secret",
                    input_schema=schema,
                    fn=lambda x: -x,
                    effect="none",
                    version="2",
                    labels=secret_labels,
                )
                rt.catalog.retire("secret@1")
        return x

    schema = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}
    secret_labels = {"confidentiality": "secret"}
    rt.add_tool(
        name="secret", input_schema=schema, fn=secret, effect="none", version="1", labels=secret_labels
    )
    with rt:
        run_id = rt.new_run("run-change", principal=Principal(id="p", scopes=("none:*",)))
        rt.run_plan(_chain(3, "secret"), run_id=run_id)
        result = rt.run_plan(_chain(6, "secret"), run_id=run_id)
        nodes = {k: _strip(o.to_dict()) for k, o in result.nodes.items()}
        events = [(e.seq, e.kind, e.call_id, _strip(e.data)) for e in rt.trace.events(run_id)]
        flow = rt.engine.run(run_id).flow
        return result.status, nodes, events, flow.context, dict(flow.pending)


@pytest.mark.parametrize("change", ["policy", "catalog", "stage"])
def test_a_tool_that_changes_the_policy_or_the_catalog_mid_plan_is_noticed_by_the_nodes_after_it(
    change: str,
) -> None:
    fast = _changing(True, change)
    assert fast == _changing(False, change)
    statuses = [o["status"] for o in fast[1].values()]
    assert statuses[:4] == ["ok"] * 4 and fast[0] != "ok"
    errors = {o["error"]["category"] for o in fast[1].values() if o.get("error")}
    assert errors & {"policy_violation", "version_mismatch"}


def _accept(_obs: Any) -> None:
    return None


def _checked(plan: Plan, rt: Runtime) -> CheckedPlan:
    spec = rt.engine.catalog.get("quick")
    checked = check_plan(plan, lambda _name: spec, rt.principal)
    assert isinstance(checked, CheckedPlan)
    return checked


def test_a_checked_plan_says_every_node_is_plain_only_when_none_has_a_verifier() -> None:
    with _runtime() as rt:
        assert _checked(_chain(4), rt).plain
        nodes = list(_chain(4).nodes)
        nodes[2] = PlanNode(id="n2", tool="quick", arguments={"x": 2}, depends_on=("n1",), verify=_accept)
        assert not _checked(Plan(nodes=nodes), rt).plain
        nested = [*_chain(2).nodes, PlanNode(id="n2", tool="quick", arguments={"x": {"y": 1}})]
        assert not _checked(Plan(nodes=nested), rt).plain  # not checked across the plan: not asked


def test_a_node_blocked_by_a_failure_and_released_by_an_instant_node_ends_as_on_the_general_path() -> None:
    """An ``ok`` node that answered at once is settled where it began (``plan/_instant.py``); a
    successor it releases that another predecessor's failure blocked meanwhile is settled there
    too, as blocked, with the same observations, events and flow state as the stages give."""

    def plan() -> Plan:
        # ``a`` goes first (the longest chain ahead), ``bad`` fails and blocks ``join``, then
        # ``good``, released by ``a``, answers at once and releases ``join``
        nodes = [
            PlanNode(id="a", tool="picky", arguments={"x": 4}),
            PlanNode(id="bad", tool="picky", arguments={"x": 0}),
            PlanNode(id="good", tool="picky", arguments={"x": 1}, depends_on=("a",)),
            PlanNode(id="join", tool="picky", arguments={"x": 2}, depends_on=("bad", "good")),
            PlanNode(id="after", tool="picky", arguments={"x": 3}, depends_on=("good",)),
        ]
        return Plan(nodes=nodes, max_concurrency=4)

    def runtime(fast: bool) -> Runtime:
        rt = Runtime("memory://", recover_on_start=False)
        rt.engine.fast.enabled = fast

        @rt.tool(effect="none")
        async def picky(x: int) -> int:
            if x == 0:
                raise ValueError("zero is not accepted")
            return x

        return rt

    with runtime(True) as rt, runtime(False) as staged:
        got, want = _play(rt, plan()), _play(staged, plan())
    assert got == want
    status, nodes = got[0], got[1]
    assert status != "ok" and nodes["good"]["data"] == 1 and nodes["after"]["data"] == 3
    assert nodes["bad"]["error"]["category"] != "cancelled"
    assert nodes["join"]["error"]["category"] == "cancelled"
    assert nodes["join"]["error"]["details"]["blocked_by"] == "bad"
