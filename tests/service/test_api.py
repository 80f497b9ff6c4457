"""The JSON API through FastAPI's TestClient: every route of the contract, and its shapes."""

from __future__ import annotations

from typing import Any

from actionspace import Plan, ToolCall
from tests.service.apptools import bearer, served

ADMIN = bearer("admin-token")


def _call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


def test_health_answers_without_a_token() -> None:
    with served() as (client, *_):
        response = client.get("/api/health")
        assert response.status_code == 200
        assert response.json() == {"status": "ok", "version": "0.1.0"}


def test_runs_list_shows_a_finished_run_with_its_principal_calls_and_errors() -> None:
    with served() as (client, rt, *_):
        run_id = rt.new_run("r-list")
        rt.call(_call("lookup", city="Oslo"), run_id=run_id)
        rt.call(_call("nope"), run_id=run_id)
        rt.finish(run_id, status="ok")
        rows = client.get("/api/runs", headers=ADMIN).json()
        assert [r["run_id"] for r in rows] == ["r-list"]
        row = rows[0]
        assert row["status"] == "ok" and row["principal"] == "service"
        assert (row["calls"], row["errors"]) == (2, 1)
        assert row["finished_at"] is not None and row["finished_at"] >= row["started_at"]


def test_runs_list_pages_with_limit_and_before() -> None:
    with served() as (client, rt, *_):
        for n in range(3):
            rt.new_run(f"r{n}")
        first = client.get("/api/runs", params={"limit": 2}, headers=ADMIN).json()
        assert [r["run_id"] for r in first] == ["r2", "r1"]
        rest = client.get("/api/runs", params={"limit": 2, "before": first[-1]["last_at"]}, headers=ADMIN)
        assert [r["run_id"] for r in rest.json()] == ["r0"]
        assert client.get("/api/runs", params={"limit": 0}, headers=ADMIN).status_code == 422


def test_run_detail_draws_the_plan_with_node_statuses_and_edges() -> None:
    with served() as (client, rt, *_):
        plan = Plan.from_dict(
            {
                "nodes": [
                    {"id": "a", "tool": "lookup", "arguments": {"city": "Oslo"}},
                    {"id": "b", "tool": "lookup", "arguments": {"city": {"$ref": "a.data.city"}}},
                    {"id": "c", "tool": "missing_tool", "arguments": {}},
                ]
            }
        )
        result = rt.run_plan(plan, run_id="r-plan")
        assert result.status == "error"  # an unknown tool rejects the plan: nothing runs
        rt.run_plan(
            {
                "nodes": [
                    {"id": "a", "tool": "lookup", "arguments": {"city": "Oslo"}},
                    {"id": "b", "tool": "lookup", "arguments": {"city": {"$ref": "a.data.city"}}},
                ]
            },
            run_id="r-dag",
        )
        detail = client.get("/api/runs/r-dag", headers=ADMIN).json()
        assert detail["run_id"] == "r-dag"
        assert detail["plan"] == {
            "nodes": [
                {"id": "a", "tool": "lookup@1", "status": "ok", "category": None},
                {"id": "b", "tool": "lookup@1", "status": "ok", "category": None},
            ],
            "edges": [["a", "b"]],
        }
        assert client.get("/api/runs/r-plan", headers=ADMIN).json()["plan"] is None


def test_run_events_come_in_sequence_order_with_their_call_ids() -> None:
    with served() as (client, rt, *_):
        rt.call(_call("lookup", city="Oslo"), run_id="r-ev", node_id="n1")
        events = client.get("/api/runs/r-ev/events", headers=ADMIN).json()
        assert [e["seq"] for e in events] == list(range(len(events)))
        kinds = [e["kind"] for e in events]
        assert kinds[0] == "run_started" and kinds[-1] == "observation"
        assert events[-1]["call_id"] == "r-ev:n1" and events[-1]["data"]["status"] == "ok"
        assert all(isinstance(e["at"], str) and e["at"].endswith("Z") for e in events)  # ISO-8601 UTC


def test_an_unknown_run_is_404_with_an_error_body() -> None:
    with served() as (client, *_):
        for path in ("/api/runs/none", "/api/runs/none/events"):
            response = client.get(path, headers=ADMIN)
            assert response.status_code == 404
            assert "none" in response.json()["error"]["message"]


def test_a_background_plan_runs_and_finishes() -> None:
    with served() as (client, _rt, _world, _sig, app):
        plan = {"nodes": [{"id": "a", "tool": "lookup", "arguments": {"city": "Oslo"}}]}
        response = client.post(
            "/api/runs", json={"plan": plan, "run_id": "bg1"}, headers=bearer("agent-token")
        )
        assert response.status_code == 202 and response.json() == {"run_id": "bg1"}
        assert app.state.runner.wait("bg1", timeout=10) == "ok"
        detail = client.get("/api/runs/bg1", headers=ADMIN).json()
        assert detail["status"] == "ok" and detail["principal"] == "agent"
        assert detail["plan"]["nodes"][0]["status"] == "ok"


def test_background_calls_run_in_order_and_a_parse_error_is_a_recorded_error() -> None:
    with served() as (client, _rt, _world, _sig, app):
        calls = [_call("lookup", city="Oslo"), "no tool call here", _call("lookup", city="Rome")]
        response = client.post("/api/runs", json={"calls": calls}, headers=bearer("agent-token"))
        run_id = response.json()["run_id"]
        assert app.state.runner.wait(run_id, timeout=10) == "partial"
        events = client.get(f"/api/runs/{run_id}/events", headers=ADMIN).json()
        observed = [(e["call_id"], e["data"]["status"]) for e in events if e["kind"] == "observation"]
        assert observed == [(f"{run_id}:c1", "ok"), (f"{run_id}:parse", "error"), (f"{run_id}:c3", "ok")]


def test_starting_a_run_needs_exactly_one_of_plan_or_calls_and_a_free_run_id() -> None:
    with served() as (client, rt, *_):
        agent = bearer("agent-token")
        both = client.post("/api/runs", json={"plan": {"nodes": []}, "calls": []}, headers=agent)
        assert both.status_code == 422 and both.json()["error"]["category"] == "invalid_arguments"
        neither = client.post("/api/runs", json={"run_id": "x"}, headers=agent)
        assert neither.status_code == 422
        rt.new_run("taken")
        taken = client.post("/api/runs", json={"calls": [], "run_id": "taken"}, headers=agent)
        assert taken.status_code == 409 and taken.json()["error"]["category"] == "conflict"


def test_a_malformed_plan_is_accepted_and_its_run_ends_with_the_typed_rejection() -> None:
    with served() as (client, _rt, _world, _sig, app):
        response = client.post("/api/runs", json={"plan": {"nodes": []}}, headers=bearer("agent-token"))
        assert response.status_code == 202
        run_id = response.json()["run_id"]
        assert app.state.runner.wait(run_id, timeout=10) == "error"
        events = client.get(f"/api/runs/{run_id}/events", headers=ADMIN).json()
        rejected = [e for e in events if e["kind"] == "plan_rejected"]
        assert rejected and rejected[0]["data"]["category"] == "invalid_arguments"
        assert client.get(f"/api/runs/{run_id}", headers=ADMIN).json()["status"] == "error"


def test_catalog_lists_every_tool_and_describes_one() -> None:
    with served() as (client, *_):
        tools = client.get("/api/catalog", headers=ADMIN).json()
        assert [t["name"] for t in tools] == ["lookup", "post_note", "send_payment"]
        one = client.get("/api/catalog/send_payment", headers=ADMIN).json()
        assert one["requires_approval"] is True and one["effect"] == "external"
        assert one["input_schema"]["required"] == ["to", "amount"]
        assert client.get("/api/catalog/send_payment@1", headers=ADMIN).json()["version"] == "1"
        missing = client.get("/api/catalog/nope", headers=ADMIN)
        assert missing.status_code == 404 and missing.json()["error"]["category"] == "unknown_tool"


def test_metrics_report_per_tool_health_from_the_trace() -> None:
    with served() as (client, rt, *_):
        rt.call(_call("lookup", city="Oslo"), run_id="m1")
        rt.call(_call("lookup"), run_id="m1")  # missing argument: rejected at validate
        rt.call(_call("post_note", text="hi"), run_id="m1")
        report = client.get("/api/metrics", headers=ADMIN).json()
        assert report["runs"] == 1 and report["calls"] == 3
        by_tool = {t["tool"]: t for t in report["tools"]}
        assert by_tool["lookup"]["calls"] == 2 and by_tool["lookup"]["rejects"] == 1
        assert by_tool["post_note"]["unknown_commits"] == 1
        assert any(a["kind"] == "unknown_commits" and a["tool"] == "post_note" for a in report["alerts"])


def test_a_toolcall_value_runs_like_raw_output() -> None:
    # The runner resends held calls as ToolCall values; the runtime accepts them directly.
    with served() as (_client, rt, *_):
        obs = rt.call(ToolCall(name="lookup", arguments={"city": "Oslo"}), run_id="tc")
        assert obs.ok


def test_a_failing_store_is_a_500_with_an_internal_error_body_that_hides_the_details() -> None:
    from fastapi.testclient import TestClient

    with served() as (_client, rt, _world, _sig, app):

        def broken(*, limit: int = 50, since: float | None = None) -> list[Any]:
            raise OSError("disk /secret/path is gone")

        rt.trace.runs = broken  # type: ignore[method-assign]
        client = TestClient(app, raise_server_exceptions=False)
        response = client.get("/api/runs", headers=ADMIN)
        assert response.status_code == 500
        assert response.json() == {
            "error": {"message": "the service failed: OSError", "category": "internal"}
        }
