"""Monitoring reads undecided calls as the metrics do: a call waiting for approval and an unknown commit
are neither failures nor successes; ``failures_by_category`` holds decided failures only."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from actionspace import Runtime
from actionspace.cli import _mount, app
from actionspace.errors import ToolError
from actionspace.evaluation.monitor import monitor
from actionspace.trace.events import TraceEvent
from actionspace.trace.memory import MemoryTraceStore
from tests.service.apptools import bearer, served

UNDECIDED = ("needs_approval", "unknown_commit")


def _call(call_id: str, name: str, **arguments: object) -> dict[str, object]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


def _runtime(url: str) -> Runtime:
    rt = Runtime(url, recover_on_start=False)

    @rt.tool(effect="external", idempotency="none")
    def post(text: str) -> str:
        """Post a note whose answer gets lost."""
        raise ToolError("unknown_commit", "the board closed the connection after accepting the note")

    @rt.tool(effect="write", risk="high", requires_approval=True)
    def pay(to: str) -> str:
        """Pay someone."""
        return "paid"

    @rt.tool(effect="read")
    def lookup(city: str) -> str:
        """Look a city up."""
        if city == "down":
            raise RuntimeError("the backend is down")
        return city

    return rt


def _calls(rt: Runtime) -> list[str]:
    outcomes = [
        rt.call(_call("c1", "post", text="hi"), run_id="r1"),
        rt.call(_call("c2", "pay", to="bob"), run_id="r1"),
        rt.call(_call("c3", "lookup", city="down"), run_id="r1"),
        rt.call(_call("c4", "lookup", city="Oslo"), run_id="r1"),
    ]
    return [o.error.category if o.error else "ok" for o in outcomes]


def test_an_unknown_commit_is_undecided_not_a_failure_and_still_raises_its_alert() -> None:
    rt = _runtime("memory://")
    try:
        assert _calls(rt) == ["unknown_commit", "needs_approval", "unclassified", "ok"]
        report = monitor(rt.trace)
    finally:
        rt.close()
    post = report.tool("post")
    assert (post.failures_by_category, post.failures) == ({}, 0)
    assert (post.undecided_by_category, post.undecided) == ({"unknown_commit": 1}, 1)
    assert post.unknown_commits == 1
    assert [(a.kind, a.tool) for a in report.alerts] == [("unknown_commits", "post")]
    lookup = report.tool("lookup")
    assert lookup.failures_by_category == {"unclassified": 1} and lookup.undecided_by_category == {}


def test_a_call_waiting_for_approval_is_counted_as_undecided() -> None:
    rt = _runtime("memory://")
    try:
        _calls(rt)
        pay = monitor(rt.trace).tool("pay")
    finally:
        rt.close()
    assert (pay.calls, pay.rejects, pay.failures, pay.ok_results) == (1, 0, 0, 0)
    assert pay.undecided_by_category == {"needs_approval": 1}


def test_every_call_lands_in_exactly_one_figure() -> None:
    rt = _runtime("memory://")
    try:
        _calls(rt)
        report = monitor(rt.trace)
    finally:
        rt.close()
    for health in report.tools:
        assert health.rejects + health.failures + health.undecided + health.ok_results == health.calls


def test_a_settled_unknown_commit_leaves_the_alert_and_stays_undecided_as_told(tmp_path: Any) -> None:
    rt = _runtime(f"sqlite:///{tmp_path / 'a.db'}")
    try:
        _calls(rt)
        (entry,) = rt.ledger.list(state="unknown_commit")
        rt.resolve(entry.key, outcome="committed", by="ops", reason="seen on the board")
        report = monitor(rt.trace)
    finally:
        rt.close()
    post = report.tool("post")
    assert (post.unknown_commits, post.failures, post.undecided_by_category) == (0, 0, {"unknown_commit": 1})
    assert report.alerts == ()


def test_the_cli_prints_undecided_calls_apart_from_failures(tmp_path: Any) -> None:
    url = f"sqlite:///{tmp_path / 'trace.db'}"
    rt = _runtime(url)
    try:
        _calls(rt)
    finally:
        rt.close()
    _mount()
    as_json = CliRunner().invoke(app, ["monitor", "--store", url, "--json"])
    assert as_json.exit_code == 0, as_json.output
    tools = {t["tool"]: t for t in json.loads(as_json.stdout)["tools"]}
    assert tools["post"]["failures_by_category"] == {} and tools["post"]["failures"] == 0
    assert tools["post"]["undecided_by_category"] == {"unknown_commit": 1}
    assert tools["pay"]["undecided"] == 1
    table = CliRunner().invoke(app, ["monitor", "--store", url], env={"COLUMNS": "200"})
    assert table.exit_code == 0, table.output
    post_rows = [line.split() for line in table.stdout.splitlines() if line.startswith("post ")]
    assert ["post", "undecided", "unknown_commit", "1"] in post_rows, table.stdout
    assert not any("failed" in row for row in post_rows), table.stdout


def test_the_metrics_api_reports_an_unknown_commit_as_undecided() -> None:
    with served() as (client, rt, *_):
        rt.call({"name": "post_note", "arguments": {"text": "hi"}}, run_id="m1")
        response = client.get("/api/metrics", headers=bearer("admin-token"))
    assert response.status_code == 200, response.text
    (note,) = [t for t in response.json()["tools"] if t["tool"] == "post_note"]
    assert (note["failures"], note["failures_by_category"]) == (0, {})
    assert (note["undecided"], note["undecided_by_category"]) == (1, {"unknown_commit": 1})


_CATEGORY = st.sampled_from((*UNDECIDED, "transient", "conflict", "cancelled", "permission_denied"))


@given(st.lists(st.tuples(_CATEGORY, st.booleans()), min_size=1, max_size=12))
def test_no_undecided_category_is_ever_a_failure(calls: list[tuple[str, bool]]) -> None:
    events: list[TraceEvent] = []
    for i, (category, dispatched) in enumerate(calls):
        kinds: list[tuple[str, dict[str, Any]]] = [("proposed", {"tool": "t"})]
        if dispatched:
            kinds.append(("dispatched", {"tool": "t"}))
        kinds.append(("observation", {"tool": "t", "status": "error", "category": category}))
        for kind, data in kinds:
            events.append(
                TraceEvent(run_id="r", seq=len(events), kind=kind, ts=1.0, call_id=f"c{i}", data=data)
            )
    store = MemoryTraceStore()
    store.append_many(events)
    health = monitor(store).tool("t")
    assert not set(UNDECIDED) & set(health.failures_by_category)
    assert health.undecided == sum(1 for category, _ in calls if category in UNDECIDED)
    assert health.failures == sum(
        1 for category, dispatched in calls if dispatched and category not in UNDECIDED
    )
    assert health.rejects + health.failures + health.undecided <= health.calls
