"""Bad input cannot poison or starve the service (issue item 6)."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace import Principal, Runtime
from actionspace._json_values import MAX_DEPTH
from actionspace.service import RunnerConfig, create_app
from actionspace.service.limits import BodyLimits
from actionspace.trace.store_encoding import RAW_PREFIX_CHARS
from tests.service.apptools import bearer, served

AGENT = bearer("agent-token")
ADMIN = bearer("admin-token")


def _call(city: str) -> dict[str, Any]:
    return {"name": "lookup", "arguments": {"city": city}}


def test_a_nan_in_a_posted_call_is_refused_at_the_edge_and_listings_stay_up(tmp_path: Path) -> None:
    with served(f"sqlite://{tmp_path / 'as.db'}") as (client, rt, _, _, app):
        body = '{"calls": [{"name": "lookup", "arguments": {"city": NaN}}]}'
        refused = client.post(
            "/api/runs", content=body, headers={**AGENT, "content-type": "application/json"}
        )
        assert refused.status_code == 400, refused.text
        assert refused.json()["error"]["category"] == "invalid_arguments"
        # a NaN inside a raw text reaches the parser, never the store as a number
        raw = '{"name": "lookup", "arguments": {"city": "x", "extra": NaN}}'
        run_id = client.post("/api/runs", json={"calls": [raw, _call("Oslo")]}, headers=AGENT).json()[
            "run_id"
        ]
        assert app.state.runner.wait(run_id, timeout=10) in ("partial", "ok", "error")
        for path in ("/api/runs", "/api/metrics", f"/api/runs/{run_id}/events"):
            answer = client.get(path, headers=ADMIN)
            assert answer.status_code == 200, (path, answer.text)
        for event in rt.trace.events(run_id):  # a stored NaN would come back as a float nan
            json.dumps(event.data, allow_nan=False)


def test_an_oversized_body_is_refused_with_413_before_authentication_without_reading_it() -> None:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        raise AssertionError("the application must not be reached")

    limits = BodyLimits(app, max_body_bytes=1024 * 1024)
    read = 0
    sent: list[MutableMapping[str, Any]] = []

    async def receive() -> dict[str, Any]:
        nonlocal read
        read += 64 * 1024
        return {"type": "http.request", "body": b"x" * 64 * 1024, "more_body": read < 150 * 1024 * 1024}

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(message)

    declared = {"type": "http", "method": "POST", "headers": [(b"content-length", str(150 * 2**20).encode())]}
    asyncio.run(limits(declared, receive, send))
    assert sent[0]["status"] == 413 and read == 0
    sent.clear()
    chunked = {"type": "http", "method": "POST", "headers": [(b"transfer-encoding", b"chunked")]}
    asyncio.run(limits(chunked, receive, send))
    assert sent[0]["status"] == 413 and read <= 1024 * 1024 + 64 * 1024
    with served() as (client, *_):
        answer = client.post("/api/runs", content=b"x" * (17 * 2**20))  # no token at all
        assert answer.status_code == 413


def test_raw_model_output_is_stored_bounded_with_its_hash_and_the_whole_as_an_artifact() -> None:
    raw = "<think>" * 150_000 + '{"name": "lookup", "arguments": {"city": "Oslo"}}'
    with served() as (client, rt, _world, _approvals, app):
        run_id = client.post("/api/runs", json={"calls": [raw]}, headers=AGENT).json()["run_id"]
        app.state.runner.wait(run_id, timeout=30)
        (output,) = [e.data for e in rt.trace.events(run_id) if e.kind == "model_output"]
        assert len(output["raw"]) == RAW_PREFIX_CHARS and output["raw_chars"] == len(raw)
        assert rt.artifacts.get(output["artifact_ref"]).decode() == raw


def test_arguments_nested_five_thousand_deep_are_refused_and_leave_the_calls_trace(tmp_path: Path) -> None:
    rt = Runtime(f"sqlite://{tmp_path / 'as.db'}", recover_on_start=False)
    ran: list[int] = []

    @rt.tool(effect="read")
    def inspect(payload: Any) -> int:
        """Read a payload."""
        ran.append(1)
        return 1

    deep: Any = "leaf"
    for _ in range(5000):
        deep = [deep]
    try:
        run = rt.new_run()
        obs = rt.call({"name": "inspect", "arguments": {"payload": deep}}, run_id=run)
        events = rt.trace.events(run)
    finally:
        rt.close()
    # deeper than any JSON parser of ours reads (MAX_DEPTH): refused at the level too deep, unrun
    assert ran == [] and obs.error is not None and obs.error.category == "invalid_arguments"
    assert obs.error.field_errors[0].path == "/payload" + "/0" * (MAX_DEPTH - 1)
    kinds = [e.kind for e in events]
    assert "model_output" in kinds and "observation" in kinds  # the model's output is kept, deep as it is


TENANTS = {
    "t1-agent": Principal(id="a1", scopes=("runs:write", "runs:read", "read:*", "external:*"), tenant="t1"),
    "t2-reader": Principal(id="r2", scopes=("runs:read", "approvals:read", "ledger:read"), tenant="t2"),
    "t2-decider": Principal(id="d2", scopes=("approvals:read", "approvals:decide"), tenant="t2"),
    "t1-decider": Principal(id="d1", scopes=("approvals:read", "approvals:decide"), tenant="t1"),
    "admin-token": Principal(id="admin", scopes=("*",)),
}


def test_tokens_see_and_decide_only_their_tenants_runs_and_approvals() -> None:
    with served(tokens=TENANTS) as (client, _rt, world, signalling, app):
        pay = {"name": "send_payment", "arguments": {"to": "acct-9", "amount": 100}}
        run_id = client.post("/api/runs", json={"calls": [pay]}, headers=bearer("t1-agent")).json()["run_id"]
        request = signalling.wait_for_request()
        assert [r["run_id"] for r in client.get("/api/runs", headers=ADMIN).json()] == [run_id]
        assert client.get("/api/runs", headers=bearer("t2-reader")).json() == []
        assert client.get(f"/api/runs/{run_id}", headers=bearer("t2-reader")).status_code == 404
        assert client.get("/api/approvals", headers=bearer("t2-reader")).json() == []
        denied = client.post(f"/api/approvals/{request.id}/approve", headers=bearer("t2-decider"))
        assert denied.status_code == 404
        assert world.payments == []
        assert len(client.get("/api/approvals", headers=bearer("t1-decider")).json()) == 1
        approved = client.post(f"/api/approvals/{request.id}/approve", headers=bearer("t1-decider"))
        assert approved.status_code == 200, approved.text
        assert app.state.runner.wait(run_id, timeout=10) == "ok"
        assert len(world.payments) == 1


def test_a_run_that_holds_its_loop_does_not_hold_up_another_principals_run() -> None:
    hog_id, other_id = "hogger", "other"
    rt = Runtime("memory://", recover_on_start=False)
    gate, entered = threading.Event(), threading.Event()

    @rt.tool(effect="read")
    async def hog() -> str:
        """Keep the event loop busy."""
        entered.set()
        gate.wait(20)  # blocks its loop on purpose
        return "done"

    @rt.tool(effect="read")
    def quick() -> str:
        """Answer at once."""
        return "ok"

    scopes = ("runs:write", "runs:read", "read:*")
    tokens = {"hog": Principal(id=hog_id, scopes=scopes), "other": Principal(id=other_id, scopes=scopes)}
    app = create_app(rt, tokens=tokens, runner=RunnerConfig(lanes=4))
    try:
        with TestClient(app) as client:
            held = client.post(
                "/api/runs", json={"calls": [{"name": "hog", "arguments": {}}]}, headers=bearer("hog")
            )
            assert entered.wait(10)
            run = client.post(
                "/api/runs", json={"calls": [{"name": "quick", "arguments": {}}]}, headers=bearer("other")
            )
            assert app.state.runner.wait(run.json()["run_id"], timeout=10) == "ok"
            gate.set()
            assert app.state.runner.wait(held.json()["run_id"], timeout=10) == "ok"
    finally:
        gate.set()
        app.state.runner.close()
        rt.close()


def test_a_parse_past_its_time_limit_is_a_parse_error_and_nothing_runs() -> None:
    rt = Runtime("memory://", recover_on_start=False)
    ran: list[str] = []

    @rt.tool(effect="read")
    def quick() -> str:
        """Answer at once."""
        ran.append("quick")
        return "ok"

    app = create_app(
        rt, tokens={"t": Principal(id="p", scopes=("*",))}, runner=RunnerConfig(parse_timeout_s=0.0)
    )
    try:
        with TestClient(app) as client:
            raw = json.dumps({"name": "quick", "arguments": {}})
            run_id = client.post("/api/runs", json={"calls": [raw]}, headers=bearer("t")).json()["run_id"]
            assert app.state.runner.wait(run_id, timeout=10) == "error"
            observed = [e.data for e in rt.trace.events(run_id) if e.kind == "observation"]
    finally:
        app.state.runner.close()
        rt.close()
    assert ran == [] and observed[0]["category"] == "parse_error"


def test_a_body_nested_thousands_deep_is_a_typed_400_never_a_500() -> None:
    deep = "[" * 5000 + "]" * 5000
    with served() as (client, *_):
        answer = client.post(
            "/api/runs",
            content=f'{{"calls": [{{"name": "lookup", "arguments": {{"city": {deep}}}}}]}}',
            headers={**AGENT, "content-type": "application/json"},
        )
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["category"] == "invalid_arguments"


def test_the_runs_listing_never_reads_every_event_of_a_run(tmp_path: Path) -> None:
    with served(f"sqlite://{tmp_path / 'as.db'}") as (client, rt, _world, _approvals, app):
        run_id = client.post("/api/runs", json={"calls": [_call("Oslo")]}, headers=AGENT).json()["run_id"]
        assert app.state.runner.wait(run_id, timeout=10) == "ok"
        read: list[str] = []
        original = rt.trace.events

        def counting(rid: str) -> Any:
            read.append(rid)
            return original(rid)

        rt.trace.events = counting  # type: ignore[method-assign,assignment]
        rows = client.get("/api/runs", headers=ADMIN).json()
    assert [(r["run_id"], r["status"], r["calls"]) for r in rows] == [(run_id, "ok", 1)]
    assert read == []


def test_a_metrics_window_past_year_9999_is_a_typed_422_never_a_500(tmp_path: Path) -> None:
    with served(f"sqlite://{tmp_path / 'as.db'}") as (client, _rt, _, _, _app):
        for since in ("253402300800000", "-1"):
            answer = client.get(f"/api/metrics?since={since}", headers=ADMIN)
            assert answer.status_code == 422, (since, answer.text)
        ok = client.get("/api/metrics?since=253402300799", headers=ADMIN)
        assert ok.status_code == 200, ok.text
        assert ok.json()["since"].startswith("9999-12-31T23:59:59")


@st.composite
def _json_content_type(draw: st.DrawFn) -> str:
    """A content type the routes read as JSON, each letter in either case."""
    declared = draw(st.sampled_from(["application/json", "application/problem+json"]))
    declared += draw(st.sampled_from(["", "; charset=utf-8"]))
    upper = draw(st.lists(st.booleans(), min_size=len(declared), max_size=len(declared)))
    return "".join(c.upper() if u else c for c, u in zip(declared, upper, strict=True))


@settings(max_examples=40, deadline=None)
@given(declared=_json_content_type(), also=st.sampled_from([None, "text/plain", ""]))
def test_a_nan_body_read_as_json_is_refused_whatever_the_case_or_count_of_its_content_types(
    declared: str, also: str | None
) -> None:
    body = '{"calls": [{"name": "send_payment", "arguments": {"to": "acct-1", "amount": NaN}}]}'
    headers = [("authorization", "Bearer agent-token"), ("content-type", declared)]
    if also is not None:  # a second header: the route reads the first, a proxy may read the last
        headers.append(("content-type", also))
    with served() as (client, rt, _world, _approvals, _app):
        answer = client.post("/api/runs", content=body, headers=headers)
        assert answer.status_code == 400, answer.text
        assert answer.json()["error"]["category"] == "invalid_arguments"
        assert rt.trace.runs(limit=10) == []
