"""``Engine.anode`` (a plan node's call, on the precompiled path when it qualifies) gives what
``aprepare`` then ``aexecute`` give: the same events, observations and flow state."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace import Runtime, ToolCall
from actionspace.execution.ready import Ready
from actionspace.pipeline.engine import Engine
from actionspace.pipeline.fast import FastPath
from actionspace.trace.recorder import Recorder
from actionspace.types import Observation
from tests.pipeline.test_fast import PRINCIPALS, RUN, ToolShape, _runtime, _view, arguments, tool_shapes


async def _node(
    engine: Engine,
    run: Any,
    call: ToolCall,
    who: Any,
    rec: Recorder,
    node: str,
    *,
    one_step: bool,
    plain: bool = False,
) -> Observation:
    """A node's call as the plan runner makes it (a failure of ours is typed, never raised).

    ``plain``: first ``Engine.plain_node``, as the runner tries it for a plain node."""
    try:
        if plain:
            quick = engine.plain_node(
                run, call.name, dict(call.arguments), node_id=node, principal=who, rec=rec
            )
            if quick is not None:
                return quick if isinstance(quick, Observation) else await quick
        if one_step:
            return await engine.anode(run, call, principal=who, rec=rec, node_id=node)
        ready = await engine.aprepare(run, call, principal=who, rec=rec, node_id=node)
        return await engine.aexecute(ready, rec) if isinstance(ready, Ready) else ready
    except Exception as exc:
        return engine.internal(exc, rec)


def _play(
    rt: Runtime, calls: list[tuple[str, dict[str, Any], str]], *, one_step: bool, plain: bool = False
) -> dict[str, Any]:
    run_id = rt.new_run(RUN)
    engine = rt.engine
    state = engine.run(run_id)

    async def play() -> list[Observation]:
        out = []
        for i, (name, args, who) in enumerate(calls):
            principal = PRINCIPALS[who] or state.principal
            node = f"n{i}"
            call = ToolCall(name=name, arguments=dict(args), id=f"{run_id}:{node}")
            rec = Recorder(state, call.id)
            obs = await _node(engine, state, call, principal, rec, node, one_step=one_step, plain=plain)
            engine.flush(rec)
            out.append(obs)
        for obs in out:  # the model is shown the plan's observations when it ends
            state.flow.observed(obs)
        return out

    return _view(rt, run_id, asyncio.run(play()))


node_calls = st.lists(
    st.tuples(st.sampled_from(["t0", "t1", "t2", "nope"]), arguments, st.sampled_from(list(PRINCIPALS))),
    min_size=1,
    max_size=6,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    tools=st.lists(tool_shapes, min_size=1, max_size=3, unique_by=lambda t: t.name),
    calls=node_calls,
    policy=st.sampled_from(["default", "none", "allow_all", "read_clearance"]),
)
def test_a_plan_nodes_call_in_one_step_gives_what_prepare_then_execute_give(
    tools: list[ToolShape], calls: list[tuple[str, dict[str, Any], str]], policy: str
) -> None:
    with _runtime(tools, policy, fast=True) as one, _runtime(tools, policy, fast=True) as two:
        want = _play(two, calls, one_step=False)
        assert _play(one, calls, one_step=True) == want


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    tools=st.lists(tool_shapes, min_size=1, max_size=3, unique_by=lambda t: t.name),
    calls=node_calls,
    policy=st.sampled_from(["default", "none", "allow_all", "read_clearance"]),
)
def test_a_plain_nodes_call_without_call_objects_gives_what_the_stages_give(
    tools: list[ToolShape], calls: list[tuple[str, dict[str, Any], str]], policy: str
) -> None:
    with _runtime(tools, policy, fast=True) as plain, _runtime(tools, policy, fast=False) as staged:
        want = _play(staged, calls, one_step=False)
        assert _play(plain, calls, one_step=True, plain=True) == want


def test_a_plain_node_of_an_instant_tool_runs_without_the_engine_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The plan runner's precompiled node: no ``ToolCall``, no ``Engine.anode`` for a node whose tool
    the run resolved already; a node it cannot take (a rejected argument) goes the general way."""
    general: list[str] = []
    original = Engine.anode

    async def spy(self: Engine, run: Any, call: ToolCall, **kwargs: Any) -> Any:
        general.append(kwargs["node_id"])
        return await original(self, run, call, **kwargs)

    monkeypatch.setattr(Engine, "anode", spy)
    tools = [ToolShape("t0", "none", True, "public", "trusted", "int")]
    with _runtime(tools, "default", fast=True) as rt:
        run = rt.new_run(RUN)
        rt.call(ToolCall(name="t0", arguments={"a": 0}), run_id=run)  # the run resolves t0
        plan = {
            "nodes": [
                {"id": "p", "tool": "t0", "arguments": {"a": 1}},
                {"id": "q", "tool": "t0", "arguments": {"a": 2, "b": 3}},
                {"id": "r", "tool": "t0", "arguments": {"a": 4, "s": "x" * 20}},
            ]
        }
        result = rt.run_plan(plan, run_id=run)
    assert {k: o.data for k, o in result.nodes.items()} == {"p": 1, "q": 5, "r": 4}
    assert general == []


def test_a_simple_nodes_call_is_executed_on_the_precompiled_path(monkeypatch: pytest.MonkeyPatch) -> None:
    taken: list[str] = []
    original = FastPath.execute

    async def spy(self: FastPath, ready: Ready, *args: Any, **kwargs: Any) -> Any:
        taken.append(ready.node_id)
        return await original(self, ready, *args, **kwargs)

    monkeypatch.setattr(FastPath, "execute", spy)
    tools = [ToolShape("t0", "none", True, "public", "trusted", "int")]
    with _runtime(tools, "default", fast=True) as rt:
        calls: list[tuple[str, dict[str, Any], str]] = [
            ("t0", {"a": 1}, "default"),
            ("t0", {"a": 2, "b": 3}, "default"),
            ("t0", {"a": "x"}, "default"),
        ]
        played = _play(rt, calls, one_step=True)
    assert [o["status"] for o in played["observations"]] == ["ok", "ok", "error"]
    assert [o.get("data") for o in played["observations"][:2]] == [1, 5]
    assert taken == ["n1"]  # n0 resolves the name (staged); n2 is rejected by the schema
