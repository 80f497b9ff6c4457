"""Malformed and truncated outputs: a ``parse_error`` that says what and where, and no guessed call."""

from __future__ import annotations

from typing import Any

from actionspace.parse import ParseResult, parse
from tests.parse import samples


def fault(result: ParseResult) -> dict[str, Any]:
    assert result.error is not None, result
    assert result.error.category == "parse_error"
    assert result.error.recovery == ("re_emit_call",)
    assert result.error.retryable is False
    return dict(result.error.details)


def names(result: ParseResult) -> list[str]:
    return [c.name for c in result.calls]


def test_a_truncated_openai_entry_string_is_a_parse_error_at_the_cut() -> None:
    text = samples.OPENAI_ENTRY[:60]
    details = fault(parse(text))
    assert details["reason"] == "truncated"
    assert details["position"] == text.rindex('"')
    assert (details["line"], details["column"]) == (1, text.rindex('"') + 1)


def test_arguments_that_are_not_json_are_a_parse_error_inside_the_arguments_string() -> None:
    result = parse(
        {"id": "call_7", "type": "function", "function": {"name": "f", "arguments": '{"a": 1 "b": 2}'}}
    )
    details = fault(result)
    assert result.calls == ()
    assert details["reason"] == "invalid_json"
    assert details["path"] == "$.function.arguments"
    assert (details["position"], details["id"], details["index"]) == (8, "call_7", 0)
    assert "call_7" in result.error.message if result.error else False


def test_a_bad_second_tool_call_keeps_the_first() -> None:
    message = {
        "role": "assistant",
        "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}},
            {"id": "b", "type": "function", "function": {"name": "g", "arguments": '{"x": tr'}},
        ],
    }
    result = parse(message)
    details = fault(result)
    assert names(result) == ["f"]
    # the arguments stop inside ``true``: cut off, not JSON written wrong
    assert (details["index"], details["id"], details["reason"]) == (1, "b", "truncated")
    assert details["path"] == "$.tool_calls[1].function.arguments"


def test_a_call_without_a_name_is_a_parse_error() -> None:
    details = fault(parse({"type": "tool_use", "id": "toolu_1", "input": {}}))
    assert (details["reason"], details["format"], details["id"]) == ("missing_name", "anthropic", "toolu_1")


def test_objects_that_are_not_calls_or_assistant_messages_are_parse_errors() -> None:
    assert fault(parse({"role": "user", "content": "hi"}))["reason"] == "not_assistant"
    assert fault(parse({"temperature": 21}))["reason"] == "unrecognized_object"
    assert fault(parse({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))["reason"] == "unsupported_method"
    assert fault(parse(3.5))["reason"] == "unsupported_type"
    assert fault(parse('{"temperature": 21}'))["reason"] == "unrecognized_object"


def test_invalid_utf8_bytes_are_a_parse_error_at_the_bad_byte() -> None:
    details = fault(parse(b'{"name": "f"\xff}'))
    assert (details["reason"], details["position"]) == ("invalid_utf8", 12)


def test_a_truncated_hermes_call_is_dropped_and_the_complete_one_kept() -> None:
    cut = samples.HERMES.index('"2024-10-01"') + 5
    result = parse(samples.HERMES[:cut])
    details = fault(result)
    assert names(result) == ["get_current_temperature"]
    assert (details["format"], details["reason"], details["index"]) == ("hermes", "truncated", 1)
    assert details["position"] == samples.HERMES.index('"2024-10-01"')


def test_an_unterminated_tool_call_tag_is_a_parse_error_even_when_its_json_is_complete() -> None:
    text = 'Calling.\n<tool_call>\n{"name": "f", "arguments": {}}\n'
    result = parse(text)
    details = fault(result)
    assert result.calls == ()
    assert (details["reason"], details["position"], details["line"], details["column"]) == (
        "unterminated_block",
        text.index("<tool_call>"),
        2,
        1,
    )


def test_text_after_the_hermes_json_body_is_a_parse_error() -> None:
    text = '<tool_call>\n{"name": "f", "arguments": {}} and more\n</tool_call>'
    details = fault(parse(text))
    assert (details["reason"], details["position"]) == ("unexpected_text", text.index("and more"))


def test_a_truncated_qwen3_parameter_is_a_parse_error_at_the_parameter() -> None:
    cut = samples.QWEN3_CODER.index("120")
    details = fault(parse(samples.QWEN3_CODER[:cut]))
    assert (details["format"], details["reason"]) == ("qwen3_xml", "truncated")
    assert details["position"] == samples.QWEN3_CODER.index("<parameter=timeout>")


def test_a_qwen3_function_without_its_closing_tag_is_a_parse_error() -> None:
    text = "<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>\n</tool_call>"
    details = fault(parse(text))
    assert (details["reason"], details["position"]) == ("truncated", text.index("<function="))


def test_a_truncated_second_llama_call_keeps_the_first() -> None:
    result = parse(samples.LLAMA3_SEMICOLONS[:-10])
    details = fault(result)
    assert names(result) == ["get_weather"]
    assert (details["format"], details["reason"], details["index"]) == ("llama3_json", "truncated", 1)
    assert details["position"] == samples.LLAMA3_SEMICOLONS.index('"Europe/Paris"')


def test_a_truncated_pythonic_list_is_a_parse_error() -> None:
    details = fault(parse(samples.PYTHONIC[:30]))
    assert (details["format"], details["reason"]) == ("pythonic", "truncated")
    assert details["position"] == samples.PYTHONIC.index('"San Francisco"')


def test_pythonic_positional_arguments_are_a_parse_error_at_the_argument() -> None:
    text = "[get_weather(city='Paris'), get_time('UTC')]"
    result = parse(text)
    details = fault(result)
    assert result.calls == ()
    assert (details["reason"], details["position"]) == ("positional_argument", text.index("'UTC'"))


def test_pythonic_non_literal_values_are_a_parse_error_at_the_value() -> None:
    text = "[get_weather(city=home_city)]"
    details = fault(parse(text))
    assert (details["reason"], details["position"]) == ("non_literal_argument", text.index("home_city"))


def test_pythonic_positions_count_characters_not_bytes() -> None:
    text = "[translate(text='héllo wörld', to=lang)]"
    details = fault(parse(text))
    assert details["position"] == text.index("lang")


def test_a_truncated_mistral_call_keeps_the_calls_before_it() -> None:
    cut = samples.MISTRAL_V13.rindex("best")
    result = parse(samples.MISTRAL_V13[:cut])
    details = fault(result)
    assert names(result) == ["get_weather"]
    assert (details["format"], details["reason"], details["index"]) == ("mistral", "truncated", 1)
    assert details["position"] == samples.MISTRAL_V13.index('"café')


def test_a_mistral_name_without_arguments_is_a_parse_error() -> None:
    text = "[TOOL_CALLS]get_weather"
    details = fault(parse(text))
    assert (details["reason"], details["position"]) == ("truncated", len(text))


def test_a_truncated_deepseek_call_keeps_the_first_and_reports_the_cut() -> None:
    cut = samples.DEEPSEEK_R1.rindex("Shanghai")
    result = parse(samples.DEEPSEEK_R1[:cut])
    details = fault(result)
    assert names(result) == ["get_current_weather"]
    assert (details["format"], details["reason"], details["index"]) == ("deepseek_v3", "truncated", 1)
    assert details["position"] == cut - 1


def test_a_deepseek_v31_call_without_its_end_token_is_not_emitted() -> None:
    text = samples.DEEPSEEK_V31[: samples.DEEPSEEK_V31.index("<｜tool▁call▁end｜>")]
    result = parse(text)
    details = fault(result)
    assert result.calls == ()
    assert (details["reason"], details["position"]) == (
        "unterminated_call",
        text.index("<｜tool▁call▁begin｜>"),
    )


def test_a_truncated_glm_value_is_a_parse_error_at_the_value() -> None:
    cut = samples.GLM45.index("2024")
    details = fault(parse(samples.GLM45[:cut]))
    assert (details["format"], details["reason"]) == ("glm45", "truncated")
    assert details["position"] == cut - len("<arg_value>")


def test_a_truncated_kimi_call_keeps_the_first_and_names_the_call_id() -> None:
    cut = samples.KIMI_K2.index("Shanghai")
    result = parse(samples.KIMI_K2[:cut])
    details = fault(result)
    assert names(result) == ["get_weather"]
    assert (details["format"], details["reason"], details["id"]) == (
        "kimi_k2",
        "truncated",
        "functions.get_weather:1",
    )
    assert details["position"] == cut - 1


def test_a_kimi_section_without_its_end_keeps_the_complete_calls_and_reports_it() -> None:
    text = samples.KIMI_K2[: samples.KIMI_K2.index("<|tool_calls_section_end|>")]
    result = parse(text)
    details = fault(result)
    assert len(result.calls) == 2
    assert (details["reason"], details["position"]) == (
        "unterminated_section",
        text.index("<|tool_calls_section_begin|>"),
    )
    assert "index" not in details


def test_a_kimi_call_id_without_an_index_is_a_parse_error() -> None:
    text = (
        "<|tool_calls_section_begin|><|tool_call_begin|>get_weather<|tool_call_argument_begin|>{}"
        "<|tool_call_end|><|tool_calls_section_end|>"
    )
    details = fault(parse(text))
    assert (details["reason"], details["position"]) == ("invalid_call_id", text.index("get_weather"))


def test_a_truncated_harmony_call_is_a_parse_error() -> None:
    text = samples.HARMONY[:-20]
    result = parse(text)
    details = fault(result)
    assert result.calls == ()
    assert (details["format"], details["reason"]) == ("harmony", "truncated")
    assert details["position"] == text.rindex('"unit')
    assert result.reasoning == "User asks weather in SF. Use get_current_weather."


def test_a_harmony_header_without_message_is_a_parse_error() -> None:
    text = samples.HARMONY[: samples.HARMONY.index("<|message|>{")]
    details = fault(parse(text))
    assert (details["reason"], details["position"]) == ("truncated", text.index("<|start|>"))


def test_an_unclosed_tool_code_fence_is_a_parse_error_at_the_fence() -> None:
    text = samples.GEMMA_TOOL_CODE.rstrip()[:-3]
    details = fault(parse(text))
    assert (details["format"], details["reason"], details["position"]) == (
        "gemma_tool_code",
        "unterminated_fence",
        text.index("```"),
    )


def test_a_truncated_function_gemma_string_is_a_parse_error() -> None:
    text = samples.FUNCTION_GEMMA[:80]
    details = fault(parse(text))
    assert (details["format"], details["reason"]) == ("function_gemma", "truncated")
    assert details["position"] == text.rindex("<escape>")


def test_a_function_gemma_call_without_end_token_is_not_emitted() -> None:
    text = samples.FUNCTION_GEMMA[: -len("<end_function_call>")]
    result = parse(text)
    details = fault(result)
    assert result.calls == ()
    assert (details["reason"], details["position"]) == ("unterminated_block", 0)


def test_a_truncated_json_fence_that_starts_like_a_call_is_a_parse_error() -> None:
    text = samples.FENCED_JSON[:60]
    details = fault(parse(text))
    assert (details["format"], details["reason"]) == ("fenced_json", "truncated")
    assert details["position"] == text.rindex('"')


def test_unterminated_reasoning_is_reported_and_kept_as_reasoning() -> None:
    text = "Let me think.<think>The user wants"
    result = parse(text)
    details = fault(result)
    assert (details["reason"], details["position"]) == ("unterminated_reasoning", text.index("<think>"))
    assert (result.reasoning, result.content) == ("The user wants", "Let me think.")


def test_errors_in_message_content_name_the_content_path() -> None:
    content = '<tool_call>\n{"name": "f", "arguments": {"a": \n</tool_call>'
    details = fault(parse({"role": "assistant", "content": content}))
    assert details["path"] == "$.content"
    assert details["position"] == content.index("\n</tool_call>") + 1
    assert (details["line"], details["column"]) == (3, 1)


def test_a_qwen3_parameter_running_into_the_next_one_is_a_parse_error_not_a_merged_value() -> None:
    text = "<tool_call>\n<function=f>\n<parameter=a>\n1\n<parameter=b>\n2\n</parameter>\n</function>\n"
    result = parse(text)
    details = fault(result)
    assert result.calls == ()
    assert (details["reason"], details["position"]) == ("unterminated_value", text.index("<parameter=a>"))


def test_a_glm_value_running_into_the_next_key_is_a_parse_error() -> None:
    text = "<tool_call>f\n<arg_key>a</arg_key><arg_value>1<arg_key>b</arg_key><arg_value>2</arg_value>"
    details = fault(parse(text))
    assert (details["reason"], details["position"]) == ("unterminated_value", text.index("<arg_value>"))


def test_a_call_giving_both_arguments_and_parameters_is_ambiguous() -> None:
    details = fault(parse('{"name": "f", "arguments": {"a": 1}, "parameters": {"a": 2}}'))
    assert details["reason"] == "ambiguous_arguments"


def test_top_level_json_that_is_not_a_call_is_a_parse_error_but_bracketed_prose_is_text() -> None:
    assert fault(parse("[1, 2]"))["reason"] == "not_a_call"
    prose = parse("[1] Smith et al. showed the effect.")
    assert (prose.calls, prose.error, prose.content) == ((), None, "[1] Smith et al. showed the effect.")
