"""Raw model text in the formats open-weight models emit without a server-side tool parser."""

from __future__ import annotations

from typing import Any

from actionspace.parse import ParseResult, parse
from tests.parse import samples

CODER_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "run_shell",
            "parameters": {
                "type": "object",
                "properties": {"command": {"type": "string"}, "timeout": {"type": "integer"}},
            },
        },
    },
    {
        "name": "read_file",
        "input_schema": {
            "type": "object",
            "properties": {"path": {"type": "string"}, "ranges": {"type": "array"}},
        },
    },
]


def calls_of(result: ParseResult) -> list[tuple[str, Any, str | None]]:
    return [(c.name, c.arguments, c.id) for c in result.calls]


def test_plain_text_is_content_with_no_calls_and_no_error() -> None:
    result = parse(samples.PLAIN)
    assert (result.calls, result.content, result.reasoning, result.error) == ((), samples.PLAIN, None, None)
    assert result.format == "text"


def test_hermes_tool_calls_yield_each_call_in_order() -> None:
    result = parse(samples.HERMES)
    assert calls_of(result) == [
        ("get_current_temperature", {"location": "San Francisco, CA, USA"}, None),
        ("get_temperature_date", {"location": "San Francisco, CA, USA", "date": "2024-10-01"}, None),
    ]
    assert result.content == "I'll fetch both."
    assert result.reasoning == "The user wants today's temperature and tomorrow's forecast. Two calls."
    assert (result.error, result.format) == (None, "hermes")


def test_reasoning_whose_opening_tag_was_in_the_prompt_is_still_split_off() -> None:
    text = 'I should call get_time.\n</think>\n\n<tool_call>\n{"name": "get_time"}\n</tool_call>'
    result = parse(text)
    assert calls_of(result) == [("get_time", {}, None)]
    assert result.reasoning == "I should call get_time."
    assert result.content is None


def test_a_tool_call_mentioned_inside_reasoning_is_not_a_call() -> None:
    text = "<think>Maybe I emit <tool_call> later.</think>The answer is 4."
    result = parse(text)
    assert (result.calls, result.content, result.error) == ((), "The answer is 4.", None)
    assert result.reasoning == "Maybe I emit <tool_call> later."


def test_qwen3_coder_xml_parameters_are_typed_by_the_tool_schema() -> None:
    result = parse(samples.QWEN3_CODER, tools=CODER_TOOLS)
    assert calls_of(result) == [
        ("run_shell", {"command": "pytest -q tests/test_api.py", "timeout": 120}, None),
        ("read_file", {"path": "src/api.py", "ranges": [[1, 40], [80, 120]]}, None),
    ]
    assert result.content == "I'll run the failing test file first."
    assert (result.error, result.format) == (None, "qwen3_xml")


def test_qwen3_coder_parameters_without_schema_are_json_when_they_are_json() -> None:
    text = (
        "<tool_call>\n<function=f>\n<parameter=n>\n5\n</parameter>\n"
        "<parameter=name>\nAda\n</parameter>\n</function>\n</tool_call>"
    )
    assert calls_of(parse(text)) == [("f", {"n": 5, "name": "Ada"}, None)]


def test_llama3_python_tag_json_uses_parameters_as_arguments() -> None:
    result = parse(samples.LLAMA3_PYTHON_TAG)
    assert calls_of(result) == [
        ("get_current_conditions", {"location": "San Francisco, CA", "unit": "Fahrenheit"}, None)
    ]
    assert (result.content, result.error, result.format) == (None, None, "llama3")


def test_llama3_bare_json_calls_separated_by_semicolons_are_several_calls() -> None:
    result = parse(samples.LLAMA3_SEMICOLONS)
    assert calls_of(result) == [
        ("get_weather", {"city": "Paris"}, None),
        ("get_time", {"timezone": "Europe/Paris"}, None),
    ]
    assert (result.error, result.format) == (None, "llama3_json")


def test_bare_json_followed_by_prose_keeps_the_prose_as_content() -> None:
    result = parse('{"name": "get_weather", "arguments": {"city": "Oslo"}}\n\nI have asked for the weather.')
    assert calls_of(result) == [("get_weather", {"city": "Oslo"}, None)]
    assert result.content == "I have asked for the weather."
    assert result.format == "json"


def test_a_bare_json_array_of_calls_is_several_calls() -> None:
    result = parse('[{"name": "a", "arguments": {}}, {"name": "b", "arguments": {"x": 1}}]')
    assert calls_of(result) == [("a", {}, None), ("b", {"x": 1}, None)]


def test_pythonic_call_lists_take_keyword_literals_and_dotted_names() -> None:
    result = parse(samples.PYTHONIC)
    assert calls_of(result) == [
        ("get_weather", {"city": "San Francisco", "days": 3}, None),
        ("math.factorial", {"n": 5}, None),
        ("f", {"x": [1, 2], "y": {"a": None}, "ok": True}, None),
    ]
    assert (result.error, result.format) == (None, "pythonic")


def test_llama4_python_start_wraps_a_pythonic_list() -> None:
    result = parse(samples.LLAMA4)
    assert calls_of(result) == [
        ("get_weather", {"city": "Seattle", "metric": "celsius"}, None),
        ("get_weather", {"city": "Tokyo", "metric": "celsius"}, None),
    ]
    assert (result.content, result.error) == (None, None)


def test_mistral_json_array_after_tool_calls_token() -> None:
    result = parse(samples.MISTRAL_V3)
    assert calls_of(result) == [
        ("get_current_weather", {"location": "Paris, France", "format": "celsius"}, None)
    ]
    assert (result.content, result.error, result.format) == (None, None, "mistral")


def test_mistral_name_args_form_yields_one_call_per_tool_calls_token() -> None:
    result = parse(samples.MISTRAL_V13)
    assert calls_of(result) == [
        ("get_weather", {"city": "Zürich", "unit": "c"}, None),
        ("search", {"query": 'café "best"', "filters": {"tags": ["a"]}}, None),
    ]
    assert result.reasoning == "The user wants weather and a search. Two tools."
    assert result.content is None


def test_mistral_call_id_form_keeps_the_call_id() -> None:
    assert calls_of(parse(samples.MISTRAL_V11)) == [("get_weather", {"city": "Bern"}, "abcDEF123")]


def test_mistral_v11_name_followed_directly_by_json() -> None:
    result = parse('Sure.[TOOL_CALLS]add{"a": 3.5, "b": 4}')
    assert calls_of(result) == [("add", {"a": 3.5, "b": 4}, None)]
    assert result.content == "Sure."


def test_deepseek_r1_fenced_calls_yield_each_call_after_reasoning() -> None:
    result = parse(samples.DEEPSEEK_R1)
    assert calls_of(result) == [
        ("get_current_weather", {"location": "Beijing"}, None),
        ("get_current_weather", {"location": "Shanghai"}, None),
    ]
    assert result.reasoning == "I need the weather for Beijing, then Shanghai."
    assert (result.content, result.error, result.format) == (None, None, "deepseek_v3")


def test_deepseek_v31_calls_put_the_name_before_the_separator() -> None:
    result = parse(samples.DEEPSEEK_V31)
    assert calls_of(result) == [("get_weather", {"city": "Hangzhou", "date": "2025-08-21"}, None)]
    assert (result.content, result.format) == ("Let me check that.", "deepseek_v31")


def test_glm45_arg_pairs_are_typed_by_schema_or_read_as_json() -> None:
    tools = [{"name": "get_weather", "parameters": {"properties": {"date": {"type": "string"}}}}]
    result = parse(samples.GLM45, tools=tools)
    assert calls_of(result) == [("get_weather", {"city": "Beijing", "date": "2024-06-27", "days": 3}, None)]
    assert result.content == "I'll look that up."
    assert result.reasoning == "The user asks for Beijing weather on a date; I have get_weather."
    assert (result.error, result.format) == (None, "glm45")


def test_glm_calls_without_newline_before_the_first_key_parse_too() -> None:
    result = parse("<tool_call>get_weather<arg_key>city</arg_key><arg_value>Tokyo</arg_value></tool_call>")
    assert calls_of(result) == [("get_weather", {"city": "Tokyo"}, None)]


def test_kimi_k2_calls_take_their_id_from_the_call_header() -> None:
    result = parse(samples.KIMI_K2)
    assert calls_of(result) == [
        ("get_weather", {"city": "Beijing"}, "functions.get_weather:0"),
        ("get_weather", {"city": "Shanghai"}, "functions.get_weather:1"),
    ]
    assert result.content == "I'll check the weather for both cities."
    assert (result.error, result.format) == (None, "kimi_k2")


def test_harmony_commentary_to_a_function_is_a_call_and_analysis_is_reasoning() -> None:
    result = parse(samples.HARMONY)
    assert calls_of(result) == [
        ("get_current_weather", {"location": "San Francisco, CA", "unit": "celsius"}, None)
    ]
    assert result.reasoning == "User asks weather in SF. Use get_current_weather."
    assert (result.content, result.error, result.format) == (None, None, "harmony")


def test_harmony_final_channel_is_content() -> None:
    result = parse(samples.HARMONY_FINAL)
    assert (result.calls, result.error) == ((), None)
    assert result.content == "It is sunny and 20°C in San Francisco."
    assert result.reasoning == "Weather returned 20C and sunny."


def test_harmony_call_without_the_dropped_stop_token_is_accepted_when_its_json_is_complete() -> None:
    text = '<|channel|>commentary to=functions.lookup <|constrain|>json<|message|>{"q": "x"}'
    assert calls_of(parse(text)) == [("lookup", {"q": "x"}, None)]


def test_gemma_tool_code_fence_is_a_pythonic_call() -> None:
    result = parse(samples.GEMMA_TOOL_CODE)
    assert calls_of(result) == [("get_product_name_by_PID", {"PID": "807ZPKBL9V"}, None)]
    assert result.content == "I can look up that product for you."
    assert result.format == "gemma_tool_code"


def test_function_gemma_escaped_strings_numbers_lists_and_objects() -> None:
    result = parse(samples.FUNCTION_GEMMA)
    assert calls_of(result) == [
        (
            "get_current_temperature",
            {
                "location": "Tokyo, Japan",
                "unit": "celsius",
                "days": 3,
                "detailed": True,
                "hours": [6, 12, 18],
                "filter": {"min": -2.5, "label": "a,b{c}"},
            },
            None,
        )
    ]
    assert (result.error, result.format) == (None, "function_gemma")


def test_several_json_fences_are_several_calls() -> None:
    result = parse(samples.FENCED_JSON)
    assert calls_of(result) == [
        ("web_search", {"query": "python 3.13 release date"}, None),
        ("web_search", {"query": "python 3.14 release date"}, None),
    ]
    assert result.content == "I'll call the search tool."
    assert result.format == "fenced_json"


def test_a_json_fence_that_is_not_a_call_stays_in_the_content() -> None:
    text = 'Use this config:\n```json\n{"retries": 3}\n```\nThen restart.'
    result = parse(text)
    assert (result.calls, result.content, result.error) == ((), text, None)


def test_end_of_turn_tokens_are_not_content() -> None:
    assert parse("Done.<|im_end|>").content == "Done."
    assert parse("Done.<|eot_id|>").content == "Done."
