from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from actionspace import ActionError, Observation, Principal, Runtime, ToolCall, ToolResult, tool
from actionspace.catalog import RetryPolicy
from actionspace.errors import ConfigurationError
from actionspace.testing import Faulty
from actionspace.types import Effect

FAST = RetryPolicy(max_attempts=3, deadline_s=5.0, initial_backoff_s=0.001)


def openai_call(name: str, args: dict[str, Any], call_id: str = "call_1") -> str:
    return json.dumps(
        {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
    )


@pytest.fixture
def rt() -> Runtime:
    runtime = Runtime("memory://")

    @runtime.tool(effect="none")
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @runtime.tool(effect="none")
    async def add_async(a: int, b: int) -> int:
        """Add two integers, asynchronously."""
        return a + b

    return runtime


def kinds(rt: Runtime, run_id: str) -> list[str]:
    return [e.kind for e in rt.trace.events(run_id)]


def test_an_openai_call_string_runs_and_every_stage_is_traced(rt: Runtime) -> None:
    run = rt.new_run()
    obs = rt.call(openai_call("add", {"a": 1, "b": 2}), run_id=run)
    assert obs.status == "ok" and obs.data == 3
    assert obs.call_id == "call_1" and obs.tool == "add" and obs.tool_version == "1"
    assert obs.content_hash is not None and obs.complete is True
    assert kinds(rt, run) == [
        "run_started",
        "model_output",
        "parsed",
        "authorized",
        "validated",
        "dispatched",
        "observation",
    ]
    validated = rt.trace.events(run)[4]
    assert validated.data["schema_hash"] == rt.catalog.get("add").schema_hash


@pytest.mark.parametrize(
    "raw",
    [
        {"type": "tool_use", "id": "toolu_1", "name": "add_async", "input": {"a": 2, "b": 3}},
        {"name": "add_async", "arguments": {"a": 2, "b": 3}},
        '<tool_call>{"name": "add_async", "arguments": {"a": 2, "b": 3}}</tool_call>',
        ToolCall(name="add_async", arguments={"a": 2, "b": 3}),
    ],
)
def test_every_provider_format_reaches_the_same_tool(rt: Runtime, raw: Any) -> None:
    assert rt.call(raw).data == 5
    assert asyncio.run(rt.acall(raw)).data == 5


def test_invalid_arguments_never_reach_the_tool() -> None:
    rt = Runtime("memory://")
    seen: list[Any] = []

    @rt.tool(effect="write")
    def put(key: str, value: int) -> None:
        seen.append((key, value))

    obs = rt.call(ToolCall(name="put", arguments={"key": "k", "value": "NaN"}))
    assert obs.status == "error" and obs.error is not None
    assert obs.error.category == "invalid_arguments"
    assert [f.path for f in obs.error.field_errors] == ["/value"]
    assert obs.error.recovery == ("change_arguments",)
    assert seen == []


def test_unknown_tool_lists_the_offered_names_and_suggests_the_closest(rt: Runtime) -> None:
    run = rt.new_run()
    rt.offer(["add"], run_id=run)
    obs = rt.call(ToolCall(name="ad", arguments={}), run_id=run)
    assert obs.error is not None and obs.error.category == "unknown_tool"
    assert obs.error.details["offered"] == ["add"]
    assert obs.error.alternatives == ("add",)
    not_offered = rt.call(ToolCall(name="add_async", arguments={"a": 1, "b": 1}), run_id=run)
    assert not_offered.error is not None and not_offered.error.category == "unknown_tool"


def test_a_definition_changed_since_the_offer_is_a_version_mismatch_then_the_new_one_works() -> None:
    rt = Runtime("memory://")
    rt.add_tool(
        name="f",
        input_schema={"type": "object", "properties": {"x": {"type": "integer"}}},
        fn=lambda x: x,
        effect="none",
        version="1",
    )
    run = rt.new_run()
    rt.offer(run_id=run)
    assert rt.call(ToolCall(name="f", arguments={"x": 1}), run_id=run).data == 1
    rt.add_tool(
        name="f",
        input_schema={"type": "object", "properties": {"y": {"type": "integer"}}},
        fn=lambda y: -y,
        effect="none",
        version="2",
    )
    rt.catalog.retire("f@1")
    obs = rt.call(ToolCall(name="f", arguments={"x": 1}), run_id=run)
    assert obs.error is not None and obs.error.category == "version_mismatch"
    assert obs.error.details["current"]["version"] == "2"
    assert obs.error.recovery == ("reread_definition", "rebuild_arguments")
    assert rt.call(ToolCall(name="f", arguments={"y": 4}), run_id=run).data == -4
    explicit = rt.call(ToolCall(name="f@1", arguments={"x": 1}), run_id=run)
    assert explicit.error is not None and explicit.error.category == "version_mismatch"


def test_reads_are_authorized_and_the_missing_scope_is_named() -> None:
    rt = Runtime("memory://", principal=Principal(id="bob", scopes=["none:*"]))

    @rt.tool(effect="read")
    def balance(account: str) -> int:
        return 10

    obs = rt.call(ToolCall(name="balance", arguments={"account": "a"}))
    assert obs.error is not None and obs.error.category == "permission_denied"
    assert obs.error.details["missing_scopes"] == ["read:balance"]
    allowed = rt.call(
        ToolCall(name="balance", arguments={"account": "a"}),
        principal=Principal(id="alice", scopes=["read:*"]),
    )
    assert allowed.data == 10


def test_needs_approval_holds_the_call_and_says_why() -> None:
    rt = Runtime("memory://")
    sent: list[str] = []

    @rt.tool(effect="external", high_risk_args=("to",))
    def send(to: str, body: str) -> None:
        sent.append(to)

    obs = rt.call(ToolCall(name="send", arguments={"to": "x@example.org", "body": "hi"}))
    assert obs.error is not None and obs.error.category == "needs_approval"
    assert obs.error.details["arguments"] == {"to": "x@example.org", "body": "hi"}
    assert sent == []
    ok = rt.call(
        ToolCall(name="send", arguments={"to": "x@example.org", "body": "hi"}, provenance={"to": "user"})
    )
    assert ok.status == "ok" and sent == ["x@example.org"]


def test_transient_failures_are_retried_and_the_attempts_traced() -> None:
    rt = Runtime("memory://")
    flaky = Faulty(lambda q: q.upper(), ["transient", "ok"])
    rt.add_tool(
        name="search",
        input_schema={"type": "object", "properties": {"q": {"type": "string"}}},
        fn=flaky.tool,
        effect="read",
        retry=FAST,
    )
    run = rt.new_run()
    obs = rt.call(ToolCall(name="search", arguments={"q": "x"}), run_id=run)
    assert obs.data == "X" and obs.diagnostics["attempts"] == 2
    assert "attempt" in kinds(rt, run)


def test_a_write_that_times_out_after_committing_is_unknown_commit_and_runs_once() -> None:
    rt = Runtime("memory://")
    writes: list[int] = []
    slow = Faulty(lambda n: writes.append(n), ["commit_then_hang"], hang_s=4.0)
    rt.add_tool(
        name="w",
        input_schema={"type": "object", "properties": {"n": {"type": "integer"}}},
        fn=slow.tool,
        effect="write",
        # the worker thread must get to commit before the deadline: 50 ms did not always give it
        # that on a busy machine (it then timed out before the write, and ``writes`` was empty)
        timeout_s=0.5,
        retry=FAST,
    )
    obs = rt.call(ToolCall(name="w", arguments={"n": 1}))
    assert obs.error is not None and obs.error.category == "unknown_commit"
    assert obs.error.recovery == ("query_status", "reconcile_by_hand")
    assert writes == [1] and slow.calls == 1


def test_tool_result_reports_effects_and_versions() -> None:
    rt = Runtime("memory://")

    @rt.tool(effect="write")
    def create(name: str) -> ToolResult:
        return ToolResult(
            data={"id": "x1"},
            effects=(Effect(resource_id="thing:x1", kind="created"),),
            resource_version="v1",
            remote_id="tx-9",
        )

    obs = rt.call(ToolCall(name="create", arguments={"name": "n"}))
    assert obs.effects == (Effect(resource_id="thing:x1", kind="created"),)
    assert obs.provenance.resource_version == "v1"
    assert obs.diagnostics["remote_id"] == "tx-9"
    assert obs.diagnostics["idempotency_key"].startswith("as1_")


def test_several_calls_give_one_observation_each_keyed_by_call_id(rt: Runtime) -> None:
    raw = json.dumps(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                json.loads(openai_call("add", {"a": 1, "b": 1}, "c1")),
                json.loads(openai_call("add", {"a": "x", "b": 1}, "c2")),
            ],
        }
    )
    obs = rt.call_all(raw)
    assert [(o.call_id, o.status) for o in obs] == [("c1", "ok"), ("c2", "error")]
    grouped = rt.call(raw)
    assert grouped.status == "partial" and [o.call_id for o in grouped.items] == ["c1", "c2"]
    assert grouped.diagnostics["failed"] == ["c2"]
    agrouped = asyncio.run(rt.acall(raw))
    assert agrouped.status == "partial" and len(agrouped.items) == 2


def test_malformed_output_is_a_parse_error_and_nothing_runs(rt: Runtime) -> None:
    obs = rt.call(
        '{"id": "call_1", "type": "function", "function": {"name": "add", "arguments": "{\\"a\\": 1,'
    )
    assert obs.error is not None and obs.error.category == "parse_error"
    assert obs.error.recovery == ("re_emit_call",)
    plain = rt.call("Sure, the answer is 3.")
    assert plain.error is not None and plain.error.category == "parse_error"


def test_a_validator_that_crashes_is_an_internal_error_not_an_exception() -> None:
    rt = Runtime("memory://")

    def broken(ctx: Any, args: Any) -> None:
        raise RuntimeError("bug in a validator")

    rt.add_tool(name="f", input_schema={"type": "object"}, fn=lambda: 1, effect="none", validators=(broken,))
    obs = rt.call(ToolCall(name="f", arguments={}))
    assert obs.error is not None and obs.error.category == "internal"
    assert "bug in a validator" in obs.error.message


def test_observations_round_trip_through_json(rt: Runtime) -> None:
    for raw in (ToolCall(name="add", arguments={"a": 1, "b": 2}), ToolCall(name="add", arguments={})):
        obs = rt.call(raw)
        assert Observation.from_dict(json.loads(json.dumps(obs.to_dict()))) == obs


def test_module_level_tool_decorator_registers_through_the_runtime() -> None:
    @tool(effect="none")
    def mul(a: int, b: int) -> int:
        return a * b

    assert mul(2, 3) == 6
    rt = Runtime("memory://", tools=[mul])
    assert rt.call(ToolCall(name="mul", arguments={"a": 2, "b": 4})).data == 8


def test_developer_mistakes_raise_at_definition_time() -> None:
    rt = Runtime("memory://")
    with pytest.raises(ConfigurationError, match="declare effect"):
        rt.add_tool(name="f", input_schema={"type": "object"}, fn=lambda: 1)
    with pytest.raises(ConfigurationError, match="not a valid JSON Schema"):
        rt.add_tool(
            name="g",
            input_schema={"type": "object", "properties": {"x": {"type": 5}}},
            fn=lambda: 1,
            effect="none",
        )


def test_errors_are_values_with_the_design_fields(rt: Runtime) -> None:
    obs = rt.call(ToolCall(name="add", arguments={"a": 1}))
    assert isinstance(obs.error, ActionError)
    d = obs.to_dict()["error"]
    assert set(d) == {
        "category",
        "message",
        "retryable",
        "retry_after",
        "recovery",
        "details",
        "resource_ids",
        "vendor_code",
        "field_errors",
        "candidates",
        "current_version",
        "alternatives",
    }
