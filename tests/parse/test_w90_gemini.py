"""Gemini's messages (``generateContent`` responses, ``Content``, parts; REST JSON or the
google-genai SDK's objects; streamed chunks) are read as calls, and every malformed one ends as
a typed error, never an exception."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from actionspace.parse import StreamParser, call_ids, parse
from actionspace.types import ToolCall


def _call(name: str, args: Any = None, ident: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"name": name}
    if args is not None:
        body["args"] = args
    if ident is not None:
        body["id"] = ident
    return {"functionCall": body}


def _response(parts: list[Any], reason: str | None = "STOP", **candidate: Any) -> dict[str, Any]:
    cand: dict[str, Any] = {"content": {"role": "model", "parts": parts}, **candidate}
    if reason is not None:
        cand["finishReason"] = reason
    return {"candidates": [cand], "usageMetadata": {"totalTokenCount": 12}, "modelVersion": "gemini-x"}


PARALLEL = [
    {"text": "Checking both cities."},
    _call("get_weather", {"city": "Paris"}, "a1"),
    _call("get_weather", {"city": "Rome"}, "a2"),
]


def test_a_generate_content_response_gives_its_calls_in_part_order_with_their_ids() -> None:
    result = parse(_response(PARALLEL))
    assert result.error is None
    assert result.format == "gemini"
    assert [(c.name, c.arguments, c.id) for c in result.calls] == [
        ("get_weather", {"city": "Paris"}, "a1"),
        ("get_weather", {"city": "Rome"}, "a2"),
    ]
    assert result.content == "Checking both cities."
    assert result.stop_reason == "STOP"


def test_its_json_text_a_bare_content_and_a_list_of_parts_read_the_same_calls() -> None:
    expected = parse(_response(PARALLEL)).calls
    assert parse(json.dumps(_response(PARALLEL))).calls == expected
    assert parse({"role": "model", "parts": PARALLEL}).calls == expected
    assert parse(PARALLEL).calls == expected
    assert parse(PARALLEL[1]).calls == expected[:1]


def test_a_call_without_id_has_none_and_missing_args_are_no_arguments() -> None:
    result = parse(_response([_call("now"), _call("get_weather", {"city": "Oslo"})]))
    assert result.error is None
    assert [(c.name, c.arguments, c.id) for c in result.calls] == [
        ("now", {}, None),
        ("get_weather", {"city": "Oslo"}, None),
    ]


@pytest.mark.parametrize("args", [[1, 2], 7, True])
def test_args_that_are_not_an_object_are_kept_for_validation_to_refuse(args: Any) -> None:
    result = parse(_response([_call("get_weather", args)]))
    assert result.error is None
    assert result.calls[0].arguments == args


def test_thought_parts_are_reasoning_and_other_parts_hold_no_call() -> None:
    parts = [
        {"text": "let me think", "thought": True},
        {"executableCode": {"language": "PYTHON", "code": "print(1)"}},
        {"text": "Done.", "thoughtSignature": "c2ln"},
        _call("f", {"a": 1}),
    ]
    result = parse(_response(parts))
    assert result.error is None
    assert result.reasoning == "let me think"
    assert result.content == "Done."
    assert [c.name for c in result.calls] == ["f"]


class _Model(BaseModel):
    """A stand-in for the google-genai SDK's base model: camelCase aliases, snake_case fields."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)


class _FunctionCall(_Model):
    id: str | None = None
    name: str | None = None
    args: dict[str, Any] | None = None
    partial_args: list[Any] | None = None
    will_continue: bool | None = None


class _Part(_Model):
    text: str | None = None
    thought: bool | None = None
    thought_signature: bytes | None = None
    function_call: _FunctionCall | None = None
    function_response: dict[str, Any] | None = None


class _Content(_Model):
    role: str | None = None
    parts: list[_Part] | None = None


class _Candidate(_Model):
    content: _Content | None = None
    finish_reason: str | None = None
    finish_message: str | None = None
    index: int | None = None


class _Response(_Model):
    candidates: list[_Candidate] | None = None
    prompt_feedback: dict[str, Any] | None = None
    usage_metadata: dict[str, Any] | None = None


def _sdk_response(reason: str | None = "STOP") -> _Response:
    parts = [
        _Part(text="On it."),
        _Part(function_call=_FunctionCall(name="f", args={"a": 1}, id="x1"), thought_signature=b"sig"),
        _Part(function_call=_FunctionCall(name="g")),
    ]
    return _Response(
        candidates=[_Candidate(content=_Content(role="model", parts=parts), finish_reason=reason)]
    )


def test_sdk_objects_are_read_by_their_model_dump_without_the_sdk() -> None:
    response = _sdk_response()
    for value in (response, response.candidates[0], response.candidates[0].content):  # type: ignore[index]
        result = parse(value)
        assert result.error is None, result.error
        assert [(c.name, c.arguments, c.id) for c in result.calls] == [("f", {"a": 1}, "x1"), ("g", {}, None)]
    assert call_ids(response) == ("x1",)


def test_the_google_genai_sdk_objects_read_as_their_json() -> None:
    types = pytest.importorskip("google.genai.types")
    part = types.Part(function_call=types.FunctionCall(name="f", args={"a": 1}, id="x1"))
    content = types.Content(role="model", parts=[types.Part(text="hi"), part])
    response = types.GenerateContentResponse(
        candidates=[types.Candidate(content=content, finish_reason=types.FinishReason.MAX_TOKENS)]
    )
    assert parse(content).calls == (ToolCall(name="f", arguments={"a": 1}, id="x1"),)
    cut = parse(response)
    assert cut.stop_reason == "MAX_TOKENS" and cut.unfinished
    assert cut.error is not None and cut.error.details["reason"] == "cut_off"
    assert cut.error.details["call_ids"] == ["x1"]
    assert parse(response.model_dump(mode="json", by_alias=True, exclude_none=True)).error == cut.error


@pytest.mark.parametrize("reason", ["MAX_TOKENS", "SAFETY", "RECITATION"])
def test_calls_of_an_output_cut_off_or_stopped_by_a_filter_run_none(reason: str) -> None:
    result = parse(_response(PARALLEL, reason))
    assert result.calls == ()
    assert result.error is not None and result.error.category == "parse_error"
    assert result.error.details["reason"] == "cut_off"
    assert result.error.details["call_ids"] == ["a1", "a2"]
    assert result.stop_reason == reason


@pytest.mark.parametrize("reason", ["MALFORMED_FUNCTION_CALL", "UNEXPECTED_TOOL_CALL", "TOO_MANY_TOOL_CALLS"])
def test_a_call_the_provider_could_not_read_is_a_parse_error_with_its_message(reason: str) -> None:
    said = "Malformed function call: print(default_api.f(a=))"
    result = parse({"candidates": [{"finishReason": reason, "finishMessage": said}]})
    assert result.error is not None and result.error.category == "parse_error"
    assert result.error.details["reason"] == reason.lower()
    assert "default_api.f(a=)" in result.error.message


def test_a_blocked_prompt_proposes_nothing_and_says_why() -> None:
    result = parse({"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"}})
    assert result.error is None and result.calls == ()
    assert result.stop_reason == "PROHIBITED_CONTENT"


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ({"role": "user", "parts": [{"text": "hi"}]}, "not_assistant"),
        (_response([{"functionCall": {"args": {}}}]), "missing_name"),
        (_response([{"functionCall": {"name": ""}}]), "invalid_name"),
        (_response([{"functionCall": {"name": "f", "id": ["x"]}}]), "invalid_id"),
        (_response([{"functionCall": "f()"}]), "invalid_function_call"),
        (_response([7]), "invalid_part"),
        (_response([_call("f", {}, "d"), _call("g", {}, "d")]), "duplicate_call_id"),
        ({"candidates": [{"content": {"role": "model", "parts": {"text": "x"}}}]}, "invalid_parts"),
        ({"candidates": ["x"]}, "invalid_candidate"),
        (
            _response([{"functionCall": {"name": "f", "partialArgs": [{"jsonPath": "$.a"}]}}]),
            "partial_arguments",
        ),
        (_response([_call("f", '{"a": ')]), "truncated"),
    ],
)
def test_each_malformed_shape_is_a_typed_parse_error(value: Any, reason: str) -> None:
    result = parse(value)
    assert result.error is not None
    assert result.error.category == "parse_error"
    assert result.error.details["reason"] == reason, result.error


def test_other_formats_are_not_read_as_gemini() -> None:
    legacy = parse({"function_call": {"name": "f", "arguments": '{"a": 1}'}})
    assert legacy.format == "openai_chat" and legacy.calls[0].arguments == {"a": 1}
    blocks = [{"type": "text", "text": "hi"}, {"type": "tool_use", "id": "t", "name": "f", "input": {}}]
    assert parse({"role": "assistant", "content": blocks}).format == "anthropic"
    chat = {"choices": [{"message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}]}
    assert parse(chat).format == "openai_chat"
    assert parse({"text": "hi", "note": 1}).error is not None  # not a part: a field no part has


def _chunk(parts: list[Any], reason: str | None = None) -> dict[str, Any]:
    cand: dict[str, Any] = {"content": {"role": "model", "parts": parts}}
    if reason is not None:
        cand["finishReason"] = reason
    return {"candidates": [cand]}


STREAM = [
    _chunk([{"text": "Checking "}]),
    _chunk([{"text": "both."}, _call("get_weather", {"city": "Paris"}, "a1")]),
    _chunk([_call("get_weather", {"city": "Rome"}, "a2")], "STOP"),
]


def test_a_streamed_response_reports_each_whole_call_as_its_chunk_arrives() -> None:
    stream = StreamParser()
    fed = [[c.id for c in stream.feed(chunk)] for chunk in STREAM]
    assert fed == [[], ["a1"], ["a2"]]
    result = stream.finish()
    assert result.error is None
    assert result.calls == parse(_response(PARALLEL)).calls
    assert result.content == "Checking both."
    assert parse(stream.output()).calls == result.calls
    assert call_ids(STREAM) == ("a1", "a2")


def test_a_streamed_response_of_sdk_chunks_is_read_as_the_dicts_are() -> None:
    stream = StreamParser()
    for chunk in STREAM:
        stream.feed(_Response.model_validate(chunk))  # type: ignore[arg-type]  # read by its model_dump()
    assert stream.finish().calls == parse(STREAM).calls


def test_a_stream_cut_by_the_token_limit_or_without_its_end_runs_none_of_its_calls() -> None:
    cut = parse([*STREAM[:2], _chunk([_call("g", {}, "a3")], "MAX_TOKENS")])
    assert cut.error is not None and cut.error.details["reason"] == "cut_off"
    assert cut.error.details["call_ids"] == ["a1", "a3"]
    dropped = parse(STREAM[:2])
    assert dropped.calls == () and dropped.error is not None
    assert dropped.error.details["reason"] == "cut_off"


NAMES = (
    st.sampled_from(["get_weather", "f", "", " ", "a.b"]) | st.none() | st.integers() | st.text(max_size=6)
)
ARGS: st.SearchStrategy[Any] = st.one_of(
    st.none(),
    st.dictionaries(st.text(max_size=4), st.integers() | st.text(max_size=4), max_size=3),
    st.lists(st.integers(), max_size=2),
    st.integers(),
    st.sampled_from(["{}", '{"a":1}', "{bad", ""]),
)
IDS = st.none() | st.text(max_size=4) | st.integers() | st.just(["x"])
CALL_BODIES = st.fixed_dictionaries({}, optional={"name": NAMES, "args": ARGS, "id": IDS})
PARTS = st.one_of(
    st.builds(lambda t: {"text": t}, st.text(max_size=10)),
    st.builds(lambda t: {"text": t, "thought": True}, st.text(max_size=10)),
    st.builds(lambda b: {"functionCall": b}, CALL_BODIES),
    st.builds(lambda b: {"function_call": b, "text": None, "thought": None}, CALL_BODIES),
    st.none() | st.integers() | st.text(max_size=4),
    st.dictionaries(
        st.sampled_from(["functionCall", "text", "thought", "inlineData"]), st.none() | st.text(max_size=3)
    ),
)
REASONS = st.none() | st.sampled_from(
    ["STOP", "MAX_TOKENS", "SAFETY", "MALFORMED_FUNCTION_CALL", "OTHER", ""]
)
ROLES = st.none() | st.sampled_from(["model", "user", "function", "assistant"]) | st.integers()


@st.composite
def gemini_messages(draw: st.DrawFn) -> Any:
    parts = draw(st.lists(PARTS, max_size=5))
    content: dict[str, Any] = {"parts": parts}
    role = draw(ROLES)
    if role is not None:
        content["role"] = role
    candidate: dict[str, Any] = {"content": content}
    reason = draw(REASONS)
    if reason is not None:
        candidate["finishReason"] = reason
    shape = draw(st.sampled_from(["response", "candidate", "content", "parts", "chunks", "text", "cut"]))
    if shape == "candidate":
        return candidate
    if shape == "content":
        return content
    if shape == "parts":
        return parts
    if shape == "chunks":
        return [{"candidates": [{"content": {"parts": [p]}}]} for p in parts] + [{"candidates": [candidate]}]
    response = {"candidates": draw(st.sampled_from([[candidate], [], [candidate, 3], [None], None]))}
    if shape == "response":
        return response
    text = json.dumps(response)
    return text if shape == "text" else text[: draw(st.integers(0, len(text)))]


def _well_formed(call: ToolCall) -> bool:
    return (
        isinstance(call.name, str)
        and bool(call.name.strip())
        and (call.id is None or isinstance(call.id, str))
    )


@settings(max_examples=400, deadline=None)
@given(gemini_messages())
def test_any_gemini_message_whole_or_cut_parses_to_calls_or_a_typed_error(message: Any) -> None:
    result = parse(message)
    if result.error is not None:
        assert result.error.category == "parse_error", result.error
        assert isinstance(result.error.details.get("reason"), str)
    assert all(_well_formed(c) for c in result.calls)
    ids = [c.id for c in result.calls if c.id]
    assert len(ids) == len(set(ids))
    assert isinstance(call_ids(message), tuple)
    stream = StreamParser()
    for chunk in message if isinstance(message, list) and all(isinstance(m, dict) for m in message) else ():
        stream.feed(chunk)
    assert stream.finish().error is None or stream.finish().error.category == "parse_error"  # type: ignore[union-attr]
