"""Information flow on the dbos backend is what it is in process.

A node that waited for a person's approval runs with the labels its ``$ref`` arguments carry, so a
secret read in the plan cannot reach a sink after it, whichever worker runs it and whatever that
worker's memory of the run. Once the plan ends, the model counts as shown every node's result, so a
later call of the run is judged on them.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actionspace import Observation, Runtime, ToolCall
from actionspace.durable import DurableConfig, PlanClient
from actionspace.durable.sweep import WORKER_START_S, Workers
from actionspace.plan.model import PlanResult
from tests.durable import r1_flow_tools as tools
from tests.durable.support import launched, pending_request
from tests.pg import fresh_schema

TOOLS = "tests.durable.r1_flow_tools:register"


@pytest.fixture(scope="module")
def shared_store(pg_url: str) -> Iterator[str]:
    yield from fresh_schema(pg_url)


@pytest.fixture(scope="module")
def rt(shared_store: str) -> Iterator[Runtime]:
    yield from launched(shared_store, tools, approval_poll_s=0.2, approval_poll_max_s=0.5)


def _category(obs: Observation) -> str:
    return obs.status if obs.error is None else obs.error.category


def _in_process_after_approval(rt: Runtime, run_id: str) -> PlanResult:
    """The plan in process: it stops at the approval; approved, the same plan runs again."""
    first = rt.run_plan(tools.plan(), run_id=run_id, backend="inprocess")
    assert _category(first.nodes["t"]) == "needs_approval"
    request = pending_request(rt, run_id)
    rt.approvals.approve(request.id, by="alice")
    return rt.run_plan(tools.plan(), run_id=run_id, backend="inprocess")


def _note(run_id: str) -> ToolCall:
    return ToolCall(name="send_note", arguments={"recipient": "bob@example.com", "body": "hi"}, id=run_id)


def test_a_node_approved_on_the_dbos_backend_keeps_the_secret_its_reference_carries(
    rt: Runtime, shared_store: str
) -> None:
    run_id = f"flow-approve-{uuid.uuid4().hex[:8]}"
    local = _in_process_after_approval(rt, f"{run_id}-local")
    with PlanClient(shared_store, config=rt.durable) as client:
        client.submit(tools.plan(), run_id=run_id)
        request = pending_request(rt, run_id)
        rt.approvals.approve(request.id, by="alice")
        durable = client.result(run_id)
    assert _category(local.nodes["t"]) == _category(durable.nodes["t"]) == "ok"
    assert "secret" in local.nodes["t"].provenance.labels
    assert durable.nodes["t"].provenance.labels == local.nodes["t"].provenance.labels
    assert _category(local.nodes["out"]) == _category(durable.nodes["out"]) == "policy_violation"
    assert [b for b in tools.sent(shared_store) if tools.SECRET in b] == []


def test_after_a_dbos_plan_a_later_call_of_the_run_is_judged_on_what_the_plan_showed(
    rt: Runtime, shared_store: str
) -> None:
    plan = {"nodes": [{"id": "s", "tool": "read_secret", "arguments": {}}]}
    run_id = f"flow-shown-{uuid.uuid4().hex[:8]}"
    outcomes: dict[str, str] = {}
    contexts: dict[str, Any] = {}
    for backend in ("inprocess", "dbos"):
        run = f"{run_id}-{backend}"
        result = rt.run_plan(plan, run_id=run, backend=backend)
        assert result.status == "ok"
        contexts[backend] = rt.run_state(run).flow.context
        outcomes[backend] = _category(rt.call(_note(run), run_id=run))
    assert contexts["dbos"] == contexts["inprocess"]
    assert contexts["dbos"].confidentiality == "secret"
    assert outcomes == {"inprocess": "policy_violation", "dbos": "policy_violation"}
    # another process continuing the run reads the same state back from the store
    other = Runtime(store=shared_store, recover_on_start=False)
    try:
        tools.register(other)
        assert _category(other.call(_note(f"{run_id}-dbos"), run_id=f"{run_id}-dbos")) == "policy_violation"
    finally:
        other.close()
    assert tools.sent(shared_store) == []


@pytest.mark.slow
def test_a_node_approved_while_its_worker_restarts_keeps_the_secret_its_reference_carries(
    rt: Runtime, store: str, tmp_path: Path
) -> None:
    tools.prepare(store)
    local = _in_process_after_approval(rt, f"flow-restart-local-{uuid.uuid4().hex[:8]}")
    run_id = f"flow-restart-{uuid.uuid4().hex[:8]}"
    reader = Runtime(store=store, recover_on_start=False)
    pool = Workers(
        store, 1, schema=f"dbos_{uuid.uuid4().hex[:8]}", concurrency=4, dead_after_s=2.0, logs=tmp_path,
        tools=TOOLS, extra=["--approval-poll-max", "0.5"],
    )  # fmt: skip
    try:
        pool.wait_live(1, WORKER_START_S)
        with PlanClient(store, config=DurableConfig(system_schema=pool.schema)) as client:
            client.submit(tools.plan(), run_id=run_id)
            request = pending_request(reader, run_id, deadline_s=120.0)
            pool.kill(0)  # the node waits in a workflow of the worker killed here
            reader.approvals.approve(request.id, by="alice")
            pool.restart(0)  # a new process, with nothing of the run in memory, takes it over
            durable = client.result(run_id)
    finally:
        pool.stop()
        reader.close()
    assert _category(durable.nodes["t"]) == "ok"
    assert durable.nodes["t"].provenance.labels == local.nodes["t"].provenance.labels
    assert _category(durable.nodes["out"]) == _category(local.nodes["out"]) == "policy_violation"
    assert tools.sent(store) == []
