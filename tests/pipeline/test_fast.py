"""The precompiled path ends every call exactly as the stages do: same events, observations, flow state."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace import Principal, Runtime, ToolCall
from actionspace.pipeline.fast import FastPath
from actionspace.policy.flow_policies import DEFAULT_FLOW_POLICY, AllowAll, FlowPolicy, ReadClearance
from actionspace.policy.labels import Label

RUN = "run-eq"

SCHEMA = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}, "s": {"type": "string"}},
    "required": ["a"],
}


@dataclass(frozen=True)
class ToolShape:
    name: str
    effect: str
    is_async: bool
    confidentiality: str
    integrity: str
    returns: str


def _body(returns: str) -> Callable[..., Any]:
    def body(a: int, b: int = 0, s: str = "") -> Any:
        if returns == "int":
            return a + b
        if returns == "text":
            return s * 3
        if returns == "dict":
            return {"sum": a + b, "text": s, "items": [a, b]}
        if returns == "big":
            return "line of output\n" * 4000  # trimmed: an artifact is stored
        if returns == "none":
            return None
        if returns == "value_error":
            raise ValueError(f"bad a={a}")
        if returns == "timeout":
            raise TimeoutError("took too long")
        if returns == "suspend":
            return a - b
        raise RuntimeError("boom")

    return body


def _fn(shape: ToolShape) -> Callable[..., Any]:
    """The tool of ``shape``; ``wait_then_<returns>``: an async tool waits once, then ends as
    ``<returns>`` (a failure after a wait is typed, timed and retried past the first step)."""
    returns = shape.returns.removeprefix("wait_then_")
    body = _body(returns)
    if not shape.is_async:
        return body
    waits = returns == "suspend" or returns != shape.returns

    async def run(**kwargs: Any) -> Any:
        if waits:  # its first step waits: the tool finishes on a later step
            await asyncio.sleep(0)
        return body(**kwargs)

    return run


POLICIES: dict[str, FlowPolicy | None] = {
    "default": DEFAULT_FLOW_POLICY,
    "none": None,
    "allow_all": AllowAll(),
    "read_clearance": ReadClearance() & DEFAULT_FLOW_POLICY,
}

PRINCIPALS = {
    "default": None,
    "reader": Principal(id="reader", scopes=("none:*", "read:*")),
    "narrow": Principal(id="narrow", scopes=("none:t0",)),
    "cleared": Principal(id="cleared", scopes=("*", "labels:secret")),
}


def _runtime(
    tools: list[ToolShape],
    policy: str,
    *,
    fast: bool,
    plain_sink: bool = False,
) -> Runtime:
    """``plain_sink``: the trace takes plain records only (compact call records are expanded
    before they reach it), as a store without compact records does."""
    rt = Runtime("memory://", flow_policy=POLICIES[policy])
    if plain_sink:
        append = rt.engine.sink
        rt.engine.sink = lambda run_id, records: append(run_id, records)
    for shape in tools:
        rt.add_tool(
            name=shape.name,
            input_schema=SCHEMA,
            fn=_fn(shape),
            effect=shape.effect,
            labels={"confidentiality": shape.confidentiality, "integrity": shape.integrity},
            **({"idempotency": "none"} if shape.effect == "write" else {}),
        )
    rt.engine.fast.enabled = fast
    return rt


tool_shapes = st.builds(
    ToolShape,
    name=st.sampled_from(["t0", "t1", "t2"]),
    effect=st.sampled_from(["none", "none", "read", "write"]),
    is_async=st.booleans(),
    confidentiality=st.sampled_from(["public", "internal", "secret"]),
    integrity=st.sampled_from(["trusted", "trusted", "untrusted"]),
    returns=st.sampled_from(
        [
            *("int", "int", "text", "dict", "big", "none", "value_error", "runtime_error", "timeout"),
            *("suspend", "wait_then_value_error", "wait_then_timeout", "wait_then_big"),
        ]
    ),
)

arguments: st.SearchStrategy[dict[str, Any]] = st.one_of(
    st.fixed_dictionaries(
        {"a": st.integers(-(2**70), 2**70)},
        optional={"b": st.integers(-5, 5), "s": st.text(max_size=8) | st.just("long " * 4000)},
    ),
    st.fixed_dictionaries({"a": st.sampled_from(["x", 1.5, None])}),  # rejected by the schema
    st.just({}),  # missing a
)


@st.composite
def proposals(draw: st.DrawFn) -> tuple[str, Any, str]:
    """(format, raw call, principal) of one proposed call."""
    name = draw(st.sampled_from(["t0", "t1", "t2", "t0@1", "nope", " t1 "]))
    args = draw(arguments)
    call_id = draw(st.one_of(st.none(), st.just(""), st.from_regex(r"call_[a-z0-9]{1,6}", fullmatch=True)))
    fmt = draw(
        st.sampled_from(
            [
                "openai",
                "openai",
                "toolcall",
                "openai_dict_args",
                "openai_bad_args",
                "message",
                "assistant",
                "assistant2",
                "anthropic",
                "anthropic2",
                "responses",
            ]
        )
    )
    who = draw(st.sampled_from(list(PRINCIPALS)))
    raw: Any
    if fmt == "toolcall":
        raw = ToolCall(name=name, arguments=args, id=call_id)
    else:
        if fmt == "openai_dict_args":
            function: dict[str, Any] = {"name": name, "arguments": args}
        elif fmt == "openai_bad_args":
            function = {"name": name, "arguments": json.dumps(args)[:-1]}
        else:
            function = {"name": name, "arguments": json.dumps(args)}
        entry: dict[str, Any] = {"type": "function", "function": function}
        if call_id is not None:
            entry["id"] = call_id
        raw = json.dumps(entry)
        if fmt == "message":  # two calls in one message: parsed once, each prepared on its own
            twin = {**entry, "id": f"{call_id}_2"} if call_id else entry
            raw = json.dumps([entry, twin])
        elif fmt == "assistant":  # a Chat Completions message as a dict (a session's turn)
            raw = {"role": "assistant", "content": None, "tool_calls": [entry]}
        elif fmt == "assistant2":
            twin = {**entry, "id": f"{call_id}_2"} if call_id else entry
            raw = {"role": "assistant", "content": "Two calls.", "tool_calls": [entry, twin]}
        elif fmt in ("anthropic", "anthropic2"):  # an Anthropic message (a session's turn)
            block: dict[str, Any] = {"type": "tool_use", "name": name, "input": args}
            if call_id is not None:
                block["id"] = call_id
            blocks = [block]
            if fmt == "anthropic2":
                blocks = [{"type": "text", "text": "Two calls."}, block, {**block, "id": f"{call_id}_2"}]
            raw = {"role": "assistant", "content": blocks}
        elif fmt == "responses":  # Responses output items
            item: dict[str, Any] = {"type": "function_call", "name": name, "arguments": json.dumps(args)}
            if call_id is not None:
                item["call_id"] = call_id
            raw = [{"type": "reasoning", "summary": []}, item]
    return fmt, raw, who


def _strip(value: Any) -> Any:
    """Drop wall-clock fields, which differ between any two runs."""
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k not in ("fetched_at", "ts", "wall_s")}
    if isinstance(value, list | tuple):
        return [_strip(v) for v in value]
    return value


def _play(rt: Runtime, calls: list[tuple[str, Any, str]], user_labels: list[str]) -> dict[str, Any]:
    run_id = rt.new_run(RUN)
    state = rt.engine.run(run_id)
    for conf in user_labels:
        state.flow.add_user_input("hello", Label(confidentiality=conf))  # type: ignore[arg-type]

    async def play() -> list[Any]:
        out = []
        for i, (_, raw, who) in enumerate(calls):
            principal = PRINCIPALS[who]
            if i % 2:
                out.append(rt.call(raw, run_id=run_id, principal=principal))
            else:
                out.append(await rt.acall(raw, run_id=run_id, principal=principal))
        return out

    observations = asyncio.run(play())
    return {**_view(rt, run_id, observations), "nodes": next(state.nodes)}


def _view(rt: Runtime, run_id: str, observations: list[Any]) -> dict[str, Any]:
    """What two ways of running the same calls must leave alike: observations, events, flow state."""
    flow = rt.engine.run(run_id).flow
    return {
        "observations": [_strip(o.to_dict()) for o in observations],
        "events": [
            (e.seq, e.kind, e.call_id, _strip(json.loads(json.dumps(e.data, default=repr))))
            for e in rt.trace.events(run_id)
        ],
        "context": flow.context,
        "user_label": flow.user_label,
        "seen": [(k, lab, repr(data)) for k, (lab, data) in flow.seen.items()],
        "pending": dict(flow.pending),
        "artifacts": dict(flow.artifacts),
        "origins": flow.origins(),
    }


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    tools=st.lists(tool_shapes, min_size=1, max_size=3, unique_by=lambda t: t.name),
    calls=st.lists(proposals(), min_size=1, max_size=6),
    policy=st.sampled_from(list(POLICIES)),
    user_labels=st.lists(st.sampled_from(["public", "internal", "secret"]), max_size=1),
)
def test_the_precompiled_path_and_the_stages_give_the_same_events_observations_and_flow_state(
    tools: list[ToolShape], calls: list[tuple[str, Any, str]], policy: str, user_labels: list[str]
) -> None:
    with (
        _runtime(tools, policy, fast=True) as fast,
        _runtime(tools, policy, fast=True, plain_sink=True) as expanded,
        _runtime(tools, policy, fast=False) as staged,
    ):
        want = _play(staged, calls, user_labels)
        assert _play(fast, calls, user_labels) == want
        assert _play(expanded, calls, user_labels) == want


@pytest.fixture
def fast_runs(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every call ``FastPath.run`` takes (a ``FastCall``), in order."""
    taken: list[Any] = []
    original = FastPath.run

    async def spy(self: FastPath, call: Any, *args: Any, **kwargs: Any) -> Any:
        taken.append(call)
        return await original(self, call, *args, **kwargs)

    monkeypatch.setattr(FastPath, "run", spy)
    return taken


def test_a_simple_call_takes_the_precompiled_path_and_a_rejected_one_does_not(fast_runs: list[Any]) -> None:
    tools = [ToolShape("t0", "none", True, "internal", "trusted", "int")]
    with _runtime(tools, "default", fast=True) as rt:
        first = rt.call(ToolCall(name="t0", arguments={"a": 1, "b": 2}))  # resolves the name: staged
        ok = rt.call(ToolCall(name="t0", arguments={"a": 2, "b": 2}))
        bad = rt.call(ToolCall(name="t0", arguments={"a": "x"}))
    assert first.data == 3 and ok.data == 4
    assert bad.error is not None and bad.error.category == "invalid_arguments"
    assert [call.name for call in fast_runs] == ["t0"]


def test_an_entry_is_rebuilt_when_the_policy_or_the_principal_changes() -> None:
    tools = [ToolShape("t0", "none", False, "secret", "trusted", "int")]
    plain = Principal(id="plain", scopes=("none:*",))
    with _runtime(tools, "default", fast=True) as rt:
        run = rt.new_run("r", principal=plain)
        assert rt.call(ToolCall(name="t0", arguments={"a": 1}), run_id=run).status == "ok"
        rt.flow_policy = ReadClearance()
        denied = rt.call(ToolCall(name="t0", arguments={"a": 2}), run_id=run)
        assert denied.error is not None and denied.error.category == "policy_violation"
        rt.flow_policy = None
        narrow = Principal(id="narrow", scopes=("read:*",))
        refused = rt.call(ToolCall(name="t0", arguments={"a": 3}), run_id=run, principal=narrow)
        assert refused.error is not None and refused.error.category == "permission_denied"
        assert rt.call(ToolCall(name="t0", arguments={"a": 4}), run_id=run).data == 4


def test_a_plan_gives_the_same_events_and_results_on_both_paths() -> None:
    tools = [
        ToolShape("t0", "none", True, "internal", "trusted", "int"),
        ToolShape("t1", "read", False, "secret", "untrusted", "dict"),
    ]
    plan = {
        "nodes": [
            {"id": "a", "tool": "t0", "arguments": {"a": 1, "b": 2}},
            {"id": "b", "tool": "t1", "arguments": {"a": 3}},
            {"id": "c", "tool": "t0", "arguments": {"a": {"$ref": "a.data"}}},
            {"id": "d", "tool": "t0", "arguments": {"a": "not an integer"}},
        ]
    }

    def play(rt: Runtime) -> Any:
        result = rt.run_plan(plan, run_id=RUN)
        nodes = {k: _strip(o.to_dict()) for k, o in result.nodes.items()}
        events = [(e.seq, e.kind, e.call_id, _strip(e.data)) for e in rt.trace.events(RUN)]
        flow = rt.engine.run(RUN).flow
        return result.status, nodes, events, flow.context, dict(flow.pending)

    with _runtime(tools, "default", fast=True) as fast, _runtime(tools, "default", fast=False) as staged:
        assert play(fast) == play(staged)


def test_a_catalog_change_mid_run_ends_each_call_as_the_stages_do() -> None:
    def play(fast: bool) -> list[Any]:
        rt = Runtime("memory://")
        rt.engine.fast.enabled = fast
        schema = {"type": "object", "properties": {"x": {"type": "integer"}}}
        rt.add_tool(name="f", input_schema=schema, fn=lambda x: x, effect="none", version="1")
        run = rt.new_run(RUN)
        rt.offer(run_id=run)
        out = [rt.call(ToolCall(name="f", arguments={"x": 1}), run_id=run) for _ in range(2)]
        schema = {"type": "object", "properties": {"y": {"type": "integer"}}}
        rt.add_tool(name="f", input_schema=schema, fn=lambda y: -y, effect="none", version="2")
        rt.catalog.retire("f@1")
        out.append(rt.call(ToolCall(name="f", arguments={"x": 1}), run_id=run))
        out += [rt.call(ToolCall(name="f", arguments={"y": 4}), run_id=run) for _ in range(2)]
        events = [(e.seq, e.kind, e.call_id, _strip(e.data)) for e in rt.trace.events(run)]
        rt.close()
        return [_strip(o.to_dict()) for o in out] + events

    fast = play(True)
    assert fast == play(False)
    assert fast[2]["error"]["category"] == "version_mismatch" and fast[4]["data"] == -4


def test_a_one_call_message_of_every_provider_format_takes_the_precompiled_path(fast_runs: list[Any]) -> None:
    """A session's turn in Anthropic or Responses form is as cheap as one in Chat Completions form:
    the call takes the compact record, which records the format it was parsed in."""
    tools = [ToolShape("t0", "none", True, "internal", "trusted", "int")]
    messages = {
        "openai_chat": {
            "role": "assistant",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "t0", "arguments": '{"a": 1}'}}
            ],
        },
        "anthropic": {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "c2", "name": "t0", "input": {"a": 2}}],
        },
        "openai_responses": [
            {"type": "function_call", "call_id": "c3", "name": "t0", "arguments": '{"a": 3}'}
        ],
    }
    with _runtime(tools, "default", fast=True) as rt:
        run = rt.new_run()
        rt.call(ToolCall(name="t0", arguments={"a": 0}), run_id=run)  # resolves the name: staged
        for raw in messages.values():
            assert rt.call(raw, run_id=run).status == "ok"
        parsed = [e.data["format"] for e in rt.trace.events(run) if e.kind == "parsed"]
    assert [call.fmt for call in fast_runs] == list(messages)
    assert parsed == ["toolcall", *messages]
