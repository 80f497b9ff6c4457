"""A session driving Gemini: tools offered as ``FunctionDeclaration`` dicts, the model's
``functionCall`` parts run, and each answered by a ``functionResponse`` part of one ``user``
``Content``, in the calls' order, with the call's ``id`` when it had one."""

from __future__ import annotations

import json
from typing import Any

import pytest

from actionspace import Runtime
from actionspace.discovery.render import PROVIDERS, render_results, render_tools
from actionspace.types import Observation

SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1}},
    "required": ["city"],
    "additionalProperties": False,
}


def _runtime(sent: list[str]) -> Runtime:
    rt = Runtime("memory://")

    def get_weather(city: str, days: int = 1) -> dict[str, Any]:
        sent.append(city)
        return {"city": city, "days": days, "sky": "clear"}

    rt.add_tool(
        name="get_weather", input_schema=SCHEMA, fn=get_weather, effect="read", description="Weather."
    )
    return rt


def _message(*parts: dict[str, Any], reason: str = "STOP") -> dict[str, Any]:
    return {"candidates": [{"content": {"role": "model", "parts": list(parts)}, "finishReason": reason}]}


def _call(args: Any, ident: str | None = None, name: str = "get_weather") -> dict[str, Any]:
    body: dict[str, Any] = {"name": name, "args": args}
    if ident is not None:
        body["id"] = ident
    return {"functionCall": body}


def test_gemini_is_a_provider_of_renderings_and_sessions() -> None:
    assert "gemini" in PROVIDERS
    rt = _runtime([])
    s = rt.session(run_id="g-tools", provider="gemini")
    (declaration,) = s.tools()
    assert declaration == {"name": "get_weather", "description": "Weather.", "parametersJsonSchema": SCHEMA}


def test_render_tools_for_gemini_keeps_the_whole_json_schema() -> None:
    definition = {"name": "f", "description": "F.", "input_schema": {"properties": {"a": {"const": 1}}}}
    (declaration,) = render_tools([definition], "gemini")
    assert declaration["parametersJsonSchema"] == {"type": "object", "properties": {"a": {"const": 1}}}
    assert "parameters" not in declaration


def test_parallel_calls_are_run_and_answered_in_one_user_content_in_call_order() -> None:
    sent: list[str] = []
    rt = _runtime(sent)
    s = rt.session(run_id="g-parallel", provider="gemini")
    s.user("weather in Paris, Rome and Oslo")
    turn = s.handle(
        _message(
            {"text": "Checking."},
            _call({"city": "Paris"}, "a1"),
            _call({"city": "Rome"}),
            _call([1, 2], "a3"),
        )
    )
    assert sent == ["Paris", "Rome"]
    assert turn.content == "Checking."
    (content,) = turn.messages
    assert content["role"] == "user"
    responses = [p["functionResponse"] for p in content["parts"]]
    assert [r["name"] for r in responses] == ["get_weather"] * 3
    assert [r.get("id") for r in responses] == ["a1", None, "a3"]  # none for the call that had none
    assert json.loads(responses[0]["response"]["output"])["data"]["city"] == "Paris"
    assert json.loads(responses[1]["response"]["output"])["data"]["city"] == "Rome"
    error = json.loads(responses[2]["response"]["error"])["error"]
    assert error["category"] == "invalid_arguments"


def test_an_unknown_function_is_answered_under_its_own_name() -> None:
    rt = _runtime([])
    s = rt.session(run_id="g-unknown", provider="gemini")
    s.user("hi")
    (content,) = s.handle(_message(_call({}, "u1", name="get_wether"))).messages
    (part,) = content["parts"]
    assert part["functionResponse"]["name"] == "get_wether"
    assert part["functionResponse"]["id"] == "u1"
    assert json.loads(part["functionResponse"]["response"]["error"])["error"]["category"] == "unknown_tool"


def test_a_message_cut_off_by_the_token_limit_runs_none_and_answers_each_id() -> None:
    sent: list[str] = []
    rt = _runtime(sent)
    s = rt.session(run_id="g-cut", provider="gemini")
    s.user("weather")
    turn = s.handle(
        _message(_call({"city": "Paris"}, "c1"), _call({"city": "Rome"}, "c2"), reason="MAX_TOKENS")
    )
    assert sent == []
    assert turn.unfinished
    assert [o.call_id for o in turn.observations] == ["c1", "c2"]
    assert all(o.error is not None and o.error.category == "parse_error" for o in turn.observations)
    (content,) = turn.messages
    assert content["role"] == "user" and len(content["parts"]) == 2


def test_a_whole_message_parse_error_is_answered_in_one_user_content() -> None:
    rt = _runtime([])
    s = rt.session(run_id="g-malformed", provider="gemini")
    s.user("weather")
    said = "Malformed function call: get_weather(city=)"
    turn = s.handle({"candidates": [{"finishReason": "MALFORMED_FUNCTION_CALL", "finishMessage": said}]})
    (obs,) = turn.observations
    assert obs.call_id == "g-malformed:parse"
    (content,) = turn.messages
    assert content["role"] == "user"
    (part,) = content["parts"]
    body = json.loads(part["text"])
    assert body["error"]["category"] == "parse_error"
    assert "get_weather(city=)" in body["error"]["message"]


def test_a_streamed_response_runs_its_calls_once_the_stream_ended() -> None:
    sent: list[str] = []
    rt = _runtime(sent)
    s = rt.session(run_id="g-stream", provider="gemini")
    s.user("weather")
    chunks = [
        {"candidates": [{"content": {"role": "model", "parts": [_call({"city": "Paris"}, "s1")]}}]},
        {"candidates": [{"content": {"role": "model", "parts": [_call({"city": "Rome"}, "s2")]}}]},
        {"candidates": [{"content": {"role": "model", "parts": []}, "finishReason": "STOP"}]},
    ]
    turn = s.handle(chunks)
    assert sent == ["Paris", "Rome"]
    assert [p["functionResponse"]["id"] for p in turn.messages[0]["parts"]] == ["s1", "s2"]


def test_a_plain_answer_is_done_with_no_message() -> None:
    rt = _runtime([])
    s = rt.session(run_id="g-answer", provider="gemini")
    s.user("hi")
    turn = s.handle(_message({"text": "Hello!"}))
    assert turn.done and turn.content == "Hello!" and turn.messages == []


@pytest.mark.parametrize("status", ["ok", "error"])
def test_render_results_gives_no_content_for_no_observation_and_one_per_call(status: str) -> None:
    assert render_results([], "gemini") == []
    obs = Observation.from_dict({"call_id": "k9", "tool": "f", "status": status, "data": {"x": 1}})
    (content,) = render_results([obs, obs], "gemini")
    (part,) = content["parts"]  # one id answered once
    assert set(part["functionResponse"]["response"]) == {"output" if status == "ok" else "error"}
