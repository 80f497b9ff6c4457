"""The dbos backend's plan control: a CancelScope, node workflow ids, and the plan's trace closed once."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest

from actionspace import Runtime
from actionspace.durable import (
    PlanClient,
    plan_workflow_id,
)
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
    yield from launched(shared_store, tools, approval_poll_s=LONG_POLL_S, approval_poll_max_s=LONG_POLL_S)


def _clean(prefix: str, nodes: str = "abcd") -> str:
    """A run id none of whose sweep-tool nodes draws a lost response."""
    for _ in range(10_000):
        run_id = f"{prefix}-{uuid.uuid4().hex[:6]}"
        if not any(tools.fault(f"{run_id}/{k}") for k in nodes):
            return run_id
    raise AssertionError("no clean run id")


def _plan(run_id: str) -> dict[str, Any]:
    """a (a write), then b (needs approval), then c (after b); d runs beside a."""

    def node(k: str, tool: str, value: Any) -> dict[str, Any]:
        return {"id": k, "tool": tool, "arguments": {"ref": f"{run_id}/{k}", "value": value}}

    return {
        "nodes": [
            node("a", "native_write", 1),
            node("b", "approved_write", {"$ref": "a.data.value"}),
            node("c", "query_write", {"$ref": "b.data.value"}),
            node("d", "native_write", 5),
        ]
    }


def _outcome(result: PlanResult) -> dict[str, Any]:
    """Per node: ``ok``, or its error's category with what it names (phase, blocking node)."""
    out: dict[str, Any] = {}
    for k, obs in result.nodes.items():
        error = obs.error
        out[k] = (
            "ok"
            if error is None
            else (error.category, error.details.get("phase"), error.details.get("blocked_by"))
        )
    return out


def _in_thread(fn: Callable[[], PlanResult]) -> tuple[threading.Thread, list[PlanResult]]:
    got: list[PlanResult] = []
    thread = threading.Thread(target=lambda: got.append(fn()), daemon=True)
    thread.start()
    return thread, got


def _wait_ended(client: PlanClient, run_id: str, deadline_s: float = 30.0) -> str | None:
    end = time.monotonic() + deadline_s
    status = client.status(run_id)
    while status in (None, "PENDING", "ENQUEUED") and time.monotonic() < end:
        time.sleep(0.05)
        status = client.status(run_id)
    return status


# ---------------------------------------------------------------------- cancel scopes
def test_a_cancel_scope_cancelled_before_the_plan_starts_cancels_it_as_in_process(rt: Runtime) -> None:
    outcomes = {}
    for backend in ("inprocess", "dbos"):
        run_id = _clean(f"scope-early-{backend}")
        scope = CancelScope()
        scope.cancel(["b"], reason="the user changed their mind")
        result = rt.run_plan(_plan(run_id), run_id=run_id, cancel=scope, backend=backend)
        outcomes[backend] = (_outcome(result), result.status, result.stats["cancelled"])
    assert outcomes["dbos"] == outcomes["inprocess"]
    assert outcomes["dbos"] == (
        {
            "a": "ok",
            "b": ("cancelled", "not_dispatched", "a"),
            "c": ("cancelled", "not_dispatched", "a"),
            "d": "ok",
        },
        "partial",
        ["b"],
    )


def test_a_cancel_scope_cancels_a_dbos_plan_whose_node_waits_for_approval(rt: Runtime) -> None:
    run_id = _clean("scope-wait")
    scope = CancelScope()
    thread, got = _in_thread(lambda: rt.run_plan(_plan(run_id), run_id=run_id, cancel=scope, backend="dbos"))
    request = pending_request(rt, run_id)
    scope.cancel(reason="the user changed their mind")
    thread.join(timeout=30)
    assert not thread.is_alive()
    rt.approvals.approve(request.id, by="alice")  # too late: the node was removed
    scope.cancel(["a"])  # after the plan ended: nothing happens
    (result,) = got
    assert _outcome(result) == {
        "a": "ok",
        "b": ("cancelled", "not_dispatched", None),
        "c": ("cancelled", "not_dispatched", "b"),
        "d": "ok",
    }
    assert result.stats["cancelled"] == ["b", "c"]
    assert rt.ledger.get_node(run_id, "b") is None  # never dispatched


# ---------------------------------------------------------------------- node workflow ids
def test_the_nodes_of_two_runs_whose_ids_join_alike_each_run_in_their_own_workflow(
    rt: Runtime, shared_store: str
) -> None:
    base = f"join-{uuid.uuid4().hex[:6]}"
    runs = {f"{base}/x": "y", base: "x/y"}  # both read "<base>/x/y" when joined by a slash
    with PlanClient(shared_store, config=rt.durable) as client:
        for run_id, k in runs.items():
            plan = {"nodes": [{"id": k, "tool": "approved_write", "arguments": {"ref": run_id, "value": 1}}]}
            client.submit(plan, run_id=run_id)
            request = pending_request(rt, run_id)
            rt.approvals.approve(request.id, by="alice")
            assert wake(client, request)
        ended = {run_id: _wait_ended(client, run_id) for run_id in runs}
        assert ended == dict.fromkeys(runs, "SUCCESS")
        results = {run_id: client.result(run_id) for run_id in runs}
    for run_id, k in runs.items():
        assert results[run_id].nodes[k].status == "ok"
        assert results[run_id].nodes[k].data == {"ref": run_id, "value": 2}


def test_a_node_waiting_under_the_earlier_workflow_id_form_is_still_woken(
    rt: Runtime, shared_store: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from actionspace.durable import workflows

    def legacy(run_id: str, node_id: str) -> str:
        return f"as-plan:{run_id}/{node_id}"

    run_id = _clean("legacy")
    with PlanClient(shared_store, config=rt.durable) as client:
        with monkeypatch.context() as patch:  # a plan begun before the id form changed
            patch.setattr(workflows, "node_workflow_id", legacy)
            client.submit(_plan(run_id), run_id=run_id)
            request = pending_request(rt, run_id)
        rt.approvals.approve(request.id, by="alice")
        assert wake(client, request)
        assert _wait_ended(client, run_id) == "SUCCESS"  # well before the node's next own look
        result = client.result(run_id)
    assert result.status == "ok"


# ---------------------------------------------------------------------- plan_finished once
def _finished(rt: Runtime, run_id: str) -> int:
    return sum(1 for e in rt.trace.events(run_id) if e.kind == "plan_finished")


def _replayed_from(run_id: str, pick: Callable[[list[StepInfo]], int]) -> PlanResult:
    """The plan of ``run_id`` run again from the step ``pick`` chooses, as a worker that died
    there would: the operations before it come from their checkpoints."""
    from dbos import DBOS

    steps = DBOS.list_workflow_steps(plan_workflow_id(run_id), load_output=False)
    handle = DBOS.fork_workflow(plan_workflow_id(run_id), pick(list(steps)))
    return plan_result(handle.get_result(polling_interval_sec=0.05))


def test_a_last_wave_run_again_after_a_crash_records_plan_finished_once(rt: Runtime) -> None:
    run_id = _clean("finish-wave", "ad")
    plan = {"nodes": [n for n in _plan(run_id)["nodes"] if n["id"] in "ad"]}
    plan["nodes"][1]["arguments"]["value"] = {"$ref": "a.data.value"}  # two waves: a, then d
    first = rt.run_plan(plan, run_id=run_id)
    assert first.status == "ok" and first.stats["waves"] == 2
    again = _replayed_from(
        run_id, lambda steps: max(s["function_id"] for s in steps if s["function_name"].endswith(".wave"))
    )
    assert _outcome(again) == _outcome(first)
    assert _finished(rt, run_id) == 1


def test_a_plan_closed_after_its_waiting_node_and_run_again_records_plan_finished_once(
    rt: Runtime, shared_store: str
) -> None:
    run_id = _clean("finish-child", "ab")
    plan = {"nodes": [n for n in _plan(run_id)["nodes"] if n["id"] in "ab"]}
    with PlanClient(shared_store, config=rt.durable) as client:
        client.submit(plan, run_id=run_id)
        request = pending_request(rt, run_id)
        rt.approvals.approve(request.id, by="alice")
        assert wake(client, request)
        first = client.result(run_id)
    assert first.status == "ok"

    def after_the_waves(steps: list[StepInfo]) -> int:
        # the step that closes the trace when there is one, else what the workflow ran after its steps
        closing = [s["function_id"] for s in steps if s["function_name"].endswith(".finish")]
        return closing[0] if closing else max(s["function_id"] for s in steps) + 1

    again = _replayed_from(run_id, after_the_waves)
    assert _outcome(again) == _outcome(first)
    assert _finished(rt, run_id) == 1


# ---------------------------------------------------------------------- backends and scopes
def test_a_backend_that_takes_no_cancel_scope_is_a_configuration_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from actionspace.errors import ConfigurationError
    from actionspace.plan import planner

    async def elsewhere(
        rt: Any, plan: Any, *, run_id: Any, principal: Any, max_concurrency: Any, config: Any
    ) -> Any:
        raise AssertionError("never run")

    monkeypatch.setattr(planner, "load_backend", lambda name: elsewhere)
    plan = {"nodes": [{"id": "n", "tool": "t", "arguments": {}}]}
    with Runtime(store="memory://") as local:
        with pytest.raises(ConfigurationError, match="CancelScope"):
            local.run_plan(plan, backend="elsewhere", cancel=CancelScope())
        with pytest.raises(ConfigurationError, match="retry_of"):
            local.run_plan(plan, backend="dbos", retry_of=PlanResult(run_id="r", status="ok"))
