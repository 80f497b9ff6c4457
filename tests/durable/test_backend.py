"""The dbos plan backend in one process: same results as in-process, stable keys, honest ambiguity."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from actionspace import Runtime
from actionspace.approval.requests import ApprovalRequest
from actionspace.durable import (
    DurableConfig,
    PlanClient,
    launch,
    node_workflow_id,
    plan_workflow_id,
    shutdown,
)
from actionspace.durable import sweep_tools as tools
from actionspace.durable.approval import wake, wake_decided
from actionspace.durable.engine import plan_result
from actionspace.errors import ConfigurationError
from actionspace.ledger.commit import new_entry
from actionspace.ledger.keys import idempotency_key
from tests.durable.support import pending_request
from tests.pg import fresh_schema


@pytest.fixture(scope="module")
def store(pg_url: str) -> Iterator[str]:
    """One schema for this module's tests (their run ids differ): DBOS launches once."""
    yield from fresh_schema(pg_url)


@pytest.fixture(scope="module")
def rt(store: str) -> Iterator[Runtime]:
    tools.prepare(store)
    config = DurableConfig(system_schema=f"dbos_{uuid.uuid4().hex[:8]}")
    runtime = Runtime(store=store, plan_backend="dbos", durable=config, recover_on_start=False)
    tools.register(runtime)
    try:
        yield runtime
    finally:
        shutdown()
        runtime.close()


def _effects(url: str, ref: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT count(*) FROM sweep_effects WHERE ref = %s", (ref,)).fetchone()
    return int(row[0]) if row else 0


def _chain(run_id: str) -> dict[str, Any]:
    return {
        "nodes": [
            {"id": "a", "tool": "native_write", "arguments": {"ref": f"{run_id}/a", "value": 1}},
            {
                "id": "b",
                "tool": "query_write",
                "arguments": {"ref": f"{run_id}/b", "value": {"$ref": "a.data.value"}},
            },
            {"id": "c", "tool": "none_write", "arguments": {"ref": f"{run_id}/c", "value": 7}},
            {
                "id": "d",
                "tool": "query_write",
                "arguments": {"ref": f"{run_id}/d", "value": {"$ref": "b.data.value"}},
            },
        ]
    }


def _clean_run(prefix: str) -> str:
    """A run id none of whose chain nodes draws a lost response."""
    for i in range(1000):
        run_id = f"{prefix}{i}"
        if not any(tools.fault(f"{run_id}/{k}") for k in "abcd"):
            return run_id
    raise AssertionError("no clean run id")


def test_a_plan_runs_as_a_workflow_with_the_same_results_as_in_process(rt: Runtime, store: str) -> None:
    durable_run, local_run = _clean_run("dur"), _clean_run("loc")
    durable = rt.run_plan(_chain(durable_run), run_id=durable_run)
    local = rt.run_plan(_chain(local_run), run_id=local_run, backend="inprocess")
    assert durable.status == local.status == "ok"
    assert {k: o.data["value"] for k, o in durable.nodes.items()} == {"a": 2, "b": 3, "c": 8, "d": 4}
    assert {k: o.data["value"] for k, o in local.nodes.items()} == {"a": 2, "b": 3, "c": 8, "d": 4}
    assert durable.stats["plan_workflow"] == plan_workflow_id(durable_run)
    for k in "abcd":  # the ledger key is per (run, plan node id), as in process
        entry = rt.ledger.get_node(durable_run, k)
        assert entry is not None and entry.state == "committed"
        assert _effects(store, f"{durable_run}/{k}") == 1


def _node_workflows(run_id: str, nodes: str) -> list[str]:
    """The ids of the node workflows that exist for ``nodes`` of the plan of ``run_id``."""
    from dbos import DBOS

    ids = [node_workflow_id(run_id, k) for k in nodes]
    return sorted(w.workflow_id for w in DBOS.list_workflows(workflow_ids=ids, load_input=False))


def test_a_plan_runs_its_ready_nodes_in_waves_of_one_workflow_with_one_checkpoint_each(
    rt: Runtime, store: str
) -> None:
    from dbos import DBOS

    run_id = _clean_run("waves")
    result = rt.run_plan(_chain(run_id), run_id=run_id)
    assert result.status == "ok"
    assert result.stats["waves"] == 3  # {a, c}, then b, then d
    assert result.stats["max_parallel"] == 2
    assert _node_workflows(run_id, "abcd") == []  # no workflow per node
    steps = [s["function_name"] for s in DBOS.list_workflow_steps(plan_workflow_id(run_id))]
    assert steps.count("actionspace.plan.wave") == 3
    assert [_effects(store, f"{run_id}/{k}") for k in "abcd"] == [1, 1, 1, 1]
    kinds = [e.kind for e in rt.trace.events(run_id)]
    assert kinds.count("plan_started") == kinds.count("plan_finished") == 1
    assert kinds[-1] == "plan_finished"


def test_a_plan_whose_last_wave_blocks_nodes_closes_its_trace_once_after_them(rt: Runtime) -> None:
    run_id = next(f"shut{i}" for i in range(10_000) if tools.fault(f"shut{i}/x"))
    plan = {
        "nodes": [
            {"id": "x", "tool": "none_write", "arguments": {"ref": f"{run_id}/x", "value": 1}},
            {
                "id": "y",
                "tool": "native_write",
                "arguments": {"ref": f"{run_id}/y", "value": {"$ref": "x.data.value"}},
            },
        ]
    }
    result = rt.run_plan(plan, run_id=run_id)
    assert result.status != "ok"
    events = [(e.kind, e.data) for e in rt.trace.events(run_id)]
    kinds = [kind for kind, _ in events]
    assert kinds.count("plan_finished") == 1 and kinds[-1] == "plan_finished"
    assert kinds.index("plan_node_blocked") < kinds.index("plan_finished")
    assert events[-1][1]["failed"] == {"x": "unknown_commit", "y": "cancelled"}


def test_a_plan_resumed_from_a_later_wave_replays_the_earlier_ones_and_sends_nothing_again(
    rt: Runtime, store: str
) -> None:
    from dbos import DBOS

    run_id = _clean_run("fork")
    first = rt.run_plan(_chain(run_id), run_id=run_id)
    steps = DBOS.list_workflow_steps(plan_workflow_id(run_id))
    waves = [s for s in steps if s["function_name"] == "actionspace.plan.wave"]
    # a new execution that keeps the first wave's checkpoint and runs the last two waves again
    handle = DBOS.fork_workflow(plan_workflow_id(run_id), waves[1]["function_id"])
    again = plan_result(handle.get_result())
    assert again.status == first.status == "ok"
    values = {k: o.data for k, o in first.nodes.items()}
    assert {k: o.data for k, o in again.nodes.items()} == values
    assert [_effects(store, f"{run_id}/{k}") for k in "abcd"] == [1, 1, 1, 1]


def test_running_the_same_run_again_returns_the_stored_result_without_new_effects(
    rt: Runtime, store: str
) -> None:
    run_id = _clean_run("again")
    first = rt.run_plan(_chain(run_id), run_id=run_id)
    second = rt.run_plan(_chain(run_id), run_id=run_id)
    assert second.to_dict()["nodes"] == first.to_dict()["nodes"]
    assert [_effects(store, f"{run_id}/{k}") for k in "abcd"] == [1, 1, 1, 1]


def test_a_lost_response_of_a_none_tool_ends_unknown_commit_and_blocks_its_dependents(rt: Runtime) -> None:
    run_id = next(f"lost{i}" for i in range(10_000) if tools.fault(f"lost{i}/x"))
    plan = {
        "nodes": [
            {"id": "x", "tool": "none_write", "arguments": {"ref": f"{run_id}/x", "value": 1}},
            {
                "id": "y",
                "tool": "native_write",
                "arguments": {"ref": f"{run_id}/y", "value": {"$ref": "x.data.value"}},
            },
        ]
    }
    result = rt.run_plan(plan, run_id=run_id)
    x, y = result.nodes["x"], result.nodes["y"]
    assert x.error is not None and x.error.category == "unknown_commit"
    assert y.error is not None and y.error.category == "cancelled"
    assert y.error.details["blocked_by"] == "x"


@pytest.mark.parametrize(("tool", "committed", "expected"), [
    ("native_write", True, "ok"),         # asked again with the same key: the tool dedupes
    ("query_write", True, "ok"),          # the status query finds the effect: ok, nothing re-sent
    ("query_write", False, "ok"),         # the status query says not committed: sent once, with the key
    ("none_write", True, "unknown_commit"),  # cannot be asked: never re-sent
])  # fmt: skip
def test_a_node_interrupted_mid_dispatch_is_settled_by_its_status_query_never_re_sent(
    rt: Runtime, store: str, tool: str, committed: bool, expected: str
) -> None:
    prefix = f"cut-{tool}-{committed}-"
    run_id = next(f"{prefix}{i}" for i in range(10_000) if not tools.fault(f"{prefix}{i}/n"))
    ref = f"{run_id}/n"
    arguments = {"ref": ref, "value": 3}
    spec = rt.catalog.get(tool)
    key = idempotency_key(run_id, "n", spec.key, arguments)
    entry = new_entry(key=key, run_id=run_id, node_id="n", spec=spec, arguments=arguments)
    began = rt.ledger.begin(entry).entry
    rt.ledger.transition(key, ("accepted",), began.evolve(state="dispatched", attempts=1))
    if committed:  # the earlier attempt's send reached the tool before the worker died
        with psycopg.connect(store, autocommit=True) as conn:
            kind = tool.partition("_")[0]
            conn.execute(
                "INSERT INTO sweep_effects (kind, ref, value, at) VALUES (%s, %s, 3, 0)", (kind, ref)
            )
            conn.execute("INSERT INTO sweep_native_keys (key) VALUES (%s)", (key,))
    result = rt.run_plan({"nodes": [{"id": "n", "tool": tool, "arguments": arguments}]}, run_id=run_id)
    obs = result.nodes["n"]
    assert (obs.status if obs.error is None else obs.error.category) == expected
    assert _effects(store, ref) == 1


def test_an_unknown_plan_backend_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="plan_backend"):
        Runtime(store="memory://", plan_backend="celery")


def _approval_plan(prefix: str) -> tuple[str, dict[str, Any]]:
    """A run id whose first node draws no lost response, and its plan: a write, then one needing approval."""
    run_id = next(f"{prefix}{i}" for i in range(10_000) if not tools.fault(f"{prefix}{i}/a"))
    plan = {
        "nodes": [
            {"id": "a", "tool": "native_write", "arguments": {"ref": f"{run_id}/a", "value": 1}},
            {
                "id": "b",
                "tool": "approved_write",
                "arguments": {"ref": f"{run_id}/b", "value": {"$ref": "a.data.value"}},
            },
        ]
    }
    return run_id, plan


def test_a_node_waiting_for_approval_resumes_when_the_request_is_approved_and_woken(
    rt: Runtime, store: str
) -> None:
    run_id, plan = _approval_plan("wait")
    launch(rt, rt.durable)
    with PlanClient(store, config=rt.durable) as client:
        client.submit(plan, run_id=run_id)
        request = pending_request(rt, run_id)
        assert client.status(run_id) == "PENDING"
        approved = rt.approvals.approve(request.id, by="alice")
        assert wake(client, approved)
        result = client.result(run_id)
    assert result.status == "ok"
    assert result.nodes["b"].data == {"ref": f"{run_id}/b", "value": 3}
    assert _effects(store, f"{run_id}/b") == 1
    assert _node_workflows(run_id, "ab") == [node_workflow_id(run_id, "b")]  # only b had to wait


def test_a_decision_taken_in_the_store_wakes_the_waiting_node_at_once(rt: Runtime, store: str) -> None:
    run_id, plan = _approval_plan("woke")
    launch(rt, rt.durable)
    with PlanClient(store, config=rt.durable) as client:
        client.submit(plan, run_id=run_id)
        request = pending_request(rt, run_id)
        # The node looks on its own after 2, 6, 14 … s (the wait doubles): 7 s in, the next look is
        # about 7 s away, so only the wake can make it resume within 5.5 s.
        time.sleep(rt.durable.approval_poll_s * 3.5)
        approved = rt.approvals.approve(request.id, by="alice")
        started = time.monotonic()
        assert wake_decided(store, approved, rt.durable)
        result = client.result(run_id)
        waited = time.monotonic() - started
    assert result.status == "ok"
    assert waited < rt.durable.approval_poll_s * 2.75, f"resumed after {waited:.1f} s: not woken"
    assert _effects(store, f"{run_id}/b") == 1


def test_waking_is_skipped_where_no_durable_node_can_wait(store: str) -> None:
    request = ApprovalRequest(
        id="apr_x", run_id="r1", node_id="b", tool="approved_write@1", args_digest="d", arguments={},
        provenance={},
    )  # fmt: skip
    assert not wake_decided("sqlite:///tmp/none.db", request, None)  # no DBOS outside PostgreSQL
    other = DurableConfig(system_schema=f"dbos_absent_{uuid.uuid4().hex[:8]}")
    assert not wake_decided(store, request, other)  # no DBOS tables in that schema
    with psycopg.connect(store) as conn:
        found = conn.execute(
            "SELECT count(*) FROM information_schema.schemata WHERE schema_name = %s", (other.system_schema,)
        ).fetchone()
    assert found == (0,), "waking must not create DBOS tables"


class _CountingLedger:
    """The runtime's ledger, counting the reads of entries by node."""

    def __init__(self, ledger: Any) -> None:
        self._ledger = ledger
        self.reads = 0

    def get_node(self, run_id: str, node_id: str) -> Any:
        self.reads += 1
        return self._ledger.get_node(run_id, node_id)

    def entries_of(self, run_id: str, node_ids: Any) -> Any:
        self.reads += 1
        return self._ledger.entries_of(run_id, node_ids)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ledger, name)


def test_a_wave_reads_its_nodes_ledger_entries_at_once_and_settles_only_the_interrupted(
    rt: Runtime, store: str
) -> None:
    from types import SimpleNamespace

    from actionspace.durable.nodes import begin_attempts

    run_id = _clean_run("onereads")
    warm = {"id": "a", "tool": "native_write", "arguments": {"ref": f"{run_id}/a", "value": 1}}
    rt.run_plan({"nodes": [warm]}, run_id=f"{run_id}-warm")  # launches the backend
    ledger = _CountingLedger(rt.ledger)
    view: Any = SimpleNamespace(ledger=ledger, catalog=rt.catalog, record=rt.record)
    nodes = [f"n{i}" for i in range(6)]
    begin_attempts(view, run_id, {k: uuid.uuid4().hex for k in nodes})
    assert ledger.reads == 1  # nothing stored yet: one query for the whole wave

    spec = rt.catalog.get("query_write")
    keys = {}
    for k in nodes[:3]:  # n0 committed, n1 dispatched by an attempt that died, n2 accepted
        arguments = {"ref": f"{run_id}/{k}", "value": 1}
        keys[k] = key = idempotency_key(run_id, k, spec.key, arguments)
        began = rt.ledger.begin(
            new_entry(key=key, run_id=run_id, node_id=k, spec=spec, arguments=arguments)
        ).entry
        if k != "n2":
            state = "committed" if k == "n0" else "dispatched"
            rt.ledger.transition(key, ("accepted",), began.evolve(state=state, attempts=1))
    ledger.reads = 0
    begin_attempts(view, run_id, {k: uuid.uuid4().hex for k in nodes})
    assert ledger.reads == 1  # the interrupted entry is settled from the wave's read
    states = {k: rt.ledger.get(key) for k, key in keys.items()}
    assert {k: e.state if e else None for k, e in states.items()} == {
        "n0": "committed",
        "n1": "accepted",  # its status query found nothing: it may be sent again, same key
        "n2": "accepted",
    }
    assert _effects(store, f"{run_id}/n1") == 0  # settling sent nothing


def test_a_plan_on_a_launched_backend_does_not_launch_again(
    rt: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    from actionspace.durable import backend

    run_id = _clean_run("nolaunch")
    rt.run_plan(_chain(f"{run_id}-first"), run_id=f"{run_id}-first")  # launches the backend

    def launch_again(*_args: Any) -> None:
        raise AssertionError("launched again")

    monkeypatch.setattr(backend, "launch", launch_again)
    result = rt.run_plan(_chain(run_id), run_id=run_id)
    assert result.status == "ok" and result.stats["backend"] == "dbos"
