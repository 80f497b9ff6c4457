"""Side-effecting calls prepared on the precompiled path end exactly as the stages end them.

Writes, external calls and sinks under every built-in policy, with run labels that make a policy
object (then the stages run), with and without node ids, several identical calls in one message
(their identity nodes count occurrences): the same events, observations, ledger entries and flow
state on both paths.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace import Runtime, ToolCall
from actionspace.pipeline import _write, fast_effects
from actionspace.policy.flow_policies import (
    DEFAULT_FLOW_POLICY,
    AllowAll,
    FlowPolicy,
    ReadersCoverRecipients,
    UntrustedWrites,
)
from actionspace.policy.labels import Label
from tests.pipeline.test_fast import _strip as _no_clock

RUN = "run-fx"
SCHEMA = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "note": {"type": "string"}},
    "required": ["a"],
}
POLICIES: dict[str, FlowPolicy | None] = {
    "default": DEFAULT_FLOW_POLICY,
    "none": None,
    "allow_all": AllowAll(),
    "untrusted_writes": UntrustedWrites(on="deny") & DEFAULT_FLOW_POLICY,
    "readers": ReadersCoverRecipients(),  # reads argument values: never precompiled
}


@dataclass(frozen=True)
class Shape:
    name: str
    effect: str
    sink: bool
    confidentiality: str
    integrity: str
    takes_key: bool


def _runtime(tools: list[Shape], policy: str, *, fast: bool) -> Runtime:
    rt = Runtime("memory://", flow_policy=POLICIES[policy])
    for shape in tools:

        def body(a: int, note: str = "", _name: str = shape.name) -> dict[str, Any]:
            return {"tool": _name, "a": a, "note": note}

        def keyed(a: int, idempotency_key: str, note: str = "", _name: str = shape.name) -> dict[str, Any]:
            return {"tool": _name, "a": a, "key": idempotency_key}

        rt.add_tool(
            name=shape.name,
            input_schema=SCHEMA,
            fn=keyed if shape.takes_key else body,
            effect=shape.effect,
            labels={
                "confidentiality": shape.confidentiality,
                "integrity": shape.integrity,
                "sink": shape.sink,
            },
            idempotency="native" if shape.takes_key else "none",
        )
    rt.engine.fast.enabled = fast
    return rt


shapes = st.builds(
    Shape,
    name=st.sampled_from(["w0", "w1", "w2"]),
    effect=st.sampled_from(["write", "write", "external", "read"]),
    sink=st.booleans(),
    confidentiality=st.sampled_from(["public", "internal", "secret"]),
    integrity=st.sampled_from(["trusted", "untrusted"]),
    takes_key=st.booleans(),
)


@st.composite
def proposals(draw: st.DrawFn) -> tuple[str, Any, str | None]:
    """(format, raw call, node id) of one proposal; mostly valid calls of the tools."""
    name = draw(st.sampled_from(["w0", "w1", "w2", "w0", "w1"]))
    args: dict[str, Any] = {"a": draw(st.integers(0, 3))}
    if draw(st.booleans()):
        args["note"] = draw(st.sampled_from(["", "x", "alice@example.com"]))
    if draw(st.integers(0, 9)) == 0:
        args = {"a": "not a number"}
    fmt = draw(st.sampled_from(["toolcall", "toolcall", "openai", "message"]))
    node = draw(st.sampled_from([None, None, "n-a", "n-b"]))
    if fmt == "toolcall":
        return fmt, ToolCall(name=name, arguments=args), node
    entry = {"type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
    if fmt == "message":  # the same call twice in one message: occurrences 1 and 2
        return fmt, json.dumps([entry, entry]), None
    return fmt, json.dumps(entry), node


def _strip(value: Any) -> Any:
    """Without wall-clock fields and approval request ids (random, unlike anything else here)."""
    value = _no_clock(value)
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    if isinstance(value, str) and value.startswith("apr_"):
        return "apr_*"
    return value


def _play(rt: Runtime, calls: list[tuple[str, Any, str | None]], user: list[str]) -> dict[str, Any]:
    run_id = rt.new_run(RUN)
    state = rt.engine.run(run_id)
    for conf in user:
        state.flow.add_user_input("hi", Label(confidentiality=conf))  # type: ignore[arg-type]

    async def play() -> list[Any]:
        out: list[Any] = []
        for i, (_, raw, node) in enumerate(calls):
            if i % 2:
                out.append(rt.call(raw, run_id=run_id, node_id=node))
            else:
                out.append(await rt.acall(raw, run_id=run_id, node_id=node))
        return out

    observations = asyncio.run(play())
    flow = state.flow
    entries = sorted(
        (e.node_id, e.key, e.tool, e.state, e.attempts, _strip(dict(e.observation or {})))
        for e in rt.engine.ledger.list(limit=10_000)
        if e.run_id == run_id
    )
    return {
        "observations": [_strip(o.to_dict()) for o in observations],
        "events": [
            (e.seq, e.kind, e.call_id, _strip(json.loads(json.dumps(e.data, default=repr))))
            for e in rt.trace.events(run_id)
        ],
        "ledger": entries,
        "context": flow.context,
        "pending": dict(flow.pending),
        "seen": [(k, lab, repr(data)) for k, (lab, data) in flow.seen.items()],
        "origins": flow.origins(),
        "nodes": next(state.nodes),
    }


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    tools=st.lists(shapes, min_size=1, max_size=3, unique_by=lambda t: t.name),
    calls=st.lists(proposals(), min_size=2, max_size=8),
    policy=st.sampled_from(list(POLICIES)),
    user=st.lists(st.sampled_from(["public", "internal", "secret"]), max_size=1),
)
def test_side_effecting_calls_prepared_on_the_precompiled_path_end_as_the_stages_end_them(
    tools: list[Shape], calls: list[tuple[str, Any, str | None]], policy: str, user: list[str]
) -> None:
    with _runtime(tools, policy, fast=True) as fast, _runtime(tools, policy, fast=False) as staged:
        assert _play(fast, calls, user) == _play(staged, calls, user)


def test_a_repeated_write_is_prepared_once_per_run_label_and_not_under_a_value_reading_policy(
    monkeypatch: Any,
) -> None:
    """The property above compares outcomes; this shows the precompiled preparation is taken."""
    taken: list[bool] = []
    real = fast_effects.ready_effect

    def spy(*args: Any) -> Any:
        ready = real(*args)
        taken.append(ready is not None)
        return ready

    monkeypatch.setattr("actionspace.pipeline.fast.ready_effect", spy)
    real_write = _write.write_call

    def written(*args: Any) -> Any:  # a sync write prepared in its own frame (pipeline/_write.py)
        obs = real_write(*args)
        if obs is not None:
            taken.append(True)
        return obs

    monkeypatch.setattr("actionspace.pipeline.messages.write_call", written)
    shape = Shape("w0", "write", False, "internal", "trusted", True)
    for policy, want in (("default", [True, True]), ("readers", [])):
        taken.clear()
        with _runtime([shape], policy, fast=True) as rt:
            run = rt.new_run()
            out = [rt.call(ToolCall(name="w0", arguments={"a": i}), run_id=run) for i in range(3)]
            assert [o.status for o in out] == ["ok"] * 3
            assert len({o.data["key"] for o in out}) == 3  # three actions, three keys
            assert len([e for e in rt.engine.ledger.list() if e.run_id == run]) == 3
        assert taken == want, policy


def test_plan_nodes_of_side_effecting_tools_end_as_the_stages_end_them() -> None:
    tools = [
        Shape("w0", "write", False, "internal", "trusted", True),
        Shape("w1", "external", True, "public", "trusted", False),
        Shape("w2", "read", False, "secret", "untrusted", False),
    ]
    plan = {
        "nodes": [
            {"id": "a", "tool": "w0", "arguments": {"a": 1}},
            {"id": "b", "tool": "w0", "arguments": {"a": 2, "note": "x"}, "depends_on": ["f"]},
            {"id": "c", "tool": "w1", "arguments": {"a": 3}},
            {"id": "d", "tool": "w1", "arguments": {"a": {"$ref": "a.data.a"}}},
            {"id": "f", "tool": "w2", "arguments": {"a": 0}, "depends_on": ["c"]},
        ],
    }

    def play(rt: Runtime) -> Any:
        rt.new_run(RUN)
        rt.call(ToolCall(name="w0", arguments={"a": 0}), run_id=RUN)  # resolves w0 for the run
        rt.call(ToolCall(name="w1", arguments={"a": 0}), run_id=RUN)
        result = rt.run_plan(plan, run_id=RUN)
        again = rt.run_plan(plan, run_id=RUN)  # the same nodes: replayed from the ledger
        nodes = [{k: _strip(o.to_dict()) for k, o in r.nodes.items()} for r in (result, again)]
        events = [(e.seq, e.kind, e.call_id, _strip(e.data)) for e in rt.trace.events(RUN)]
        ledger = sorted((e.node_id, e.key, e.state) for e in rt.engine.ledger.list() if e.run_id == RUN)
        flow = rt.engine.run(RUN).flow
        return result.status, nodes, events, ledger, flow.context, dict(flow.pending)

    with _runtime(tools, "default", fast=True) as fast, _runtime(tools, "default", fast=False) as staged:
        played = play(fast)
        assert played == play(staged)
    assert played[0] == "ok" and len(played[3]) == 2 + 4  # two calls, four write nodes: once each
