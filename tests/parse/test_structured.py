"""Provider objects: OpenAI chat and Responses, Anthropic, MCP, generic dicts, ToolCall, lists."""

from __future__ import annotations

import json
from typing import Any

from actionspace.parse import ParseResult, parse
from actionspace.types import ToolCall
from tests.parse import samples


def calls_of(result: ParseResult) -> list[tuple[str, Any, str | None]]:
    return [(c.name, c.arguments, c.id) for c in result.calls]


def test_a_tool_call_is_returned_as_is() -> None:
    call = ToolCall(name="add", arguments={"a": 1}, id="c1")
    result = parse(call)
    assert result.calls == (call,)
    assert result.calls[0] is call
    assert (result.content, result.reasoning, result.error, result.format) == (None, None, None, "toolcall")


def test_the_benchmark_openai_entry_string_takes_the_fast_path() -> None:
    result = parse(samples.OPENAI_ENTRY)
    assert calls_of(result) == [("add", {"a": 1, "b": 2}, "call_1")]
    assert (result.error, result.format, result.content) == (None, "openai_chat", None)


def test_an_openai_entry_dict_and_its_json_text_parse_the_same() -> None:
    entry = json.loads(samples.OPENAI_ENTRY)
    assert parse(entry) == parse(samples.OPENAI_ENTRY)


def test_an_entry_whose_arguments_are_already_a_dict_keeps_them() -> None:
    result = parse({"id": "c", "type": "function", "function": {"name": "f", "arguments": {"x": [1]}}})
    assert calls_of(result) == [("f", {"x": [1]}, "c")]


def test_a_chat_completion_yields_the_first_choice_calls_in_order() -> None:
    result = parse(samples.OPENAI_COMPLETION)
    assert calls_of(result) == [
        ("get_weather", {"location": "Paris, France"}, "call_Dn2RJJSxzDm49vlVTehseJ0k"),
        ("get_weather", {"location": "Bogotá, Colombia"}, "call_Dn2RJJSxzDm49vlVTehseJ0l"),
    ]
    assert (result.content, result.reasoning, result.error, result.format) == (
        None,
        None,
        None,
        "openai_chat",
    )


def test_an_assistant_message_keeps_content_and_reasoning_content() -> None:
    result = parse(samples.VLLM_REASONING_MESSAGE)
    assert calls_of(result) == [
        ("get_weather", {"city": "Tokyo", "unit": "celsius"}, "chatcmpl-tool-8e1f6c2a")
    ]
    assert result.content == "I'll look that up."
    assert result.reasoning == "The user wants the weather in Tokyo; get_weather takes a city."


def test_a_legacy_function_call_is_one_call_without_id() -> None:
    result = parse(samples.LEGACY_FUNCTION_CALL)
    assert calls_of(result) == [("get_current_weather", {"location": "Boston, MA"}, None)]
    assert result.error is None


def test_message_content_from_a_server_without_tool_parser_is_read_as_model_text() -> None:
    message = {"role": "assistant", "content": samples.HERMES, "tool_calls": []}
    result = parse(message)
    assert [c.name for c in result.calls] == ["get_current_temperature", "get_temperature_date"]
    assert result.content == "I'll fetch both."
    assert result.format == "hermes"


def test_message_content_that_is_json_data_stays_content() -> None:
    result = parse({"role": "assistant", "content": '{"temperature": 21, "unit": "C"}'})
    assert (result.calls, result.error) == ((), None)
    assert result.content == '{"temperature": 21, "unit": "C"}'


def test_a_responses_object_yields_calls_text_and_reasoning_summary() -> None:
    result = parse(samples.RESPONSES_OBJECT)
    assert calls_of(result) == [("get_weather", {"location": "Paris, France"}, "call_12345xyz")]
    assert result.content == "Fetching the forecast now."
    assert result.reasoning == "Checking Paris weather before answering."
    assert result.format == "openai_responses"


def test_responses_function_call_items_alone_are_calls() -> None:
    items = [item for item in samples.RESPONSES_OBJECT["output"] if item["type"] == "function_call"]
    result = parse(items)
    assert calls_of(result) == [("get_weather", {"location": "Paris, France"}, "call_12345xyz")]


def test_an_anthropic_message_splits_thinking_text_and_tool_use() -> None:
    result = parse(samples.ANTHROPIC_MESSAGE)
    assert calls_of(result) == [
        ("get_weather", {"location": "San Francisco, CA", "unit": "celsius"}, "toolu_01A09q90qw90lq917835lq9")
    ]
    assert result.content == "I'll check the current weather in San Francisco for you."
    assert result.reasoning == "The user asked about San Francisco."
    assert (result.error, result.format) == (None, "anthropic")


def test_anthropic_content_blocks_alone_are_accepted() -> None:
    result = parse(samples.ANTHROPIC_MESSAGE["content"])
    assert [c.id for c in result.calls] == ["toolu_01A09q90qw90lq917835lq9"]
    assert result.format == "anthropic"


def test_an_mcp_request_yields_its_params_with_the_request_id() -> None:
    result = parse(samples.MCP_REQUEST)
    assert calls_of(result) == [("get_weather", {"location": "New York"}, "2")]
    assert result.format == "mcp"


def test_mcp_params_and_generic_dicts_are_calls() -> None:
    assert calls_of(parse({"name": "get_weather", "arguments": {"location": "NY"}})) == [
        ("get_weather", {"location": "NY"}, None)
    ]
    assert calls_of(parse({"name": "f", "parameters": {"x": 1}})) == [("f", {"x": 1}, None)]
    assert calls_of(parse({"name": "f", "args": {"x": 1}, "id": "a"})) == [("f", {"x": 1}, "a")]
    assert calls_of(parse({"name": "ping"})) == [("ping", {}, None)]


def test_arguments_that_decode_to_a_non_object_are_emitted_for_validation_to_reject() -> None:
    result = parse({"type": "function", "function": {"name": "f", "arguments": "[1, 2]"}})
    assert calls_of(result) == [("f", [1, 2], None)]
    assert result.error is None


def test_a_list_of_accepted_items_concatenates_their_calls() -> None:
    call = ToolCall(name="first", arguments={})
    result = parse([call, samples.MCP_REQUEST, samples.OPENAI_ENTRY])
    assert [c.name for c in result.calls] == ["first", "get_weather", "add"]
    assert result.error is None


def test_a_pydantic_sdk_object_is_read_through_model_dump() -> None:
    class Message:
        def model_dump(self) -> dict[str, Any]:
            return samples.LEGACY_FUNCTION_CALL

    assert [c.name for c in parse(Message()).calls] == ["get_current_weather"]


def test_bytes_are_decoded_as_utf8() -> None:
    result = parse(samples.OPENAI_ENTRY.encode())
    assert calls_of(result) == [("add", {"a": 1, "b": 2}, "call_1")]


def test_none_and_empty_inputs_are_empty_results_not_errors() -> None:
    raw: object
    for raw in (None, [], "", "   "):
        result = parse(raw)
        assert (result.calls, result.content, result.error) == ((), None, None)


def test_a_result_round_trips_through_its_dict_form() -> None:
    result = parse(samples.ANTHROPIC_MESSAGE)
    assert ParseResult.from_dict(json.loads(json.dumps(result.to_dict()))) == result


def test_custom_tool_calls_keep_their_free_text_input() -> None:
    chat = {"id": "call_3", "type": "custom", "custom": {"name": "apply_patch", "input": "*** Begin Patch"}}
    responses = {
        "type": "custom_tool_call",
        "call_id": "call_4",
        "name": "apply_patch",
        "input": "*** Begin Patch",
    }
    assert calls_of(parse(chat)) == [("apply_patch", "*** Begin Patch", "call_3")]
    assert calls_of(parse(responses)) == [("apply_patch", "*** Begin Patch", "call_4")]
