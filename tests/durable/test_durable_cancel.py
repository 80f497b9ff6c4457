"""Cancelling a durable plan: nodes not dispatched are removed, committed ones stay, nothing raises."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from actionspace import Runtime
from actionspace.durable import PlanClient, launch, plan_workflow_id, shutdown
from actionspace.durable import sweep_tools as tools
from tests.durable.support import launched, pending_request
from tests.pg import fresh_schema


@pytest.fixture(scope="module")
def store(pg_url: str) -> Iterator[str]:
    yield from fresh_schema(pg_url)


@pytest.fixture(scope="module")
def rt(store: str) -> Iterator[Runtime]:
    yield from launched(store, tools, approval_poll_s=0.2, approval_poll_max_s=0.5)


def _effects(url: str, ref: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT count(*) FROM sweep_effects WHERE ref = %s", (ref,)).fetchone()
    return int(row[0]) if row else 0


def _plan(prefix: str) -> tuple[str, dict[str, Any]]:
    """a (a write), then b (needs approval), then c (after b); d runs beside a."""
    run_id = next(
        f"{prefix}{i}" for i in range(10_000) if not any(tools.fault(f"{prefix}{i}/{k}") for k in "acd")
    )

    def node(k: str, tool: str, value: Any) -> dict[str, Any]:
        return {"id": k, "tool": tool, "arguments": {"ref": f"{run_id}/{k}", "value": value}}

    plan = {
        "nodes": [
            node("a", "native_write", 1),
            node("b", "approved_write", {"$ref": "a.data.value"}),
            node("c", "query_write", {"$ref": "b.data.value"}),
            node("d", "native_write", 5),
        ]
    }
    return run_id, plan


def _category(result: Any, k: str) -> str:
    obs = result.nodes[k]
    return str(obs.status if obs.error is None else obs.error.category)


def test_a_plan_cancelled_while_a_node_waits_for_approval_removes_it_and_blocks_its_successors(
    rt: Runtime, store: str
) -> None:
    run_id, plan = _plan("cancelwait")
    with PlanClient(store, config=rt.durable) as client:
        client.submit(plan, run_id=run_id)
        request = pending_request(rt, run_id)
        assert client.cancel(run_id, reason="the user changed their mind")
        result = client.result(run_id)
        rt.approvals.approve(request.id, by="alice")  # too late: the node was removed
        assert not client.cancel(run_id)  # the plan has ended: nothing to cancel
    assert {k: _category(result, k) for k in "abcd"} == {
        "a": "ok",
        "b": "cancelled",
        "c": "cancelled",
        "d": "ok",
    }
    b, c = result.nodes["b"].error, result.nodes["c"].error
    assert b is not None and b.details["phase"] == "not_dispatched"
    assert c is not None and c.details["blocked_by"] == "b"
    assert result.status == "partial"
    assert result.stats["cancelled"] == ["b", "c"]
    time.sleep(1.5)  # longer than the node's looks at its request: it would have run by now
    assert [_effects(store, f"{run_id}/{k}") for k in "abcd"] == [1, 0, 0, 1]


def test_a_plan_cancelled_before_any_worker_took_it_runs_nothing(rt: Runtime, store: str) -> None:
    run_id, plan = _plan("cancelearly")
    shutdown()  # no worker: the plan stays on its queue until one starts
    try:
        with PlanClient(store, config=rt.durable) as client:
            client.submit(plan, run_id=run_id)
            assert client.status(run_id) == "ENQUEUED"
            assert client.cancel(run_id, ["a", "b"])
    finally:
        launch(rt, rt.durable)
    with PlanClient(store, config=rt.durable) as client:
        result = client.result(run_id)
    assert {k: _category(result, k) for k in "abcd"} == {
        "a": "cancelled",
        "b": "cancelled",
        "c": "cancelled",
        "d": "ok",
    }
    assert [_effects(store, f"{run_id}/{k}") for k in "abcd"] == [0, 0, 0, 1]


def test_a_plan_workflow_cancelled_through_dbos_is_a_typed_result_and_its_waiting_node_never_runs(
    rt: Runtime, store: str
) -> None:
    from dbos import DBOS

    run_id, plan = _plan("dboscancel")
    with PlanClient(store, config=rt.durable) as client:
        client.submit(plan, run_id=run_id)
        request = pending_request(rt, run_id)
        DBOS.cancel_workflow(plan_workflow_id(run_id))  # as an operator (or DBOS Conductor) would
        result = client.result(run_id)
        again = rt.run_plan(plan, run_id=run_id)  # the same run again attaches to that result
        rt.approvals.approve(request.id, by="alice")
        time.sleep(1.5)  # longer than the node's looks at its request
    assert result.status == again.status == "error"
    assert result.error is not None and result.error.category == "cancelled"
    assert _effects(store, f"{run_id}/b") == 0
