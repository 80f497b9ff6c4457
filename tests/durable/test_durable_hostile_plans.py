"""Hostile plans through the dbos backend: the same typed errors as the in-process backend, never a raise."""

from __future__ import annotations

import itertools
import random
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from dbos import _queue as dbos_queue
from dbos import _scheduler as dbos_scheduler
from dbos import _sys_db as dbos_sys_db
from dbos import _workflow_commands as dbos_workflow_commands
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace import Runtime
from actionspace.durable import DurableConfig, PlanClient, shutdown
from actionspace.plan.model import PlanResult
from tests.pg import fresh_schema

_STORED: dict[str, list[int]] = {}
_runs = itertools.count()


@pytest.fixture(scope="module")
def store(pg_url: str) -> Iterator[str]:
    yield from fresh_schema(pg_url)


def _put(ref: str, value: int, idempotency_key: str) -> dict[str, Any]:
    _STORED.setdefault(ref, []).append(value)
    return {"ref": ref, "value": value + 1}


def _echo(value: int) -> dict[str, Any]:
    return {"value": value}


@pytest.fixture(scope="module")
def own_random() -> Iterator[None]:
    """DBOS's worker threads (its queue poll's jitter, its retries' backoff) draw from the global
    ``random`` module while hypothesis draws a plan in the test's thread: hypothesis sees the global
    state change during its draw and takes it for ``random`` used inside the strategy (a deprecation
    warning, an error in a later hypothesis). Those threads get a generator of their own here."""
    with pytest.MonkeyPatch.context() as patch:
        for module in (dbos_queue, dbos_scheduler, dbos_sys_db, dbos_workflow_commands):
            patch.setattr(module, "random", random.Random())
        yield


@pytest.fixture(scope="module")
def rt(store: str, own_random: None) -> Iterator[Runtime]:
    config = DurableConfig(system_schema=f"dbos_{uuid.uuid4().hex[:8]}")
    runtime = Runtime(store=store, plan_backend="dbos", durable=config, recover_on_start=False)
    put_schema = {
        "type": "object",
        "properties": {"ref": {"type": "string"}, "value": {"type": "integer"}},
        "required": ["ref", "value"],
        "additionalProperties": False,
    }
    runtime.add_tool(
        name="put",
        input_schema=put_schema,
        fn=_put,
        effect="write",
        writes=["kv:{ref}"],
        idempotency="native",
    )
    echo_schema = {"type": "object", "properties": {"value": {"type": "integer"}}, "required": ["value"]}
    runtime.add_tool(name="echo", input_schema=echo_schema, fn=_echo, effect="none")
    try:
        yield runtime
    finally:
        shutdown()
        runtime.close()


def _outcome(result: PlanResult) -> Any:
    """What a model can act on: the plan's error category, else each node's status or category."""
    if result.error is not None:
        return ("plan", result.error.category)
    return {k: o.error.category if o.error is not None else o.status for k, o in result.nodes.items()}


def _both(rt: Runtime, plan: Any, **options: Any) -> tuple[Any, Any]:
    n = next(_runs)
    local = rt.run_plan(plan, run_id=f"hostile-local-{n}", backend="inprocess", **options)
    durable = rt.run_plan(plan, run_id=f"hostile-dbos-{n}", backend="dbos", **options)
    return _outcome(local), _outcome(durable)


def _nested(levels: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(levels):
        value = {"x": value}
    return value


@pytest.mark.parametrize(
    "plan",
    [
        "not a plan",
        [1, 2, 3],
        None,
        42,
        {"nodes": [{"id": "a", "tool": "echo", "arguments": {"value": 1, "deep": _nested(5000)}}]},
        {"nodes": [{"id": "a", "tool": "echo", "arguments": {"value": 1}}], "extra": _nested(3000)},
    ],
    ids=["string", "list", "null", "number", "arguments-5000-deep", "extra-key-3000-deep"],
)
def test_a_malformed_plan_is_the_same_typed_rejection_on_both_backends(rt: Runtime, plan: Any) -> None:
    local, durable = _both(rt, plan)
    assert local == ("plan", "invalid_arguments")
    assert durable == local


def test_a_submitted_malformed_plan_ends_in_a_typed_rejection(rt: Runtime, store: str) -> None:
    from actionspace.durable import launch

    launch(rt, rt.durable)
    with PlanClient(store, config=rt.durable) as client:
        client.submit("nonsense", run_id="hostile-submit-1")  # type: ignore[arg-type]
        client.submit({"nodes": [{"id": "a", "tool": "echo", "arguments": _nested(4000)}]}, run_id="hs-2")
        first, second = client.result("hostile-submit-1"), client.result("hs-2")
    assert first.status == second.status == "error"
    assert first.error is not None and first.error.category == "invalid_arguments"
    assert second.error is not None and second.error.category == "invalid_arguments"
    assert "plan_rejected" in [e.kind for e in rt.trace.events("hs-2")]


def test_a_resolved_reference_writing_outside_the_declared_writes_fails_on_both_backends(
    rt: Runtime,
) -> None:
    n = next(_runs)
    plan = {
        "nodes": [
            {"id": "a", "tool": "put", "arguments": {"ref": f"undeclared-{n}", "value": 1}},
            {
                "id": "b",
                "tool": "put",
                "arguments": {"ref": {"$ref": "a.data.ref"}, "value": 2},
                "writes": ["kv:somewhere-else"],
            },
        ]
    }
    local, durable = _both(rt, plan)
    assert local == {"a": "ok", "b": "invalid_arguments"}
    assert durable == local
    assert _STORED[f"undeclared-{n}"] == [1, 1]  # a wrote once per backend; b (value 2) never did


def test_a_non_positive_concurrency_runs_the_plan_one_node_at_a_time_as_in_process(rt: Runtime) -> None:
    plan = {"nodes": [{"id": k, "tool": "echo", "arguments": {"value": 1}} for k in "abc"]}
    local, durable = _both(rt, plan, max_concurrency=-1)
    assert local == durable == {"a": "ok", "b": "ok", "c": "ok"}


_ids = st.sampled_from(["a", "b", "c", "", "a/b", "x" * 130, "\u0000", 7])
_tools = st.sampled_from(["echo", "put", "nope", "echo@9", None])
_scalars = st.one_of(st.integers(-5, 5), st.text(max_size=5), st.none(), st.booleans())
_refs = st.builds(
    lambda node, path: {"$ref": f"{node}.{path}"},
    st.sampled_from(["a", "b", "c", "zz"]),
    st.sampled_from(["data.value", "data.ref", "data", "error", "data.value.x"]),
)
_args = st.dictionaries(st.sampled_from(["value", "ref", "other"]), st.one_of(_scalars, _refs), max_size=3)
_node = st.fixed_dictionaries(
    {"id": _ids, "tool": _tools, "arguments": st.one_of(_args, _scalars)},
    optional={
        "depends_on": st.lists(st.sampled_from(["a", "b", "c", "q"]), max_size=2),
        "writes": st.lists(st.sampled_from(["kv:a", "kv:*", "x"]), max_size=2),
        "bogus": _scalars,
    },
)
_plans = st.one_of(
    st.fixed_dictionaries({"nodes": st.lists(_node, min_size=0, max_size=3)}),
    st.fixed_dictionaries(
        {"nodes": st.lists(_node, min_size=1, max_size=3), "max_concurrency": st.integers(-1, 3)}
    ),
    _scalars,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plan=_plans)
def test_hostile_plans_get_the_same_categories_on_both_backends(rt: Runtime, plan: Any) -> None:
    n = next(_runs)
    for node in plan.get("nodes", []) if isinstance(plan, dict) else []:
        if isinstance(node.get("arguments"), dict) and node["arguments"].get("ref") == "":
            node["arguments"]["ref"] = f"h{n}"  # refs differ per example, so writes never replay
    local, durable = _both(rt, plan)
    assert durable == local
