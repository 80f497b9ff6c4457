"""The trace of a durable plan's cancels: recorded once across a replay, and after ``plan_started``."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest

from actionspace import Runtime
from actionspace.durable import PlanClient, plan_workflow_id
from actionspace.durable import sweep_tools as tools
from actionspace.durable.approval import wake
from actionspace.durable.engine import plan_result
from actionspace.plan.control import CancelScope
from actionspace.plan.model import PlanResult
from tests.durable.support import launched, pending_request
from tests.pg import fresh_schema

if TYPE_CHECKING:
    from dbos import StepInfo

LONG_POLL_S = 60.0
"""A node waiting for approval looks at its request this seldom here: only a wake-up moves it on."""


@pytest.fixture(scope="module")
def shared_store(pg_url: str) -> Iterator[str]:
    yield from fresh_schema(pg_url)


@pytest.fixture(scope="module")
def rt(shared_store: str) -> Iterator[Runtime]:
    yield from launched(
        shared_store, tools, approval_poll_s=LONG_POLL_S, approval_poll_max_s=LONG_POLL_S, wait_poll_s=0.2
    )


def _clean(prefix: str, nodes: str) -> str:
    """A run id none of whose sweep-tool nodes draws a lost response."""
    for _ in range(10_000):
        run_id = f"{prefix}-{uuid.uuid4().hex[:6]}"
        if not any(tools.fault(f"{run_id}/{k}") for k in nodes):
            return run_id
    raise AssertionError("no clean run id")


def _node(run_id: str, k: str, tool: str, value: Any) -> dict[str, Any]:
    return {"id": k, "tool": tool, "arguments": {"ref": f"{run_id}/{k}", "value": value}}


def _kinds(rt: Runtime, run_id: str) -> list[tuple[str, Any]]:
    """The plan-level events of the run's trace, in order: (kind, node)."""
    return [(e.kind, e.data.get("node")) for e in rt.trace.events(run_id) if e.kind.startswith("plan_")]


def _replayed_from(run_id: str, pick: Callable[[list[StepInfo]], int]) -> PlanResult:
    """The plan of ``run_id`` run again from the step ``pick`` chooses, as a worker that died
    there would: the operations before it come from their checkpoints."""
    from dbos import DBOS

    steps = DBOS.list_workflow_steps(plan_workflow_id(run_id), load_output=False)
    handle = DBOS.fork_workflow(plan_workflow_id(run_id), pick(list(steps)))
    return plan_result(handle.get_result(polling_interval_sec=0.05))


def _last_wave(steps: list[StepInfo]) -> int:
    return max(s["function_id"] for s in steps if s["function_name"].endswith(".wave"))


def test_a_node_cancelled_before_the_plan_began_is_recorded_once_after_plan_started_across_a_replay(
    rt: Runtime,
) -> None:
    run_id = _clean("t3-early", "adx")
    plan = {
        "nodes": [
            _node(run_id, "a", "native_write", 1),
            _node(run_id, "d", "native_write", 5),
            _node(run_id, "x", "native_write", {"$ref": "a.data.value"}),  # a second wave
        ]
    }
    scope = CancelScope()
    scope.cancel(["d"], reason="not wanted")
    first = rt.run_plan(plan, run_id=run_id, cancel=scope, backend="dbos")
    assert first.stats["waves"] == 2 and first.stats["cancelled"] == ["d"]
    error = first.nodes["d"].error
    assert error is not None and error.details["phase"] == "not_dispatched"
    assert _kinds(rt, run_id) == [
        ("plan_started", None),
        ("plan_node_cancelled", "d"),
        ("plan_finished", None),
    ]
    again = _replayed_from(run_id, _last_wave)  # the input's cancel is applied again, from its input
    assert again.status == first.status and again.stats["cancelled"] == ["d"]
    assert _kinds(rt, run_id) == [
        ("plan_started", None),
        ("plan_node_cancelled", "d"),
        ("plan_finished", None),
    ]


def test_a_node_cancelled_while_its_plan_waits_is_recorded_once_when_the_plan_is_run_again(
    rt: Runtime, shared_store: str
) -> None:
    run_id = _clean("t3-wait", "ad")
    plan = {
        "nodes": [
            _node(run_id, "a", "approved_write", 1),  # waits in a child workflow, holding the one slot
            _node(run_id, "d", "native_write", 5),  # ready, not dispatched: no slot
        ]
    }
    with PlanClient(shared_store, config=rt.durable) as client:
        client.submit(plan, run_id=run_id, max_concurrency=1)
        request = pending_request(rt, run_id)
        assert client.cancel(run_id, ["d"], reason="not wanted")
        rt.approvals.approve(request.id, by="alice")
        assert wake(client, request)
        first = client.result(run_id)
    assert first.nodes["a"].status == "ok" and first.stats["cancelled"] == ["d"]
    cancelled = [k for k, node in _kinds(rt, run_id) if k == "plan_node_cancelled" and node == "d"]
    assert len(cancelled) == 1

    def after_the_waves(steps: list[StepInfo]) -> int:
        closing = [s["function_id"] for s in steps if s["function_name"].endswith(".finish")]
        return closing[0] if closing else max(s["function_id"] for s in steps) + 1

    again = _replayed_from(run_id, after_the_waves)  # the cancel's message comes from its checkpoint
    assert again.stats["cancelled"] == ["d"]
    kinds = _kinds(rt, run_id)
    assert kinds.count(("plan_node_cancelled", "d")) == 1
    assert kinds.count(("plan_finished", None)) == 1
    assert kinds.index(("plan_started", None)) < kinds.index(("plan_node_cancelled", "d"))
