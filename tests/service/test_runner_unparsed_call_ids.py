"""A message whose calls do not parse is answered once per call id the model gave, as the engine does."""

from __future__ import annotations

import json
from typing import Any

from actionspace.service import BackgroundRuns, RunnerConfig
from tests.service.apptools import World, bearer, build_runtime, served

CUT_OFF = {
    "role": "assistant",
    "content": None,
    "tool_calls": [
        {"id": "call_A", "type": "function", "function": {"name": "lookup", "arguments": '{"city": '}},
        {"id": "call_B", "type": "function", "function": {"name": "lookup", "arguments": '{"city": "Oslo"}'}},
    ],
}
GOOD = {
    "role": "assistant",
    "content": None,
    "tool_calls": [
        {"id": "call_C", "type": "function", "function": {"name": "lookup", "arguments": '{"city": "Rome"}'}}
    ],
}


def _finished(events: list[Any]) -> dict[str, Any]:
    found = [e.data for e in events if e.kind == "run_finished"]
    assert len(found) == 1
    return dict(found[0])


def _run(calls: list[Any], run_id: str) -> tuple[str, list[Any]]:
    rt, _ = build_runtime(World())
    runner = BackgroundRuns(rt, RunnerConfig())
    try:
        rt.new_run(run_id)
        runner.start_calls(calls, run_id=run_id, principal=rt.principal)
        status = runner.wait(run_id, timeout=20)
        return status, rt.trace.events(run_id)
    finally:
        runner.close()
        rt.close()


def test_each_call_id_of_an_unparsed_message_gets_the_parse_error_and_no_synthetic_id_shows() -> None:
    status, events = _run([CUT_OFF, GOOD], "ids")
    assert status == "partial"
    finished = _finished(events)
    assert finished["failed"] == {"call_A": "parse_error", "call_B": "parse_error"}
    assert finished["calls"] == 3
    observed = [(e.call_id, e.data.get("category")) for e in events if e.kind == "observation"]
    assert observed == [("call_A", "parse_error"), ("call_B", "parse_error"), ("call_C", None)]
    assert not any("ids:parse" in json.dumps(e.data) or e.call_id == "ids:parse" for e in events)


def test_the_same_message_as_json_text_is_answered_per_call_id_too() -> None:
    _status, events = _run([json.dumps(CUT_OFF)], "text-ids")
    assert _finished(events)["failed"] == {"call_A": "parse_error", "call_B": "parse_error"}


def test_raw_text_without_call_ids_keeps_one_observation_under_the_run_parse_id() -> None:
    status, events = _run(["I would rather not call a tool."], "no-ids")
    assert status == "error"
    finished = _finished(events)
    assert finished["failed"] == {"no-ids:parse": "parse_error"} and finished["calls"] == 1
    assert sum(1 for e in events if e.kind == "observation") == 1


def test_the_api_shows_the_model_call_ids_and_counts_each_answered_call() -> None:
    with served() as (client, _rt, _world, _sig, app):
        agent = bearer("agent-token")
        started = client.post("/api/runs", json={"calls": [CUT_OFF], "run_id": "api-ids"}, headers=agent)
        assert started.status_code == 202
        assert app.state.runner.wait("api-ids", timeout=20) == "error"
        row = client.get("/api/runs/api-ids", headers=agent).json()
        assert (row["calls"], row["errors"]) == (2, 2)
        events = client.get("/api/runs/api-ids/events", headers=agent).json()
        finished = next(e for e in events if e["kind"] == "run_finished")
        assert finished["data"]["failed"] == {"call_A": "parse_error", "call_B": "parse_error"}
        assert [e["call_id"] for e in events if e["kind"] == "observation"] == ["call_A", "call_B"]
